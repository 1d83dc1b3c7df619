//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn conv2d(
    plan: &Conv2dPlan,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    y: &mut Tensor,
) -> Result<()> {
    Err(Error::unsupported("conv2d", "native"))
}

pub(crate) fn conv2d_backward_data(
    plan: &Conv2dPlan,
    dy: &Tensor,
    w: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    Err(Error::unsupported("conv2d_backward_data", "native"))
}

pub(crate) fn conv2d_backward_filter(
    plan: &Conv2dPlan,
    x: &Tensor,
    dy: &Tensor,
    dw: &mut Tensor,
) -> Result<()> {
    Err(Error::unsupported("conv2d_backward_filter", "native"))
}

pub(crate) fn conv2d_backward_bias(dy: &Tensor, db: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("conv2d_backward_bias", "native"))
}
