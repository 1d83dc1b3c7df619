//! Finite-difference checks of every backward op, computed through the backend.
//!
//! The reference checks pin a backward op to the reference's *formula*; these pin
//! it to the *derivative of the backend's own forward op*, so a backward that is
//! consistent with a wrong reference, or a forward and backward that disagree,
//! cannot pass both. For a fixed random `r`, `L(x) = sum(forward(x) * r)` is
//! accumulated in `f64`, and `dL/dx_i` from the backward op (fed `dy = r`) must
//! match `(L(x + h e_i) - L(x - h e_i)) / 2h` with `h = STEP`.
//!
//! The forward runs in `f32`, so the difference quotient carries rounding noise of
//! about `1e-7 * |L| / h` plus a truncation error of order `h^2`; the tolerance is
//! therefore loose (`REL` relative plus `ABS` absolute). Shapes are small (each
//! input element costs two forward calls), and inputs are kept at least `2h` away
//! from kinks and ties (relu, abs, max, min, max pooling), where the derivative
//! is not defined.

mod attention;
mod conv;
mod ctc;
mod data;
mod depthwise;
mod elementwise;
mod gemm;
mod layer_norm;
mod loss;
mod lstm;
mod pool;
mod reduce;

pub use attention::attention;
pub use conv::conv2d;
pub use ctc::ctc_loss;
pub use data::{concat, dropout, index_select, permute};
pub use depthwise::depthwise_conv1d;
pub use elementwise::{binary, unary};
pub use gemm::gemm;
pub use layer_norm::layer_norm;
pub use loss::softmax_cross_entropy;
pub use lstm::{lstm_cell, lstm_sequence};
pub use pool::{avg_pool2d, max_pool2d};
pub use reduce::{log_softmax, reduce, softmax};

use crate::array::{unravel, Array};
use crate::transfer::get;
use verjus_core::{Backend, Tensor};

/// The finite-difference step.
pub const STEP: f32 = 1e-2;
/// Relative tolerance between the numeric and the analytic derivative.
pub const REL: f64 = 1e-2;
/// Absolute tolerance between the numeric and the analytic derivative.
pub const ABS: f64 = 2e-3;

/// `sum(y * r)` in `f64`, where `y` is downloaded from the backend.
pub(crate) fn weighted_sum(
    be: &dyn Backend,
    what: &str,
    y: &Tensor,
    r: &Array,
) -> Result<f64, String> {
    let y = get::<f32>(be, what, y)?;
    if y.len() != r.data.len() {
        return Err(format!(
            "{what}: forward gave {} elements, expected {}",
            y.len(),
            r.data.len()
        ));
    }
    Ok(y.iter()
        .zip(&r.data)
        .map(|(&a, &b)| f64::from(a) * f64::from(b))
        .sum())
}

/// Central differences of `loss` with respect to every element of `x`.
pub(crate) fn numeric_gradient(
    x: &Array,
    mut loss: impl FnMut(&Array) -> Result<f64, String>,
) -> Result<Vec<f64>, String> {
    let mut probe = x.clone();
    let mut grad = Vec::with_capacity(x.data.len());
    for i in 0..x.data.len() {
        let orig = x.data[i];
        let (up, down) = (orig + STEP, orig - STEP);
        probe.data[i] = up;
        let l_up = loss(&probe)?;
        probe.data[i] = down;
        let l_down = loss(&probe)?;
        probe.data[i] = orig;
        // The actual f32 step, not the nominal one.
        grad.push((l_up - l_down) / (f64::from(up) - f64::from(down)));
    }
    Ok(grad)
}

/// `Ok` when the analytic gradient matches the numeric one everywhere.
pub(crate) fn agree(
    what: &str,
    dims: &[usize],
    numeric: &[f64],
    analytic: &[f32],
) -> Result<(), String> {
    if numeric.len() != analytic.len() {
        return Err(format!(
            "{what}: backward gave {} elements, expected {}",
            analytic.len(),
            numeric.len()
        ));
    }
    let bad: Vec<usize> = (0..numeric.len())
        .filter(|&i| {
            let (n, a) = (numeric[i], f64::from(analytic[i]));
            // Written so that NaN on either side counts as a disagreement.
            let within = (n - a).abs() <= ABS + REL * n.abs().max(a.abs());
            !within
        })
        .collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{what}: {} of {} derivatives disagree with finite differences (step {STEP}, rel {REL} + abs {ABS}); first at flat index {i} {:?} of dims {dims:?}: numeric {:e}, backward op {:e}",
            bad.len(),
            numeric.len(),
            unravel(i, dims),
            numeric[i],
            analytic[i]
        )),
    }
}

/// Compares the downloaded analytic gradient `t` of input `x` with the numeric one.
pub(crate) fn check_input(
    be: &dyn Backend,
    what: &str,
    x: &Array,
    analytic: &Tensor,
    loss: impl FnMut(&Array) -> Result<f64, String>,
) -> Result<(), String> {
    let numeric = numeric_gradient(x, loss)?;
    agree(what, &x.dims, &numeric, &get::<f32>(be, what, analytic)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_gradient_of_a_cubic() {
        // L = sum(x^3) has gradient 3 x^2.
        let x = Array::new([3], vec![-1.0, 0.5, 2.0]);
        let g = numeric_gradient(&x, |p| {
            Ok(p.data.iter().map(|&v| f64::from(v).powi(3)).sum())
        })
        .unwrap();
        let exact = [3.0f32, 0.75, 12.0];
        assert!(agree("cube", &[3], &g, &exact).is_ok(), "{g:?}");
        let err = agree("cube", &[3], &g, &[3.0, 0.75, 11.0]).unwrap_err();
        assert!(err.contains("cube") && err.contains("[2]"), "{err}");
    }
}
