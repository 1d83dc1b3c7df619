//! Dims derived from another dim by a size formula: the out dim of a
//! strided conv, a slice, a pad.
//!
//! The formula is applied to the static size, or to every sequence length
//! of a dynamic dim (on the host: the lengths are read once anyway, to
//! learn the longest), so each sequence's new length is what the op gives
//! for that sequence alone. The formula must not decrease when its input
//! grows, so the longest new length is the new axis size.

use crate::{Dim, RfDType, RfTensor};
use verjus_core::{DType, Error, Result, Tensor};

/// A new dim named `name` whose size is `f(size of base)`, per sequence for
/// a dynamic `base` (negative results are clamped to 0); `None` when
/// `base`'s size is unknown (the caller then makes an unknown dim).
pub(crate) fn derived(
    op: &str,
    base: &Dim,
    name: &str,
    f: impl Fn(i64) -> i64,
) -> Result<Option<Dim>> {
    if let Some(n) = base.static_size() {
        return Ok(Some(Dim::new_static(f(n as i64).max(0) as usize, name)));
    }
    let Some(lengths) = base.lengths() else {
        return Ok(None);
    };
    let values: Vec<i64> = host_i64(&lengths)?
        .into_iter()
        .map(|l| f(l).max(0))
        .collect();
    let shape = lengths.sizes();
    let value = match lengths.dtype() {
        RfDType::Int32 => {
            let v = values
                .iter()
                .map(|&l| i32::try_from(l))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|_| Error::invalid(op, format!("new lengths of {base} overflow int32")))?;
            Tensor::from_vec(shape, v)?
        }
        _ => Tensor::from_vec(shape, values)?,
    };
    let t = RfTensor::from_tensor(
        value,
        lengths.dims().to_vec(),
        Some(lengths.dtype()),
        lengths.backend().clone(),
        false,
    )?;
    Dim::new_dynamic(t, name).map(Some)
}

/// An integer tensor's values (sequence lengths, indices) as i64, on the host.
pub(crate) fn host_i64(values: &RfTensor) -> Result<Vec<i64>> {
    let host = values.to_host()?;
    Ok(match host.dtype() {
        DType::I32 => host.as_slice::<i32>()?.iter().map(|&v| v as i64).collect(),
        _ => host.to_vec::<i64>()?,
    })
}
