//! Sequence masks from the lengths of dynamic dims, and masking by them.
//!
//! A dynamic dim's mask is `lengths > range(dim)`: `bool` over the lengths'
//! dims plus the dim itself, made once per dim and kept in it. Masking a
//! value selects a fill (0 for sums, -inf for max and softmax) at the
//! padding with `where`, so whatever the padding holds (inf, NaN) never
//! reaches the result.

use crate::align::union;
use crate::binary::{combine, select_into};
use crate::{fmt_dims, Dim, RfDType, RfTensor};
use verjus_core::ops::BinaryOp;
use verjus_core::{BackendRef, Error, Result, Tensor};

/// `[0, 1, ..., size - 1]` over `[dim]` (int32, `sparse_dim = dim`); the dim's
/// size must be known (static, or the longest sequence of a dynamic dim).
pub fn range_over_dim(dim: &Dim, backend: &BackendRef) -> Result<RfTensor> {
    let size = dim
        .size_or_seen()
        .ok_or_else(|| Error::invalid("range_over_dim", format!("dim {dim} has no known size")))?;
    let values: Vec<i32> = (0..size as i32).collect();
    let t = Tensor::from_vec([size], values)?;
    RfTensor::from_tensor(t, vec![dim.clone()], None, backend.clone(), false)?
        .with_sparse_dim(Some(dim.clone()))
}

/// The mask of `dim` with lengths `lengths` and longest sequence `max`.
pub(crate) fn lengths_mask(dim: &Dim, lengths: &RfTensor, max: usize) -> Result<RfTensor> {
    debug_assert_eq!(dim.size(), Some(max));
    let range = range_over_dim(dim, lengths.backend())?;
    combine(lengths, BinaryOp::Gt, &range, true)
}

/// `true` where every dynamic dim among `dims` is within its sequence's
/// length (the masks' product); a `true` scalar when none is dynamic.
pub fn sequence_mask(dims: &[Dim], backend: &BackendRef) -> Result<RfTensor> {
    let mut mask: Option<RfTensor> = None;
    for d in dims {
        if let Some(m) = d.mask()? {
            mask = Some(match mask {
                None => m,
                Some(acc) => combine(&acc, BinaryOp::Mul, &m, true)?,
            });
        }
    }
    match mask {
        Some(m) => Ok(m),
        None => {
            let one = RfTensor::scalar(1.0, backend)?;
            RfTensor::new(one.var().clone(), Vec::new(), RfDType::Bool)
        }
    }
}

/// `x` with `fill` at the padding of each dynamic dim among `dims` (those
/// `x` has). The result gains the lengths' dims when `x` lacks them.
pub(crate) fn masked(x: &RfTensor, dims: &[Dim], fill: f32) -> Result<RfTensor> {
    let mut x = x.clone();
    for d in dims {
        if x.axis_of(d).is_none() {
            continue;
        }
        if let Some(m) = d.mask()? {
            let out = union(x.dims(), m.dims());
            let f = RfTensor::scalar(fill, x.backend())?;
            x = select_into(out, &m, &x, &f)?;
        }
    }
    Ok(x)
}

/// Fails unless every dim in `axes` is one of `x`'s dims.
pub(crate) fn check_axes(op: &str, x: &RfTensor, axes: &[Dim]) -> Result<()> {
    for a in axes {
        if x.axis_of(a).is_none() {
            return Err(Error::invalid(
                op,
                format!("dim {a} is not in the tensor's dims {}", fmt_dims(x.dims())),
            ));
        }
    }
    Ok(())
}
