//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn pool2d(plan: &Pool2dPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("pool2d", "native"))
}

pub(crate) fn pool2d_backward(
    plan: &Pool2dPlan,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    Err(Error::unsupported("pool2d_backward", "native"))
}
