//! [`softmax`] and [`log_softmax`] over a dim, masked over a dynamic dim.
//!
//! With `use_mask` and a dynamic `axis`, the padding is filled with -inf
//! before the softmax (so it gets no probability) and the result's padding
//! is set to 0 (log-softmax: -inf) afterwards with `where`. A sequence of
//! length 0 therefore gives all zeros (log: all -inf), never NaN, and its
//! gradient is 0.

use crate::binary::select_into;
use crate::mask::{check_axes, masked};
use crate::{Dim, RfDType, RfTensor};
use verjus_core::{Error, Result};

/// Softmax over `axis`.
pub fn softmax(x: &RfTensor, axis: &Dim, use_mask: bool) -> Result<RfTensor> {
    softmax_impl(x, axis, use_mask, false)
}

/// Log-softmax over `axis`.
pub fn log_softmax(x: &RfTensor, axis: &Dim, use_mask: bool) -> Result<RfTensor> {
    softmax_impl(x, axis, use_mask, true)
}

fn softmax_impl(x: &RfTensor, axis: &Dim, use_mask: bool, log: bool) -> Result<RfTensor> {
    let op = if log { "log_softmax" } else { "softmax" };
    check_axes(op, x, std::slice::from_ref(axis))?;
    if x.dtype() != RfDType::Float32 {
        return Err(Error::invalid(
            op,
            format!("needs a float32 tensor, got {}", x.dtype()),
        ));
    }
    let mask = if use_mask { axis.mask()? } else { None };
    let Some(mask) = mask else {
        let i = x.axis(op, axis)?;
        let y = if log {
            x.var().log_softmax(i)?
        } else {
            x.var().softmax(i)?
        };
        return Ok(x.with_value(y, x.dims().to_vec()));
    };
    let xm = masked(x, std::slice::from_ref(axis), f32::NEG_INFINITY)?;
    let i = xm.axis(op, axis)?;
    let y = if log {
        xm.var().log_softmax(i)?
    } else {
        xm.var().softmax(i)?
    };
    let y = xm.with_value(y, xm.dims().to_vec());
    let pad = if log { f32::NEG_INFINITY } else { 0.0 };
    let pad = RfTensor::scalar(pad, x.backend())?;
    select_into(y.dims().to_vec(), &mask, &y, &pad)
}
