//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn dropout(plan: &DropoutPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("dropout", "native"))
}
