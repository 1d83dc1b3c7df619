//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn softmax(plan: &AxisPlan, log: bool, x: &Tensor, y: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("softmax", "native"))
}

pub(crate) fn softmax_backward(
    plan: &AxisPlan,
    log: bool,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    Err(Error::unsupported("softmax_backward", "native"))
}
