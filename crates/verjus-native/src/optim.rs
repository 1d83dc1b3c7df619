//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn sgd_update(
    hp: &SgdHyper,
    param: &mut Tensor,
    grad: &Tensor,
    velocity: Option<&mut Tensor>,
) -> Result<()> {
    Err(Error::unsupported("sgd_update", "native"))
}

pub(crate) fn adam_update(
    hp: &AdamHyper,
    param: &mut Tensor,
    grad: &Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
) -> Result<()> {
    Err(Error::unsupported("adam_update", "native"))
}
