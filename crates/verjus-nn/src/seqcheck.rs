//! The per-call checks of sequence inputs: each example's length, and the
//! token ids an Embedding will look up.
//!
//! Both are read on the host (a device tensor is downloaded for the check),
//! so that a bad value is an error naming the example, the frame and the
//! value before any op runs, rather than a failure deep in a kernel.

use crate::context::Context;
use crate::layers::frames::write;
use verjus_core::{ops, Backend, DType, Device, Element, Error, Result, Tensor};

/// A host copy of `t`'s elements when it lives on a device.
fn on_host<'a>(
    be: &dyn Backend,
    t: &'a Tensor,
    keep: &'a mut Option<Tensor>,
) -> Result<&'a Tensor> {
    if t.device() == Device::Cpu {
        return Ok(t);
    }
    Ok(keep.insert(ops::download(be, t)?))
}

/// Stores the call's lengths in `ctx` (all `time` when none are given),
/// after checking that each is in `0..=time`.
pub(crate) fn set_lengths(
    be: &dyn Backend,
    ctx: &mut Context,
    lengths: Option<&Tensor>,
    batch: usize,
    time: usize,
) -> Result<()> {
    let op = "Network::compute_output";
    let host = &mut ctx.lengths_host;
    host.resize(batch, 0);
    match lengths {
        None => host.fill(time as i32),
        Some(l) => {
            if l.dtype() != DType::I32 {
                return Err(Error::DTypeMismatch {
                    op: op.into(),
                    what: "lengths".into(),
                    expected: DType::I32,
                    actual: l.dtype(),
                });
            }
            if l.dims() != [batch] {
                return Err(Error::shape(
                    op,
                    "lengths",
                    format!("[{batch}] (one length per example)"),
                    l.shape(),
                ));
            }
            let mut keep = None;
            let given = on_host(be, l, &mut keep)?.as_slice::<i32>()?;
            if let Some((b, &v)) = given
                .iter()
                .enumerate()
                .find(|(_, &v)| v < 0 || v as usize > time)
            {
                return Err(Error::invalid(
                    op,
                    format!(
                        "lengths[{b}] = {v} is outside 0..={time} (example {b}; the inputs are padded to {time} frames)"
                    ),
                ));
            }
            host.copy_from_slice(given);
        }
    }
    let host = &ctx.lengths_host;
    write(be, &mut ctx.lengths, |b| host[b])
}

/// Fails unless every token id of input `name` within its example's length
/// is in `0..vocab` (all of it, for an input without a time axis).
pub(crate) fn check_tokens(
    be: &dyn Backend,
    name: &str,
    t: &Tensor,
    lengths: &[i32],
    vocab: usize,
    layer: &str,
) -> Result<()> {
    let mut keep = None;
    let ids = on_host(be, t, &mut keep)?.as_slice::<i32>()?;
    let batch = lengths.len().max(1);
    let time = if t.dims().len() > 1 {
        ids.len() / batch
    } else {
        1
    };
    for (b, row) in ids.chunks(time.max(1)).enumerate() {
        let len = if t.dims().len() > 1 {
            lengths.get(b).map_or(0, |&l| l.max(0) as usize)
        } else {
            1
        };
        if let Some((f, &v)) = row
            .iter()
            .take(len)
            .enumerate()
            .find(|(_, &v)| v < 0 || v as usize >= vocab)
        {
            return Err(Error::invalid(
                "Network::compute_output",
                format!(
                    "input {name:?}: example {b}, frame {f}: token id {v} is outside the \
                     vocabulary 0..{vocab} of Embedding {layer:?}"
                ),
            ));
        }
    }
    Ok(())
}

/// Sets the padding frames (rows `t * batch + b` with `t >= lengths[b]`) of
/// a time-major input value to 0, so that whatever the caller padded with
/// (any token id, a NaN) is never read: per-frame layers compute on every
/// row, and a padding row's zero gradient times a NaN would still be a NaN.
pub(crate) fn clear_padding(be: &dyn Backend, value: &mut Tensor, lengths: &[i32]) -> Result<()> {
    match value.dtype() {
        DType::I32 => clear::<i32>(be, value, lengths),
        _ => clear::<f32>(be, value, lengths),
    }
}

/// Whether row `row` (`t * batch + b`) of a time-major value is a real frame
/// (`t < lengths[b]`) rather than padding.
fn real_row(row: usize, lengths: &[i32]) -> bool {
    let batch = lengths.len().max(1);
    (row / batch) < lengths.get(row % batch).map_or(0, |&l| l.max(0) as usize)
}

/// Sets the padding frames of a time-major float output to 0 on its device:
/// one `select` against a `[rows, 1, ..]` mask (a few bytes to upload), so a
/// GPU value is not taken to the host and back.
pub(crate) fn zero_padding(be: &dyn Backend, value: &mut Tensor, lengths: &[i32]) -> Result<()> {
    let rows = value.dims().first().copied().unwrap_or(0);
    let keep: Vec<f32> = (0..rows)
        .map(|r| if real_row(r, lengths) { 1.0 } else { 0.0 })
        .collect();
    let mut dims = vec![1; value.dims().len().max(1)];
    dims[0] = rows;
    let mask = ops::upload(be, &Tensor::from_vec(dims, keep)?)?;
    let zero = ops::upload(be, &Tensor::from_vec([1], vec![0f32])?)?;
    let mut out = ops::zeros(be, value.shape(), DType::F32)?;
    ops::select(be, &mask, value, &zero, &mut out)?;
    *value = out;
    Ok(())
}

fn clear<T: Element>(be: &dyn Backend, value: &mut Tensor, lengths: &[i32]) -> Result<()> {
    let rows = value.dims().first().copied().unwrap_or(0).max(1);
    let width = value.numel() / rows;
    let real = |i: usize| real_row(i / width.max(1), lengths);
    if value.device() == Device::Cpu {
        for (i, v) in value.as_mut_slice::<T>()?.iter_mut().enumerate() {
            if !real(i) {
                *v = T::default();
            }
        }
        return Ok(());
    }
    let host = ops::download(be, value)?;
    let elems = host.as_slice::<T>()?;
    write(be, value, |i| if real(i) { elems[i] } else { T::default() })
}
