//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn index_select(
    plan: &IndexPlan,
    x: &Tensor,
    indices: &Tensor,
    y: &mut Tensor,
) -> Result<()> {
    Err(Error::unsupported("index_select", "native"))
}

pub(crate) fn index_add(
    plan: &IndexPlan,
    src: &Tensor,
    indices: &Tensor,
    dst: &mut Tensor,
) -> Result<()> {
    Err(Error::unsupported("index_add", "native"))
}
