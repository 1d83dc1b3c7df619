//! Reference 2-D convolution (cross-correlation, NCHW) and its three gradients,
//! written as direct nested loops.
//!
//! Output position `(oy, ox)` reads input row `oy * stride - padding + ky * dilation`
//! (likewise for columns); reads outside the input are zero padding. The data
//! gradient is computed in *gather* form (for each input pixel, which output
//! pixels read it) rather than by reversing the forward loop, so it is an
//! independent derivation that the unit tests tie to the forward by the adjoint
//! identity `<conv(x, w), dy> = <x, backward_data(dy, w)>`.

use crate::array::Array;
use verjus_core::ops::Conv2dParams;

/// Output length of one spatial axis, or `None` when the kernel does not fit.
pub fn output_len(
    input: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Option<usize> {
    if kernel == 0 || stride == 0 || dilation == 0 {
        return None;
    }
    let span = dilation * (kernel - 1) + 1;
    let padded = input + 2 * padding;
    (padded >= span).then(|| (padded - span) / stride + 1)
}

/// `[n, c_out, oh, ow]` for input dims `[n, c_in, h, w]` and weight dims `[c_out, c_in, kh, kw]`.
pub fn output_dims(x: &[usize], w: &[usize], p: Conv2dParams) -> Vec<usize> {
    let oh = output_len(x[2], w[2], p.stride[0], p.padding[0], p.dilation[0]);
    let ow = output_len(x[3], w[3], p.stride[1], p.padding[1], p.dilation[1]);
    vec![
        x[0],
        w[0],
        oh.expect("reference conv: height"),
        ow.expect("reference conv: width"),
    ]
}

/// The input coordinate read by output coordinate `o` at kernel tap `k`, if inside.
fn input_coord(
    o: usize,
    k: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    len: usize,
) -> Option<usize> {
    (o * stride + k * dilation)
        .checked_sub(padding)
        .filter(|&i| i < len)
}

/// `y = conv2d(x, w) + bias`.
pub fn conv2d(x: &Array, w: &Array, bias: Option<&Array>, p: Conv2dParams) -> Array {
    let [n, c_in, h, wd]: [usize; 4] = x.dims.clone().try_into().expect("rank 4 input");
    let [c_out, _, kh, kw]: [usize; 4] = w.dims.clone().try_into().expect("rank 4 weight");
    let out = output_dims(&x.dims, &w.dims, p);
    let (oh, ow) = (out[2], out[3]);
    let mut y = Array::zeros(out);
    for b in 0..n {
        for o in 0..c_out {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = bias.map_or(0.0, |bv| f64::from(bv.data[o]));
                    for c in 0..c_in {
                        for ky in 0..kh {
                            let Some(iy) =
                                input_coord(oy, ky, p.stride[0], p.padding[0], p.dilation[0], h)
                            else {
                                continue;
                            };
                            for kx in 0..kw {
                                let Some(ix) = input_coord(
                                    ox,
                                    kx,
                                    p.stride[1],
                                    p.padding[1],
                                    p.dilation[1],
                                    wd,
                                ) else {
                                    continue;
                                };
                                let xv = x.data[((b * c_in + c) * h + iy) * wd + ix];
                                let wv = w.data[((o * c_in + c) * kh + ky) * kw + kx];
                                acc += f64::from(xv) * f64::from(wv);
                            }
                        }
                    }
                    y.data[((b * c_out + o) * oh + oy) * ow + ox] = acc as f32;
                }
            }
        }
    }
    y
}

/// The output coordinate whose kernel tap `k` reads input coordinate `i`, if any.
fn output_coord(
    i: usize,
    k: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    len: usize,
) -> Option<usize> {
    let t = (i + padding).checked_sub(k * dilation)?;
    (t % stride == 0 && t / stride < len).then_some(t / stride)
}

