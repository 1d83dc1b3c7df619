//! Indexing by integer tensors: [`gather`] (embeddings, picking entries)
//! and [`one_hot`].

use crate::binary::combine;
use crate::mask::range_over_dim;
use crate::{cast, fmt_dims, Dim, RfDType, RfTensor};
use verjus_core::ops::BinaryOp;
use verjus_core::{Error, Result};

/// The entries of `source` along `axis` at `indices` (an integer tensor):
/// `axis` is replaced, in place, by the dims of `indices`. Gradients of
/// repeated indices add up. The indices' dims must not be among `source`'s
/// (a per-entry gather is not supported yet).
pub fn gather(source: &RfTensor, indices: &RfTensor, axis: &Dim) -> Result<RfTensor> {
    let i = source.axis("gather", axis)?;
    if !indices.dtype().is_int() {
        return Err(Error::invalid(
            "gather",
            format!("indices must be int32 or int64, got {}", indices.dtype()),
        ));
    }
    if let Some(shared) = indices.dims().iter().find(|d| source.axis_of(d).is_some()) {
        return Err(Error::invalid(
            "gather",
            format!(
                "indices {} share dim {shared} with the source {}; a per-entry gather is not supported yet",
                fmt_dims(indices.dims()),
                fmt_dims(source.dims())
            ),
        ));
    }
    let idx = indices.var();
    let flat = if idx.shape().rank() == 1 {
        idx.clone()
    } else {
        idx.reshape([idx.shape().numel()])?
    };
    let picked = source.var().index_select(i, &flat)?;
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
    Ok(source.with_value(var, dims))
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
    let hit = combine(source, BinaryOp::Eq, &range, true)?;
    cast(&hit, RfDType::Float32)
}
