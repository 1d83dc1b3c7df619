//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn softmax_cross_entropy(
    plan: &CrossEntropyPlan,
    logits: &Tensor,
    labels: &Tensor,
    grad_scale: f32,
    losses: &mut Tensor,
    dlogits: Option<&mut Tensor>,
) -> Result<()> {
    Err(Error::unsupported("softmax_cross_entropy", "native"))
}