/// `dx` for input dims `x_dims`, from `dy` and `w`.
pub fn conv2d_backward_data(dy: &Array, w: &Array, x_dims: &[usize], p: Conv2dParams) -> Array {
    let [n, c_in, h, wd]: [usize; 4] = x_dims.try_into().expect("rank 4 input");
    let [c_out, _, kh, kw]: [usize; 4] = w.dims.clone().try_into().expect("rank 4 weight");
    let (oh, ow) = (dy.dims[2], dy.dims[3]);
    let mut dx = Array::zeros(x_dims);
    for b in 0..n {
        for c in 0..c_in {
            for iy in 0..h {
                for ix in 0..wd {
                    let mut acc = 0f64;
                    for o in 0..c_out {
                        for ky in 0..kh {
                            let Some(oy) =
                                output_coord(iy, ky, p.stride[0], p.padding[0], p.dilation[0], oh)
                            else {
                                continue;
                            };
                            for kx in 0..kw {
                                let Some(ox) = output_coord(
                                    ix,
                                    kx,
                                    p.stride[1],
                                    p.padding[1],
                                    p.dilation[1],
                                    ow,
                                ) else {
                                    continue;
                                };
                                let g = dy.data[((b * c_out + o) * oh + oy) * ow + ox];
                                let wv = w.data[((o * c_in + c) * kh + ky) * kw + kx];
                                acc += f64::from(g) * f64::from(wv);
                            }
                        }
                    }
                    dx.data[((b * c_in + c) * h + iy) * wd + ix] = acc as f32;
                }
            }
        }
    }
    dx
}

/// `dw` for weight dims `w_dims`, from `x` and `dy`.
pub fn conv2d_backward_filter(x: &Array, dy: &Array, w_dims: &[usize], p: Conv2dParams) -> Array {
    let [n, c_in, h, wd]: [usize; 4] = x.dims.clone().try_into().expect("rank 4 input");
    let [c_out, _, kh, kw]: [usize; 4] = w_dims.try_into().expect("rank 4 weight");
    let (oh, ow) = (dy.dims[2], dy.dims[3]);
    let mut dw = Array::zeros(w_dims);
    for o in 0..c_out {
        for c in 0..c_in {
            for ky in 0..kh {
                for kx in 0..kw {
                    let mut acc = 0f64;
                    for b in 0..n {
                        for oy in 0..oh {
                            let Some(iy) =
                                input_coord(oy, ky, p.stride[0], p.padding[0], p.dilation[0], h)
                            else {
                                continue;
                            };
                            for ox in 0..ow {
                                let Some(ix) = input_coord(
                                    ox,
                                    kx,
                                    p.stride[1],
                                    p.padding[1],
                                    p.dilation[1],
                                    wd,
                                ) else {
                                    continue;
                                };
                                let g = dy.data[((b * c_out + o) * oh + oy) * ow + ox];
                                let xv = x.data[((b * c_in + c) * h + iy) * wd + ix];
                                acc += f64::from(g) * f64::from(xv);
                            }
                        }
                    }
                    dw.data[((o * c_in + c) * kh + ky) * kw + kx] = acc as f32;
                }
            }
        }
    }
    dw
}

