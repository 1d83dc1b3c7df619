//! Learnable parameters and their deterministic initialisation.
//!
//! Every parameter is drawn on the backend from the shared Philox stream at
//! `(seed, offset)`, with offsets handed out in parameter order, so the same
//! definition and seed give the same weights on every device.

use crate::descriptor::Init;
use verjus_core::ops::{self, Distribution};
use verjus_core::{rng, Backend, DType, Result, Shape, Tensor};

/// A learnable tensor, named by its layer's path (`fc1.weight`).
#[derive(Debug)]
pub struct Parameter {
    pub name: String,
    pub value: Tensor,
}

/// A fresh parameter drawn with `init` from the stream at `(seed, *offset)`;
/// advances `offset` past the draw.
pub(crate) fn initialise(
    be: &dyn Backend,
    shape: &Shape,
    init: Init,
    seed: u64,
    offset: &mut u64,
) -> Result<Tensor> {
    let mut t = ops::zeros(be, shape, DType::F32)?;
    match init {
        Init::Uniform { bound } => {
            let dist = Distribution::Uniform {
                low: -bound,
                high: bound,
            };
            ops::random(be, &mut t, dist, seed, *offset)?;
        }
    }
    *offset = offset.wrapping_add(rng::blocks_for(shape.numel()));
    Ok(t)
}

/// PyTorch's default bound for Linear and Conv2d weights (kaiming-uniform with
/// `a = sqrt(5)`) and biases: `1 / sqrt(fan_in)`, 0 for an empty fan-in.
pub(crate) fn default_bound(fan_in: usize) -> f32 {
    if fan_in == 0 {
        0.0
    } else {
        1.0 / (fan_in as f32).sqrt()
    }
}
