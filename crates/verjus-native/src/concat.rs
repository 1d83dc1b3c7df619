//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn concat(plan: &ConcatPlan, parts: &[&Tensor], y: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("concat", "native"))
}

pub(crate) fn split(plan: &ConcatPlan, x: &Tensor, parts: &mut [&mut Tensor]) -> Result<()> {
    Err(Error::unsupported("split", "native"))
}
