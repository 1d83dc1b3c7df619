//! Checks of the random fills: element `i` must be the shared Philox draw, so
//! every device produces the same tensor for the same `(seed, offset)`.

use crate::compare::{close, every_case, Tolerance};
use crate::reference::random::random as reference;
use crate::transfer::{get, zeros, Context};
use verjus_core::ops::{self, Distribution};
use verjus_core::{Backend, DType};

const SHAPES: [&[usize]; 6] = [&[1], &[7], &[17], &[65], &[0], &[4, 33]];
const STREAMS: [(u64, u64); 3] = [(0, 0), (7, 123), (u64::MAX, 5)];

/// Uniform draws match `low + (high - low) * unit_uniform(word)` up to one rounding
/// of the affine map (`Tolerance::ELEMENTWISE`).
pub fn random_uniform(be: &dyn Backend) -> Result<(), String> {
    run(
        be,
        &[
            Distribution::Uniform {
                low: -2.0,
                high: 3.0,
            },
            Distribution::Uniform {
                low: 0.0,
                high: 1.0,
            },
            Distribution::Uniform {
                low: 5.0,
                high: 5.0,
            },
        ],
    )
}

/// Normal draws match Box–Muller on the shared words up to a device's `ln`, `cos`
/// and `sin` accuracy (`Tolerance::REDUCTION`, i.e. 1e-5 relative and absolute).
pub fn random_normal(be: &dyn Backend) -> Result<(), String> {
    run(
        be,
        &[
            Distribution::Normal {
                mean: 0.0,
                std: 1.0,
            },
            Distribution::Normal {
                mean: 1.0,
                std: 2.0,
            },
            Distribution::Normal {
                mean: -3.0,
                std: 0.0,
            },
        ],
    )
}

fn run(be: &dyn Backend, dists: &[Distribution]) -> Result<(), String> {
    let cases = dists.iter().flat_map(|&d| {
        SHAPES
            .iter()
            .flat_map(move |&s| STREAMS.iter().map(move |&st| (d, s, st)))
    });
    every_case(cases, |(dist, dims, (seed, offset))| {
        let what = format!("random {dist:?} {dims:?} seed {seed} offset {offset}");
        let mut dst = zeros(be, &what, dims, DType::F32)?;
        ops::random(be, &mut dst, dist, seed, offset).context(&what)?;
        let tol = match dist {
            Distribution::Uniform { .. } => Tolerance::ELEMENTWISE,
            Distribution::Normal { .. } => Tolerance::REDUCTION,
        };
        let expected = reference(crate::array::numel(dims), dist, seed, offset);
        close(&what, dims, &expected, &get(be, &what, &dst)?, tol)
    })
}
