//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn permute(plan: &PermutePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("permute", "native"))
}
