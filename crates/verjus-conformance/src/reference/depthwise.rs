//! Reference depthwise 1-D convolution (channels last) and its gradients:
//! the defining sums of `verjus_core::ops::depthwise`, in `f64`, with the
//! window positions computed independently of the plan.

use crate::array::Array;

/// The window: `(left padding, dilation)`; the right padding only sets `T_out`.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub left: usize,
    pub right: usize,
    pub dilation: usize,
}

impl Window {
    /// `T_out` for `frames` input frames and `taps` taps.
    pub fn out_frames(&self, frames: usize, taps: usize) -> usize {
        let span = self.dilation * (taps - 1) + 1;
        (frames + self.left + self.right + 1).saturating_sub(span)
    }

    /// The input frame of tap `k` at output `t`, when it is not padding.
    fn source(&self, t: usize, k: usize, frames: usize) -> Option<usize> {
        let s = t as i64 + (k * self.dilation) as i64 - self.left as i64;
        (0..frames as i64).contains(&s).then_some(s as usize)
    }
}

/// `y [N, T_out, C]` of `x [N, T, C]`, `filter [C, K]`, `bias [C]`.
pub fn depthwise(x: &Array, filter: &Array, bias: Option<&Array>, w: Window) -> Array {
    let (n, t, c) = (x.dims[0], x.dims[1], x.dims[2]);
    let k = filter.dims[1];
    let to = w.out_frames(t, k);
    let mut y = Array::zeros(vec![n, to, c]);
    for b in 0..n {
        for o in 0..to {
            for ch in 0..c {
                let mut acc = bias.map_or(0.0, |b| f64::from(b.data[ch]));
                for tap in 0..k {
                    if let Some(s) = w.source(o, tap, t) {
                        let xv = f64::from(x.data[(b * t + s) * c + ch]);
                        acc += f64::from(filter.data[ch * k + tap]) * xv;
                    }
                }
                y.data[(b * to + o) * c + ch] = acc as f32;
            }
        }
    }
    y
}

/// `(dx, dfilter, dbias)` of [`depthwise`] for the output gradient `dy`.
pub fn depthwise_backward(
    x: &Array,
    filter: &Array,
    dy: &Array,
    w: Window,
) -> (Array, Array, Vec<f32>) {
    let (n, t, c) = (x.dims[0], x.dims[1], x.dims[2]);
    let k = filter.dims[1];
    let to = w.out_frames(t, k);
    let mut dx = vec![0f64; x.data.len()];
    let mut df = vec![0f64; filter.data.len()];
    let mut db = vec![0f64; c];
    for b in 0..n {
        for o in 0..to {
            for ch in 0..c {
                let g = f64::from(dy.data[(b * to + o) * c + ch]);
                db[ch] += g;
                for tap in 0..k {
                    if let Some(s) = w.source(o, tap, t) {
                        let xi = (b * t + s) * c + ch;
                        dx[xi] += g * f64::from(filter.data[ch * k + tap]);
                        df[ch * k + tap] += g * f64::from(x.data[xi]);
                    }
                }
            }
        }
    }
    let f32s = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<_>>();
    (
        Array::new(x.dims.clone(), f32s(dx)),
        Array::new(filter.dims.clone(), f32s(df)),
        f32s(db),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convolves_by_hand() {
        // One channel, taps [1, 10], "same"-like padding 1 on the left: y[t] = x[t-1] + 10 x[t].
        let x = Array::new([1, 3, 1], vec![1.0, 2.0, 3.0]);
        let f = Array::new([1, 2], vec![1.0, 10.0]);
        let w = Window {
            left: 1,
            right: 0,
            dilation: 1,
        };
        assert_eq!(depthwise(&x, &f, None, w).data, vec![10.0, 21.0, 32.0]);
        // Dilation 2, no padding: y[t] = x[t] + 10 x[t + 2].
        let w = Window {
            left: 0,
            right: 0,
            dilation: 2,
        };
        assert_eq!(depthwise(&x, &f, None, w).data, vec![31.0]);
    }

    /// The backward sums are the derivatives of the forward (central differences).
    #[test]
    fn backward_matches_finite_differences() {
        let x = Array::new([1, 4, 2], vec![0.3, -1.2, 0.8, 2.0, 0.1, -0.4, 1.5, 0.6]);
        let f = Array::new([2, 3], vec![0.7, -1.3, 1.1, 0.2, 0.5, -0.9]);
        let b = Array::new([2], vec![0.1, -0.2]);
        let w = Window {
            left: 2,
            right: 1,
            dilation: 1,
        };
        let r: Vec<f64> = (0..10).map(|i| (i as f64 * 0.37).sin()).collect();
        let dy = Array::new([1, 5, 2], r.iter().map(|&v| v as f32).collect());
        let (dx, df, db) = depthwise_backward(&x, &f, &dy, w);
        let loss = |x: &Array, f: &Array, b: &Array| {
            let y = depthwise(x, f, Some(b), w);
            y.data
                .iter()
                .zip(&r)
                .map(|(&v, &q)| f64::from(v) * q)
                .sum::<f64>()
        };
        let numeric = |which: usize, i: usize| {
            let at = |delta: f32| {
                let (mut x, mut f, mut b) = (x.clone(), f.clone(), b.clone());
                [&mut x, &mut f, &mut b][which].data[i] += delta;
                loss(&x, &f, &b)
            };
            (at(1e-3) - at(-1e-3)) / 2e-3
        };
        let analytic = [dx.data, df.data, db];
        for (which, grads) in analytic.iter().enumerate() {
            for (i, &g) in grads.iter().enumerate() {
                assert!(
                    (numeric(which, i) - f64::from(g)).abs() < 2e-3,
                    "input {which}, element {i}"
                );
            }
        }
    }
}
