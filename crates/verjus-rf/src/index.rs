//! Indexing by integer tensors: [`gather`] (embeddings, picking entries,
//! per batch entry) and [`one_hot`].
//!
//! As in RETURNN, dims that `indices` shares with `source` (other than
//! `axis`) are batch dims of the gather: entry `b` of the indices picks
//! from entry `b` of the source. That is done as one `index_select` on the
//! source viewed as `[shared..., axis]` flattened, with the indices offset
//! by their shared position; the offsets are computed in float32 like all
//! integer arithmetic here, so the flattened size must stay below 2^24.

use crate::binary::{cast_var, combine, combine_scalar, float_var, from_float};
use crate::derive::host_i64;
use crate::mask::range_over_dim;
use crate::{cast, fmt_dims, Dim, RfDType, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::ops::BinaryOp;
use verjus_core::{BackendRef, DType, Error, Result, Tensor};

/// Largest flattened `[shared..., axis]` size a per-entry gather indexes
/// exactly (float32 integers).
const EXACT: usize = 1 << 24;

/// The entries of `source` along `axis` at `indices` (an integer tensor):
/// `axis` is replaced, in place, by the dims of `indices` that `source`
/// lacks; dims both have are batch dims (see the module docs). With
/// `clip_to_valid`, indices are clipped into `[0, len - 1]` (each
/// sequence's own length for a dynamic `axis`). Gradients of repeated
/// indices add up.
pub fn gather(
    source: &RfTensor,
    indices: &RfTensor,
    axis: &Dim,
    clip_to_valid: bool,
) -> Result<RfTensor> {
    let i = source.axis("gather", axis)?;
    if !indices.dtype().is_int() {
        return Err(Error::invalid(
            "gather",
            format!("indices must be int32 or int64, got {}", indices.dtype()),
        ));
    }
    let indices = if clip_to_valid {
        clipped(indices, axis, source.sizes()[i])?
    } else {
        indices.clone()
    };
    let shared: Vec<Dim> = indices
        .dims()
        .iter()
        .filter(|d| *d != axis && source.axis_of(d).is_some())
        .cloned()
        .collect();
    if shared.is_empty() {
        plain(source, &indices, i)
    } else {
        per_entry(source, &indices, axis, &shared)
    }
}

/// `indices` clipped into the valid range of `axis` (raw size `n`).
fn clipped(indices: &RfTensor, axis: &Dim, n: usize) -> Result<RfTensor> {
    let upper = match axis.lengths() {
        Some(lengths) => {
            let last = combine_scalar(&lengths, BinaryOp::Sub, 1.0, false)?;
            combine(indices, BinaryOp::Min, &last, true)?
        }
        None => combine_scalar(indices, BinaryOp::Min, n as f64 - 1.0, false)?,
    };
    combine_scalar(&upper, BinaryOp::Max, 0.0, false)
}

/// The gather without batch dims: one `index_select` of all indices.
fn plain(source: &RfTensor, indices: &RfTensor, i: usize) -> Result<RfTensor> {
    let idx = indices.var();
    let flat = if idx.shape().rank() == 1 {
        idx.clone()
    } else {
        idx.reshape([idx.shape().numel()])?
    };
    let x = float_var(source.var().clone(), source.dtype())?;
    let picked = x.index_select(i, &flat)?;
    let sizes = source.sizes();
    let mut shape = sizes[..i].to_vec();
    shape.extend(indices.sizes());
    shape.extend(&sizes[i + 1..]);
    let var = if picked.shape().dims() == shape.as_slice() {
        picked
    } else {
        picked.reshape(shape)?
    };
    let mut dims = source.dims()[..i].to_vec();
    dims.extend(indices.dims().iter().cloned());
    dims.extend(source.dims()[i + 1..].iter().cloned());
    Ok(source.with_value(from_float(var, source.dtype())?, dims))
}

/// The gather with batch dims `shared` (see the module docs).
fn per_entry(
    source: &RfTensor,
    indices: &RfTensor,
    axis: &Dim,
    shared: &[Dim],
) -> Result<RfTensor> {
    crate::align::check_sizes("gather", source, indices)?;
    let own: Vec<Dim> = indices
        .dims()
        .iter()
        .filter(|d| !shared.contains(d))
        .cloned()
        .collect();
    let rest: Vec<Dim> = source
        .dims()
        .iter()
        .filter(|d| *d != axis && !shared.contains(d))
        .cloned()
        .collect();
    let size_of = |t: &RfTensor, d: &Dim| t.sizes()[t.axis_of(d).unwrap_or(0)];
    let shared_sizes: Vec<usize> = shared.iter().map(|d| size_of(source, d)).collect();
    let own_sizes: Vec<usize> = own.iter().map(|d| size_of(indices, d)).collect();
    let rest_sizes: Vec<usize> = rest.iter().map(|d| size_of(source, d)).collect();
    let (s, len) = (
        shared_sizes.iter().product::<usize>(),
        size_of(source, axis),
    );
    let (o, r) = (
        own_sizes.iter().product::<usize>(),
        rest_sizes.iter().product::<usize>(),
    );
    if s * len >= EXACT {
        return Err(Error::invalid(
            "gather",
            format!(
                "per-entry gather over {} and {axis} has {} positions, more than float32 indexes exactly (2^24)",
                fmt_dims(shared),
                s * len
            ),
        ));
    }
    // The source as [shared * axis, rest], the indices as [shared, own].
    let mut order = shared.to_vec();
    order.push(axis.clone());
    order.extend(rest.iter().cloned());
    let x = float_var(crate::align::permuted(source, &order)?, source.dtype())?;
    let x = x.reshape([s * len, r])?;
    let mut idx_order = shared.to_vec();
    idx_order.extend(own.iter().cloned());
    let idx = float_var(
        crate::align::permuted(indices, &idx_order)?,
        indices.dtype(),
    )?;
    let idx = idx.reshape([s, o])?;
    // An index outside its entry's [0, len) would pick from the next entry.
    check_indices("gather", indices, axis, len)?;
    let offsets = offsets(s, len, source.backend())?;
    let flat = cast_var(&idx.binary(BinaryOp::Add, &offsets)?, DType::I64)?;
    let picked = x.index_select(0, &flat.reshape([s * o])?)?;
    let mut shape = shared_sizes;
    shape.extend(own_sizes);
    shape.extend(rest_sizes);
    let var = from_float(picked.reshape(shape)?, source.dtype())?;
    let mut dims = idx_order;
    dims.extend(rest);
    let out = source.with_value(var, dims);
    // Back to the source's order, the axis replaced by the own dims.
    let pos = source.axis("gather", axis)?;
    let mut target: Vec<Dim> = source.dims()[..pos].to_vec();
    target.extend(own);
    target.extend(source.dims()[pos + 1..].iter().cloned());
    out.copy_transpose(&target)
}

/// Checks that every value of the integer tensor `indices` lies in `[0, size)`
/// of `dim`, naming the first that does not and where it is. The indices are
/// read to the host (on a GPU a sync, as the `index_select` kernels' own check).
fn check_indices(op: &str, indices: &RfTensor, dim: &Dim, size: usize) -> Result<()> {
    let values = host_i64(indices)?;
    let Some(flat) = values
        .iter()
        .position(|&v| v < 0 || v >= i64::try_from(size).unwrap_or(i64::MAX))
    else {
        return Ok(());
    };
    let sizes = indices.sizes();
    let mut at = vec![0; sizes.len()];
    let mut rest = flat;
    for (k, &n) in sizes.iter().enumerate().rev() {
        at[k] = rest % n;
        rest /= n;
    }
    let place: Vec<String> = indices
        .dims()
        .iter()
        .zip(&at)
        .map(|(d, i)| format!("{}={i}", d.name()))
        .collect();
    Err(Error::invalid(
        op,
        format!(
            "index {} at [{}] is outside dim {} of size {size}",
            values[flat],
            place.join(", "),
            dim.name()
        ),
    ))
}

/// `[s, 1]` float32 constants `k * len`: where entry `k`'s rows start.
fn offsets(s: usize, len: usize, be: &BackendRef) -> Result<Var> {
    let values: Vec<f32> = (0..s).map(|k| (k * len) as f32).collect();
    Var::constant(Tensor::from_vec([s, 1], values)?, be.clone())
}

/// `source == range(source.sparse_dim)` as float32: the indices' dims plus
/// the class dim (which must be the tensor's `sparse_dim`).
pub fn one_hot(source: &RfTensor) -> Result<RfTensor> {
    let classes = source.sparse_dim().ok_or_else(|| {
        Error::invalid(
            "one_hot",
            format!("the tensor {} has no sparse_dim", fmt_dims(source.dims())),
        )
    })?;
    let range = range_over_dim(classes, source.backend())?;
    if source.dtype().is_int() {
        // A class index outside the dim would match no class: in a loss, its
        // entry would drop out silently.
        check_indices("one_hot", source, classes, range.sizes()[0])?;
    }
    let hit = combine(source, BinaryOp::Eq, &range, true)?;
    cast(&hit, RfDType::Float32)
}
