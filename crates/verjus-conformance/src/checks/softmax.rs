//! Checks of softmax and log-softmax along any axis and their gradients,
//! including inputs near ±100, where a float32 `exp` without the usual
//! max-subtraction overflows or underflows. (Not ±1000: there one ulp of the
//! input is 6e-5, and rounding `x - logsumexp` would dominate the tolerance.)
//! Tolerance: `Tolerance::REDUCTION`.

use crate::array::Array;
use crate::compare::{close, every_case, Tolerance};
use crate::inputs::uniform;
use crate::reference::softmax as reference;
use crate::transfer::{get, put, zeros, Context};
use verjus_core::{ops, Backend, DType};

/// `(dims, axis, centre of the inputs)`.
const CASES: [(&[usize], usize, f32); 11] = [
    (&[7], 0, 0.0),
    (&[13, 17], 1, 0.0),
    (&[13, 17], 0, 0.0),
    (&[3, 33, 5], 1, 0.0),
    (&[65], 0, 0.0),
    (&[2, 0], 1, 0.0),
    (&[0, 5], 1, 0.0),
    (&[4, 1], 1, 0.0),
    (&[1], 0, 0.0),
    (&[2, 31], 1, 100.0),
    (&[31, 2], 0, -100.0),
];

fn input(seed: u64, dims: &[usize], centre: f32) -> Array {
    uniform(seed, dims, centre - 8.0, centre + 8.0)
}

fn forward(be: &dyn Backend, log: bool) -> Result<(), String> {
    let name = if log { "log_softmax" } else { "softmax" };
    every_case(
        CASES.into_iter().enumerate(),
        |(i, (dims, axis, centre))| {
            let what = format!("{name} {dims:?} along axis {axis} (inputs around {centre})");
            let x = input(i as u64, dims, centre);
            let tx = put(be, &what, &x)?;
            let mut ty = zeros(be, &what, dims, DType::F32)?;
            ops::softmax(be, &tx, axis, log, &mut ty).context(&what)?;
            let expected = reference::softmax(&x, axis, log);
            close(
                &what,
                dims,
                &expected.data,
                &get(be, &what, &ty)?,
                Tolerance::REDUCTION,
            )
        },
    )
}

fn backward(be: &dyn Backend, log: bool) -> Result<(), String> {
    let name = if log {
        "log_softmax_backward"
    } else {
        "softmax_backward"
    };
    every_case(
        CASES.into_iter().enumerate(),
        |(i, (dims, axis, centre))| {
            let what = format!("{name} {dims:?} along axis {axis}");
            let y = reference::softmax(&input(i as u64 + 20, dims, centre), axis, log);
            let dy = uniform(i as u64 + 40, dims, -1.0, 1.0);
            let (ty, tdy) = (put(be, &what, &y)?, put(be, &what, &dy)?);
            let mut tdx = zeros(be, &what, dims, DType::F32)?;
            ops::softmax_backward(be, &ty, &tdy, axis, log, &mut tdx).context(&what)?;
            let expected = reference::softmax_backward(&y, &dy, axis, log);
            close(
                &what,
                dims,
                &expected.data,
                &get(be, &what, &tdx)?,
                Tolerance::REDUCTION,
            )
        },
    )
}

/// `ops::softmax` (probabilities).
pub fn softmax(be: &dyn Backend) -> Result<(), String> {
    forward(be, false)
}

/// `ops::softmax` with `log = true`.
pub fn log_softmax(be: &dyn Backend) -> Result<(), String> {
    forward(be, true)
}

/// `ops::softmax_backward`: `dx = y * (dy - sum(dy * y))`.
pub fn softmax_backward(be: &dyn Backend) -> Result<(), String> {
    backward(be, false)
}

/// `ops::softmax_backward` with `log = true`: `dx = dy - exp(y) * sum(dy)`.
pub fn log_softmax_backward(be: &dyn Backend) -> Result<(), String> {
    backward(be, true)
}
