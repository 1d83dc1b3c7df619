//! Per-call index lists and weights built on the host from the lengths.
//!
//! Layers that see the time axis need, each call, small tensors derived from
//! the lengths: the rows of each sequence's last frame, the order that
//! reverses every sequence within its length, the weights of a masked mean.
//! On the host they are written into the context's buffers in place (no
//! allocation per step); on a device they are uploaded (the op set has no
//! upload into an existing buffer yet).

use verjus_core::{ops, Backend, Device, Element, Result, Tensor};

/// `dst[i] = value(i)` for every element of `dst`.
pub(crate) fn write<T: Element>(
    be: &dyn Backend,
    dst: &mut Tensor,
    value: impl Fn(usize) -> T,
) -> Result<()> {
    if dst.device() == Device::Cpu {
        for (i, v) in dst.as_mut_slice::<T>()?.iter_mut().enumerate() {
            *v = value(i);
        }
        return Ok(());
    }
    let host = Tensor::from_vec(dst.dims().to_vec(), (0..dst.numel()).map(value).collect())?;
    *dst = ops::upload(be, &host)?;
    Ok(())
}

/// The row of frame `t` of example `b` in a time-major value, for the row
/// `t * batch + b` of the reversed sequences: each sequence reversed within
/// its length, padding frames left in place. Applying it twice is the identity.
pub(crate) fn reversed_row(row: usize, batch: usize, lengths: &[i32]) -> i32 {
    let (t, b) = (row / batch, row % batch);
    let len = lengths.get(b).map_or(0, |&l| l.max(0) as usize);
    let t = if t < len { len - 1 - t } else { t };
    (t * batch + b) as i32
}
