//! Ops that create or reshape dims: [`full`], [`expand_dim`],
//! [`merge_dims`], [`split_dims`]. Merging and splitting work on static
//! dims (a dynamic dim's padding would end up inside the merged dim).

use crate::align::permuted;
use crate::binary::combine;
use crate::{fmt_dims, Dim, RfDType, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::ops::{self, BinaryOp};
use verjus_core::{BackendRef, Error, Result, Shape};

/// A constant over `dims` (all of known size) filled with `value`.
pub fn full(dims: &[Dim], value: f64, dtype: RfDType, backend: &BackendRef) -> Result<RfTensor> {
    let sizes = dims
        .iter()
        .map(|d| {
            d.size().ok_or_else(|| {
                Error::invalid("full", format!("dim {d} has no known size; use full_like"))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut t = ops::zeros(&**backend, &Shape::new(sizes)?, dtype.storage())?;
    ops::fill(&**backend, &mut t, value)?;
    RfTensor::new(Var::constant(t, backend.clone())?, dims.to_vec(), dtype)
}

/// A constant with `like`'s dims, sizes and dtype, filled with `value`.
pub fn full_like(like: &RfTensor, value: f64) -> Result<RfTensor> {
    let be = like.backend();
    let mut t = ops::zeros(&**be, &Shape::new(like.sizes())?, like.dtype().storage())?;
    ops::fill(&**be, &mut t, value)?;
    RfTensor::new(
        Var::constant(t, be.clone())?,
        like.dims().to_vec(),
        like.dtype(),
    )
}

/// `source` broadcast over the new last dim `dim` (of known size).
pub fn expand_dim(source: &RfTensor, dim: &Dim) -> Result<RfTensor> {
    if source.axis_of(dim).is_some() {
        return Err(Error::invalid(
            "expand_dim",
            format!("dim {dim} is already in {}", fmt_dims(source.dims())),
        ));
    }
    let zeros = full(
        std::slice::from_ref(dim),
        0.0,
        RfDType::Float32,
        source.backend(),
    )?;
    let t = combine(source, BinaryOp::Add, &zeros, true)?;
    if source.dtype().is_int() {
        crate::cast(&t, source.dtype())
    } else {
        Ok(t)
    }
}

/// `source` with the static `dims` merged into one (`out_dim`, or a new
/// static dim of their product), placed where the first of them was.
pub fn merge_dims(
    source: &RfTensor,
    dims: &[Dim],
    out_dim: Option<Dim>,
) -> Result<(RfTensor, Dim)> {
    let first = dims
        .iter()
        .map(|d| source.axis("merge_dims", d))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .min()
        .ok_or_else(|| Error::invalid("merge_dims", "needs at least one dim"))?;
    let mut size = 1;
    for d in dims {
        size *= d.static_size().ok_or_else(|| {
            Error::invalid(
                "merge_dims",
                format!("dim {d} is not static; merging dynamic dims is not supported yet"),
            )
        })?;
    }
    let out_dim = match out_dim {
        None => Dim::new_static(size, "merged"),
        Some(o) if o.static_size() == Some(size) => o,
        Some(o) => {
            return Err(Error::invalid(
                "merge_dims",
                format!("out_dim {o:?} does not have the merged size {size}"),
            ))
        }
    };
    let rest: Vec<Dim> = source
        .dims()
        .iter()
        .filter(|d| !dims.contains(d))
        .cloned()
        .collect();
    let mut order = rest[..first.min(rest.len())].to_vec();
    let before = order.len();
    order.extend(dims.iter().cloned());
    order.extend(rest[before..].iter().cloned());
    let var = permuted(source, &order)?;
    let mut out_dims = rest[..before].to_vec();
    out_dims.push(out_dim.clone());
    out_dims.extend(rest[before..].iter().cloned());
    let sizes = var.shape();
    let mut shape = sizes.dims()[..before].to_vec();
    shape.push(size);
    shape.extend(&sizes.dims()[before + dims.len()..]);
    let var = var.reshape(shape)?;
    Ok((source.with_value(var, out_dims), out_dim))
}

/// `source` with `axis` split into the static `dims` (in order, their
/// product the axis size), in its place.
pub fn split_dims(source: &RfTensor, axis: &Dim, dims: &[Dim]) -> Result<RfTensor> {
    let i = source.axis("split_dims", axis)?;
    let sizes: Vec<usize> = dims
        .iter()
        .map(|d| {
            d.static_size()
                .ok_or_else(|| Error::invalid("split_dims", format!("dim {d} is not static")))
        })
        .collect::<Result<_>>()?;
    let have = source.sizes();
    if sizes.iter().product::<usize>() != have[i] {
        return Err(Error::invalid(
            "split_dims",
            format!(
                "dims {} do not multiply to the size {} of {axis}",
                fmt_dims(dims),
                have[i]
            ),
        ));
    }
    let mut shape = have[..i].to_vec();
    shape.extend(&sizes);
    shape.extend(&have[i + 1..]);
    let var = source.var().reshape(shape)?;
    let mut out = source.dims()[..i].to_vec();
    out.extend(dims.iter().cloned());
    out.extend(source.dims()[i + 1..].iter().cloned());
    RfTensor::new(var, out, source.dtype())
}
