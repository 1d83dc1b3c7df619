//! Reference max and average 2-D pooling (NCHW) and their gradients.
//!
//! Window `(oy, ox)` covers input rows `oy * stride - padding ..+ kernel`. Max
//! pooling ignores padding (a padded position is not an element, so an all-negative
//! window still has a negative maximum) and picks the *first* maximum in row-major
//! window order; its gradient goes to that element only. Average pooling counts
//! padding as zeros in the divisor (`count_include_pad`), so every window divides
//! by `kernel_h * kernel_w`.

use crate::array::Array;
use crate::reference::conv::output_len;
use verjus_core::ops::{Pool2dParams, PoolKind};

/// `[n, c, oh, ow]` for input dims `[n, c, h, w]`.
pub fn output_dims(x: &[usize], p: Pool2dParams) -> Vec<usize> {
    let oh = output_len(x[2], p.kernel[0], p.stride[0], p.padding[0], 1);
    let ow = output_len(x[3], p.kernel[1], p.stride[1], p.padding[1], 1);
    vec![
        x[0],
        x[1],
        oh.expect("reference pool: height"),
        ow.expect("reference pool: width"),
    ]
}

/// Flat input indices of window `(oy, ox)` of plane `plane`, in row-major window order.
fn window(dims: &[usize], plane: usize, oy: usize, ox: usize, p: Pool2dParams) -> Vec<usize> {
    let (h, w) = (dims[2], dims[3]);
    let mut out = Vec::new();
    for ky in 0..p.kernel[0] {
        let Some(iy) = (oy * p.stride[0] + ky)
            .checked_sub(p.padding[0])
            .filter(|&i| i < h)
        else {
            continue;
        };
        for kx in 0..p.kernel[1] {
            let Some(ix) = (ox * p.stride[1] + kx)
                .checked_sub(p.padding[1])
                .filter(|&i| i < w)
            else {
                continue;
            };
            out.push((plane * h + iy) * w + ix);
        }
    }
    out
}

/// Calls `f(output index, window)` for every output element.
fn for_each_window(dims: &[usize], p: Pool2dParams, mut f: impl FnMut(usize, &[usize])) {
    let out = output_dims(dims, p);
    let (oh, ow) = (out[2], out[3]);
    for plane in 0..dims[0] * dims[1] {
        for oy in 0..oh {
            for ox in 0..ow {
                f((plane * oh + oy) * ow + ox, &window(dims, plane, oy, ox, p));
            }
        }
    }
}

/// The first maximum of a window (it always holds at least one element).
fn first_max(x: &Array, win: &[usize]) -> usize {
    let mut best = win[0];
    for &i in &win[1..] {
        if x.data[i] > x.data[best] {
            best = i;
        }
    }
    best
}

/// `y = pool(x)`.
pub fn pool2d(kind: PoolKind, x: &Array, p: Pool2dParams) -> Array {
    let divisor = (p.kernel[0] * p.kernel[1]) as f64;
    let mut y = Array::zeros(output_dims(&x.dims, p));
    for_each_window(&x.dims, p, |o, win| {
        y.data[o] = match kind {
            PoolKind::Max => x.data[first_max(x, win)],
            PoolKind::Avg => {
                (win.iter().map(|&i| f64::from(x.data[i])).sum::<f64>() / divisor) as f32
            }
        };
    });
    y
}

/// `dx` from `dy` for `y = pool(x)`.
pub fn pool2d_backward(kind: PoolKind, x: &Array, dy: &Array, p: Pool2dParams) -> Array {
    let divisor = (p.kernel[0] * p.kernel[1]) as f64;
    let mut acc = vec![0f64; x.data.len()];
    for_each_window(&x.dims, p, |o, win| {
        let g = f64::from(dy.data[o]);
        match kind {
            PoolKind::Max => acc[first_max(x, win)] += g,
            PoolKind::Avg => win.iter().for_each(|&i| acc[i] += g / divisor),
        }
    });
    Array::new(x.dims.clone(), acc.into_iter().map(|v| v as f32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(k: usize, s: usize, pad: usize) -> Pool2dParams {
        Pool2dParams {
            kernel: [k; 2],
            stride: [s; 2],
            padding: [pad; 2],
        }
    }

    #[test]
    fn pooling_by_hand() {
        // x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
        let x = Array::new([1, 1, 3, 3], (1..=9).map(|v| v as f32).collect());
        let p = params(2, 1, 0);
        assert_eq!(pool2d(PoolKind::Max, &x, p).data, vec![5.0, 6.0, 8.0, 9.0]);
        assert_eq!(pool2d(PoolKind::Avg, &x, p).data, vec![3.0, 4.0, 6.0, 7.0]);
        // Padding 1, stride 2: windows at (-1,-1), (-1,1), (1,-1), (1,1).
        let p = params(2, 2, 1);
        assert_eq!(pool2d(PoolKind::Max, &x, p).data, vec![1.0, 3.0, 7.0, 9.0]);
        // Average divides by the full window: 1/4, (2+3)/4, (4+7)/4, (5+6+8+9)/4.
        assert_eq!(
            pool2d(PoolKind::Avg, &x, p).data,
            vec![0.25, 1.25, 2.75, 7.0]
        );
        // Padding is not an element of a max window.
        let neg = Array::new([1, 1, 1, 1], vec![-3.0]);
        assert_eq!(
            pool2d(PoolKind::Max, &neg, params(2, 1, 1)).data,
            vec![-3.0; 4]
        );
    }

    #[test]
    fn gradients_by_hand() {
        // Ties: the first maximum in row-major order takes the gradient.
        let x = Array::new([1, 1, 2, 2], vec![1.0, 7.0, 7.0, 7.0]);
        let dy = Array::new([1, 1, 1, 1], vec![2.0]);
        let dx = pool2d_backward(PoolKind::Max, &x, &dy, params(2, 2, 0));
        assert_eq!(dx.data, vec![0.0, 2.0, 0.0, 0.0]);
        let dx = pool2d_backward(PoolKind::Avg, &x, &dy, params(2, 2, 0));
        assert_eq!(dx.data, vec![0.5; 4]);
        // Overlapping windows accumulate: 3x3 input, 2x2 windows, stride 1.
        let x = Array::new([1, 1, 3, 3], (1..=9).map(|v| v as f32).collect());
        let dy = Array::new([1, 1, 2, 2], vec![1.0; 4]);
        let dx = pool2d_backward(PoolKind::Avg, &x, &dy, params(2, 1, 0));
        assert_eq!(
            dx.data,
            vec![0.25, 0.5, 0.25, 0.5, 1.0, 0.5, 0.25, 0.5, 0.25]
        );
    }
}
