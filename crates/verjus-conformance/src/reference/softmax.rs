//! Reference softmax and log-softmax along one axis, and their gradients.
//!
//! Computed in `f64` after subtracting the maximum, so inputs of any magnitude
//! give the exact answer rounded once. The backward formulas are the documented
//! ones, from the forward output `y`: softmax `dx = y * (dy - sum(dy * y))`,
//! log-softmax `dx = dy - exp(y) * sum(dy)`.

use crate::array::{split_at_axis, Array};

/// Calls `f` with the flat indices of every line along `axis`.
fn for_each_line(dims: &[usize], axis: usize, mut f: impl FnMut(&[usize])) {
    let (outer, len, inner) = split_at_axis(dims, axis);
    for o in 0..outer {
        for i in 0..inner {
            let line: Vec<usize> = (0..len).map(|j| (o * len + j) * inner + i).collect();
            f(&line);
        }
    }
}

/// `softmax(x)` (or `log_softmax` when `log`) along `axis`.
pub fn softmax(x: &Array, axis: usize, log: bool) -> Array {
    let mut y = Array::zeros(x.dims.clone());
    for_each_line(&x.dims, axis, |line| {
        let max = line
            .iter()
            .map(|&k| f64::from(x.data[k]))
            .fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = line
            .iter()
            .map(|&k| (f64::from(x.data[k]) - max).exp())
            .sum();
        for &k in line {
            let shifted = f64::from(x.data[k]) - max;
            y.data[k] = if log {
                (shifted - sum.ln()) as f32
            } else {
                (shifted.exp() / sum) as f32
            };
        }
    });
    y
}

/// `dx` from the forward output `y` and `dy`.
pub fn softmax_backward(y: &Array, dy: &Array, axis: usize, log: bool) -> Array {
    assert_eq!(y.dims, dy.dims, "reference softmax_backward: dims");
    let mut dx = Array::zeros(y.dims.clone());
    for_each_line(&y.dims, axis, |line| {
        let (yv, g) = (
            |k: usize| f64::from(y.data[k]),
            |k: usize| f64::from(dy.data[k]),
        );
        if log {
            let sum: f64 = line.iter().map(|&k| g(k)).sum();
            for &k in line {
                dx.data[k] = (g(k) - yv(k).exp() * sum) as f32;
            }
        } else {
            let dot: f64 = line.iter().map(|&k| g(k) * yv(k)).sum();
            for &k in line {
                dx.data[k] = (yv(k) * (g(k) - dot)) as f32;
            }
        }
    });
    dx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_by_hand() {
        // softmax([0, ln 3]) = [1/4, 3/4], also for huge shifted inputs.
        let x = Array::new([2], vec![0.0, 3f32.ln()]);
        let y = softmax(&x, 0, false);
        assert!((y.data[0] - 0.25).abs() < 1e-7 && (y.data[1] - 0.75).abs() < 1e-7);
        let big = Array::new([2], vec![1000.0, 1000.0 + 3f32.ln()]);
        let y = softmax(&big, 0, true);
        assert!((y.data[0] - 0.25f32.ln()).abs() < 1e-4, "{:?}", y.data);
        // Axis 0 of a [2, 2]: columns normalise.
        let x = Array::new([2, 2], vec![0.0, 5.0, 0.0, 5.0]);
        assert_eq!(softmax(&x, 0, false).data, vec![0.5; 4]);
    }

    /// The documented backward formulas are the derivatives of the forward
    /// functions (checked by central differences of the reference itself).
    #[test]
    fn backward_matches_finite_differences() {
        let x = Array::new([2, 3], vec![0.3, -1.2, 0.8, 2.0, 0.1, -0.4]);
        let r = [0.7f64, -0.2, 1.1, 0.4, -0.9, 0.5];
        for log in [false, true] {
            for axis in [0, 1] {
                let y = softmax(&x, axis, log);
                let dy = Array::new([2, 3], r.iter().map(|&v| v as f32).collect());
                let dx = softmax_backward(&y, &dy, axis, log);
                for i in 0..6 {
                    let loss = |d: f32| {
                        let mut p = x.clone();
                        p.data[i] += d;
                        let y = softmax(&p, axis, log);
                        y.data
                            .iter()
                            .zip(&r)
                            .map(|(&v, &w)| f64::from(v) * w)
                            .sum::<f64>()
                    };
                    let num = (loss(1e-3) - loss(-1e-3)) / 2e-3;
                    assert!(
                        (num - f64::from(dx.data[i])).abs() < 1e-3,
                        "log={log} axis={axis} i={i}: {num} vs {}",
                        dx.data[i]
                    );
                }
            }
        }
    }
}
