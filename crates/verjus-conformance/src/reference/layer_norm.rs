//! Reference layer normalisation over the last axis, and its gradients.
//!
//! Computed in `f64` from the definitions in `verjus_core::ops::layer_norm`:
//! the mean, the biased variance of `x - mean`, `rstd = 1 / sqrt(var + eps)`;
//! the backward from those same statistics. A row of no features has mean 0
//! and variance 0.

use crate::array::Array;

/// `(y, mean, rstd)` of `x [n, d]` with optional `scale`, `bias [d]`.
pub fn layer_norm(
    x: &Array,
    scale: Option<&Array>,
    bias: Option<&Array>,
    eps: f32,
) -> (Array, Vec<f32>, Vec<f32>) {
    let (n, d) = (x.dims[0], x.dims[1]);
    let mut y = Array::zeros(x.dims.clone());
    let (mut means, mut rstds) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for r in 0..n {
        let row: Vec<f64> = (0..d).map(|j| f64::from(x.data[r * d + j])).collect();
        let (mean, rstd) = stats(&row, eps);
        for (j, &value) in row.iter().enumerate() {
            let mut v = (value - mean) * rstd;
            if let Some(s) = scale {
                v *= f64::from(s.data[j]);
            }
            if let Some(b) = bias {
                v += f64::from(b.data[j]);
            }
            y.data[r * d + j] = v as f32;
        }
        means.push(mean as f32);
        rstds.push(rstd as f32);
    }
    (y, means, rstds)
}

/// Mean and `1 / sqrt(var + eps)` of a row.
fn stats(row: &[f64], eps: f32) -> (f64, f64) {
    let d = row.len().max(1) as f64;
    let mean = row.iter().sum::<f64>() / d;
    let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d;
    (mean, 1.0 / (var + f64::from(eps)).sqrt())
}

/// `(dx, dscale, dbias)` of [`layer_norm`] for the output gradient `dy`.
pub fn layer_norm_backward(
    x: &Array,
    scale: Option<&Array>,
    dy: &Array,
    eps: f32,
) -> (Array, Vec<f32>, Vec<f32>) {
    let (n, d) = (x.dims[0], x.dims[1]);
    let mut dx = Array::zeros(x.dims.clone());
    let (mut dscale, mut dbias) = (vec![0f64; d], vec![0f64; d]);
    for r in 0..n {
        let row: Vec<f64> = (0..d).map(|j| f64::from(x.data[r * d + j])).collect();
        let (mean, rstd) = stats(&row, eps);
        let xhat: Vec<f64> = row.iter().map(|v| (v - mean) * rstd).collect();
        let dyr: Vec<f64> = (0..d).map(|j| f64::from(dy.data[r * d + j])).collect();
        let g: Vec<f64> = (0..d)
            .map(|j| dyr[j] * scale.map_or(1.0, |s| f64::from(s.data[j])))
            .collect();
        let g_mean = g.iter().sum::<f64>() / d as f64;
        let gx_mean = g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / d as f64;
        for j in 0..d {
            dx.data[r * d + j] = (rstd * (g[j] - g_mean - xhat[j] * gx_mean)) as f32;
            dscale[j] += dyr[j] * xhat[j];
            dbias[j] += dyr[j];
        }
    }
    let to_f32 = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
    (dx, to_f32(dscale), to_f32(dbias))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_by_hand() {
        // [1, 3]: mean 2, variance 1, so xhat = [-1, 1] (eps 0).
        let x = Array::new([1, 2], vec![1.0, 3.0]);
        let (y, mean, rstd) = layer_norm(&x, None, None, 0.0);
        assert_eq!(
            (y.data, mean, rstd),
            (vec![-1.0, 1.0], vec![2.0], vec![1.0])
        );
        let s = Array::new([2], vec![2.0, 3.0]);
        let b = Array::new([2], vec![0.5, -0.5]);
        let (y, _, _) = layer_norm(&x, Some(&s), Some(&b), 0.0);
        assert_eq!(y.data, vec![-1.5, 2.5]);
    }

    /// The backward formulas are the derivatives of the forward (central
    /// differences of the reference itself), for x, scale and bias.
    #[test]
    fn backward_matches_finite_differences() {
        let x = Array::new([2, 3], vec![0.3, -1.2, 0.8, 2.0, 0.1, -0.4]);
        let s = Array::new([3], vec![0.7, -1.3, 1.1]);
        let b = Array::new([3], vec![0.2, 0.0, -0.1]);
        let r = [0.7f64, -0.2, 1.1, 0.4, -0.9, 0.5];
        let dy = Array::new([2, 3], r.iter().map(|&v| v as f32).collect());
        let (dx, ds, db) = layer_norm_backward(&x, Some(&s), &dy, 1e-3);
        let loss = |x: &Array, s: &Array, b: &Array| {
            let (y, _, _) = layer_norm(x, Some(s), Some(b), 1e-3);
            y.data
                .iter()
                .zip(&r)
                .map(|(&v, &w)| f64::from(v) * w)
                .sum::<f64>()
        };
        let numeric = |which: usize, i: usize| {
            let at = |delta: f32| {
                let (mut x, mut s, mut b) = (x.clone(), s.clone(), b.clone());
                [&mut x, &mut s, &mut b][which].data[i] += delta;
                loss(&x, &s, &b)
            };
            (at(1e-3) - at(-1e-3)) / 2e-3
        };
        for i in 0..6 {
            assert!(
                (numeric(0, i) - f64::from(dx.data[i])).abs() < 2e-3,
                "dx[{i}]"
            );
        }
        for i in 0..3 {
            assert!(
                (numeric(1, i) - f64::from(ds[i])).abs() < 2e-3,
                "dscale[{i}]"
            );
            assert!(
                (numeric(2, i) - f64::from(db[i])).abs() < 2e-3,
                "dbias[{i}]"
            );
        }
    }
}
