//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn unary(op: UnaryOp, x: &Tensor, y: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("unary", "native"))
}

pub(crate) fn unary_backward(
    op: UnaryOp,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    Err(Error::unsupported("unary_backward", "native"))
}

pub(crate) fn binary(plan: &BinaryPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("binary", "native"))
}

pub(crate) fn binary_backward(
    plan: &BinaryPlan,
    a: &Tensor,
    b: &Tensor,
    dy: &Tensor,
    da: Option<&mut Tensor>,
    db: Option<&mut Tensor>,
) -> Result<()> {
    Err(Error::unsupported("binary_backward", "native"))
}