/// `db[o] = sum of dy[:, o, :, :]`.
pub fn conv2d_backward_bias(dy: &Array) -> Array {
    let [n, c_out, oh, ow]: [usize; 4] = dy.dims.clone().try_into().expect("rank 4 dy");
    let data = (0..c_out)
        .map(|o| {
            let mut acc = 0f64;
            for b in 0..n {
                let base = (b * c_out + o) * oh * ow;
                acc += dy.data[base..base + oh * ow]
                    .iter()
                    .map(|&v| f64::from(v))
                    .sum::<f64>();
            }
            acc as f32
        })
        .collect();
    Array::new([c_out], data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::uniform;

    fn params(stride: usize, padding: usize, dilation: usize) -> Conv2dParams {
        Conv2dParams {
            stride: [stride; 2],
            padding: [padding; 2],
            dilation: [dilation; 2],
        }
    }

    #[test]
    fn one_channel_by_hand() {
        // x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]], w = [[1, 0], [0, -1]]:
        // y[i, j] = x[i, j] - x[i + 1, j + 1] = -4 everywhere.
        let x = Array::new([1, 1, 3, 3], (1..=9).map(|v| v as f32).collect());
        let w = Array::new([1, 1, 2, 2], vec![1.0, 0.0, 0.0, -1.0]);
        let y = conv2d(&x, &w, None, params(1, 0, 1));
        assert_eq!(y.dims, vec![1, 1, 2, 2]);
        assert_eq!(y.data, vec![-4.0; 4]);
        // Padding 1, stride 2: outputs at (-1,-1), (-1,1), (1,-1), (1,1), plus bias 10:
        // (-1,-1): 0 - x[0,0] = -1; (-1,1): 0 - x[0,2] = -3;
        // (1,-1): 0 - x[2,0] = -7; (1,1): x[1,1] - x[2,2] = -4.
        let b = Array::new([1], vec![10.0]);
        let y = conv2d(&x, &w, Some(&b), params(2, 1, 1));
        assert_eq!(y.data, vec![9.0, 7.0, 3.0, 6.0]);
        // Dilation 2 on the 3x3 input: one output, x[0,0] - x[2,2] = -8.
        let y = conv2d(&x, &w, None, params(1, 0, 2));
        assert_eq!(y.data, vec![-8.0]);
    }

    #[test]
    fn gradients_by_hand() {
        let x = Array::new([1, 1, 3, 3], (1..=9).map(|v| v as f32).collect());
        let dy = Array::new([1, 1, 2, 2], vec![1.0; 4]);
        // dw[ky, kx] = sum of the 2x2 window of x at offset (ky, kx).
        let dw = conv2d_backward_filter(&x, &dy, &[1, 1, 2, 2], params(1, 0, 1));
        assert_eq!(dw.data, vec![12.0, 16.0, 24.0, 28.0]);
        // dx = full correlation of dy with w: +1 at the top-left 2x2, -1 at the bottom-right 2x2.
        let w = Array::new([1, 1, 2, 2], vec![1.0, 0.0, 0.0, -1.0]);
        let dx = conv2d_backward_data(&dy, &w, &[1, 1, 3, 3], params(1, 0, 1));
        assert_eq!(
            dx.data,
            vec![1.0, 1.0, 0.0, 1.0, 0.0, -1.0, 0.0, -1.0, -1.0]
        );
        assert_eq!(conv2d_backward_bias(&dy).data, vec![4.0]);
    }

    fn dot(a: &Array, b: &Array) -> f64 {
        a.data
            .iter()
            .zip(&b.data)
            .map(|(&u, &v)| f64::from(u) * f64::from(v))
            .sum()
    }

    /// `<conv(x, w), dy> = <x, dx> = <w, dw>` for strided, padded, dilated convs.
    #[test]
    fn gradients_are_adjoint_to_the_forward() {
        let p = Conv2dParams {
            stride: [2, 1],
            padding: [1, 2],
            dilation: [1, 2],
        };
        let x = uniform(1, &[2, 3, 7, 6], -1.0, 1.0);
        let w = uniform(2, &[4, 3, 3, 2], -1.0, 1.0);
        let y = conv2d(&x, &w, None, p);
        let dy = uniform(3, &y.dims, -1.0, 1.0);
        let lhs = dot(&y, &dy);
        let dx = conv2d_backward_data(&dy, &w, &x.dims, p);
        let dw = conv2d_backward_filter(&x, &dy, &w.dims, p);
        assert!(
            (lhs - dot(&x, &dx)).abs() < 1e-3,
            "{lhs} vs {}",
            dot(&x, &dx)
        );
        assert!(
            (lhs - dot(&w, &dw)).abs() < 1e-3,
            "{lhs} vs {}",
            dot(&w, &dw)
        );
    }

    #[test]
    fn output_len_matches_pytorch() {
        assert_eq!(output_len(7, 3, 2, 1, 1), Some(4));
        assert_eq!(output_len(5, 3, 1, 0, 2), Some(1));
        assert_eq!(output_len(2, 3, 1, 0, 1), None);
        assert_eq!(output_len(2, 0, 1, 0, 1), None);
    }
}
