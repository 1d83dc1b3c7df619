//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn reduce(plan: &ReducePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("reduce", "native"))
}

pub(crate) fn reduce_backward(
    plan: &ReducePlan,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    Err(Error::unsupported("reduce_backward", "native"))
}

pub(crate) fn argmax(plan: &AxisPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("argmax", "native"))
}
