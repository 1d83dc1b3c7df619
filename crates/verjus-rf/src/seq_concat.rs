//! [`concat()`](crate::concat) over dynamic dims: each sequence's own frames
//! one after the other.
//!
//! The parts are first joined as they are (padding included); then every
//! output position `t` of a sequence is looked up in that raw join with a
//! per-entry [`gather`]: position `t` belongs to part `k` when
//! `cum_k <= t < cum_{k+1}` (`cum` the running sum of the sequence's part
//! lengths) and sits at `raw_start_k + t - cum_k`. Positions past the
//! sequence's total length are set to 0. Gradients flow through the gather.

use crate::binary::{combine, where_};
use crate::index::gather;
use crate::mask::{masked, range_over_dim};
use crate::{cast, Dim, RfDType, RfTensor};
use verjus_core::ops::BinaryOp;
use verjus_core::{BackendRef, Error, Result, Tensor};

/// `raw` (the parts joined as they are along `joined`) rearranged per
/// sequence, as the module docs describe; returns it and the new dim.
pub(crate) fn by_sequence(
    raw: &RfTensor,
    joined: &Dim,
    parts: &[(RfTensor, Dim)],
    out_dim: Option<Dim>,
) -> Result<(RfTensor, Dim)> {
    let be = raw.backend();
    // cums[k]: frames of the sequence before part k; starts[k]: where part
    // k starts in the raw join.
    let mut cums = vec![int_scalar(0, be)?];
    let mut starts = vec![0usize];
    for (t, d) in parts {
        let raw_size = t.sizes()[t.axis("concat", d)?];
        let len = match d.lengths() {
            Some(l) => l.clone(),
            None => int_scalar(raw_size, be)?,
        };
        let last = cums.last().cloned().unwrap_or(len.clone());
        cums.push(combine(&last, BinaryOp::Add, &len, true)?);
        starts.push(starts.last().copied().unwrap_or(0) + raw_size);
    }
    let total = cums.last().cloned().unwrap_or(int_scalar(0, be)?);
    let made = Dim::new_dynamic(total, "concat")?;
    let out_dim = match out_dim {
        None => made,
        Some(o) if o.size() == made.size() => o,
        Some(o) => {
            return Err(Error::invalid(
                "concat",
                format!(
                    "out_dim {o:?} does not have the joined size {:?}",
                    made.size()
                ),
            ))
        }
    };
    let t = range_over_dim(&out_dim, be)?;
    let mut index = int_scalar(0, be)?;
    for k in (0..parts.len()).rev() {
        let inside = combine(&t, BinaryOp::Lt, &cums[k + 1], true)?;
        let shift = combine(&t, BinaryOp::Sub, &cums[k], true)?;
        let at = crate::combine_scalar(&shift, BinaryOp::Add, starts[k] as f64, false)?;
        index = where_(&inside, &at, &index, true)?;
    }
    let index = cast(&index, RfDType::Int32)?;
    let picked = gather(raw, &index, joined, false)?;
    let out = cast(
        &masked(&picked, std::slice::from_ref(&out_dim), 0.0)?,
        raw.dtype(),
    )?;
    Ok((out, out_dim))
}

/// An int32 scalar: lengths are int32, as the dims made from data have them.
fn int_scalar(v: usize, be: &BackendRef) -> Result<RfTensor> {
    let v = i32::try_from(v)
        .map_err(|_| Error::invalid("concat", format!("length {v} overflows int32")))?;
    let value = Tensor::from_vec(Vec::new(), vec![v])?;
    RfTensor::from_tensor(value, Vec::new(), None, be.clone(), false)
}
