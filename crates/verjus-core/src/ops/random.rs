//! Random fills from the shared Philox stream (see [`crate::rng`]).

use super::check_f32_on;
use crate::{Backend, Error, Result, Tensor};

/// The distribution of a random fill.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Uniform on `[low, high)`.
    Uniform { low: f32, high: f32 },
    /// Normal with the given mean and standard deviation.
    Normal { mean: f32, std: f32 },
}

/// Fills `dst` from the stream at `(seed, offset)`; element `i` depends only on
/// the seed, the offset and `i`. The draw uses `rng::blocks_for(dst.numel())` blocks.
pub fn random(
    be: &dyn Backend,
    dst: &mut Tensor,
    dist: Distribution,
    seed: u64,
    offset: u64,
) -> Result<()> {
    check_f32_on("random", be, &[("dst", dst)])?;
    let ok = match dist {
        Distribution::Uniform { low, high } => low.is_finite() && high.is_finite() && low <= high,
        Distribution::Normal { mean, std } => mean.is_finite() && std.is_finite() && std >= 0.0,
    };
    if !ok {
        return Err(Error::invalid(
            "random",
            format!("bad distribution parameters {dist:?}"),
        ));
    }
    be.random(dst, dist, seed, offset)
}
