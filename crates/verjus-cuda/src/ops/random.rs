//! Random fills from the shared Philox stream (see `verjus_core::rng`): one
//! thread per Philox block of four elements.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::ptr_mut;
use verjus_core::ops::Distribution;
use verjus_core::{Result, Tensor};

/// Fills `dst` from the stream at `(seed, offset)`.
pub(crate) fn random(
    be: &CudaBackend,
    dst: &mut Tensor,
    dist: Distribution,
    seed: u64,
    offset: u64,
) -> Result<()> {
    let op = "random";
    be.enter(op)?;
    let n = dst.numel();
    let (y, count) = (ptr_mut(op, dst)?, n as i64);
    let blocks = n.div_ceil(4);
    let (name, p0, p1) = match dist {
        Distribution::Uniform { low, high } => ("random_uniform", low, high),
        Distribution::Normal { mean, std } => ("random_normal", mean, std),
    };
    be.launch_n(
        op,
        Module::Random,
        name,
        blocks,
        &mut [
            arg(&y),
            arg(&count),
            arg(&seed),
            arg(&offset),
            arg(&p0),
            arg(&p1),
        ],
    )
}
