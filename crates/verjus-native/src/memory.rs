//! STUB: replace with the real implementation.
#![allow(unused_variables)]
use verjus_core::ops::*;
use verjus_core::{Error, Result, Tensor};

pub(crate) fn copy(src: &Tensor, dst: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("copy", "native"))
}

pub(crate) fn fill(dst: &mut Tensor, value: f64) -> Result<()> {
    Err(Error::unsupported("fill", "native"))
}

pub(crate) fn cast(src: &Tensor, dst: &mut Tensor) -> Result<()> {
    Err(Error::unsupported("cast", "native"))
}

pub(crate) fn random(dst: &mut Tensor, dist: Distribution, seed: u64, offset: u64) -> Result<()> {
    Err(Error::unsupported("random", "native"))
}
