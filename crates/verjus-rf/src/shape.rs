//! Ops that create or reshape dims: [`full`], [`expand_dim`],
//! [`merge_dims`], [`split_dims`]. A dynamic dim can be merged only as the
//! first of the merged dims, where each sequence's frames stay a prefix of
//! the merged dim; anywhere else its padding would land inside it.

use crate::align::permuted;
use crate::binary::combine;
use crate::derive::host_i64;
use crate::{fmt_dims, Dim, RfDType, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::ops::{self, BinaryOp};
use verjus_core::{BackendRef, Error, Result, Shape};

/// A constant over `dims` filled with `value`: every dim of known size, or
/// unknown with a size seen in data (`Dim::size_or_seen`).
pub fn full(dims: &[Dim], value: f64, dtype: RfDType, backend: &BackendRef) -> Result<RfTensor> {
    let sizes = dims
        .iter()
        .map(|d| {
            d.size_or_seen().ok_or_else(|| {
                Error::invalid(
                    "full",
                    format!("dim {d} has no known size (no tensor over it was made from data yet); use full_like"),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut t = ops::output(&**backend, &Shape::new(sizes)?, dtype.storage())?;
    ops::fill(&**backend, &mut t, value)?;
    RfTensor::new(Var::constant(t, backend.clone())?, dims.to_vec(), dtype)
}

/// A constant with `like`'s dims, sizes and dtype, filled with `value`.
pub fn full_like(like: &RfTensor, value: f64) -> Result<RfTensor> {
    let be = like.backend();
    let mut t = ops::output(&**be, &Shape::new(like.sizes())?, like.dtype().storage())?;
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

/// `source` with `dims` merged into one (`out_dim`, or a new dim: their
/// product by dim arithmetic), placed where the first of them was; the
/// feature dim when one of `dims` was. The new dim is static when all of
/// `dims` are; when the first is dynamic and the rest static, it is dynamic
/// with lengths `len * product(rest)` (each sequence's frames stay a
/// prefix); any other dynamic dim would put padding inside the merged dim,
/// which is an error naming it. Dims of unknown size give an unknown dim.
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
    let made = merged_dim(dims)?;
    let size: usize = dims
        .iter()
        .map(|d| source.sizes()[source.axis_of(d).unwrap_or(0)])
        .product();
    let out_dim = match out_dim {
        None => made,
        Some(o) if o.size().is_none_or(|s| s == size) => o,
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
    let merged = source.with_value(var, out_dims);
    // As RETURNN: merging the feature dim makes the merged dim the feature dim.
    let merged = match source.feature_dim() {
        Some(f) if dims.contains(f) => merged.with_feature_dim(Some(out_dim.clone()))?,
        _ => merged,
    };
    Ok((merged, out_dim))
}

/// The dim `dims` merge into (see [`merge_dims`]).
fn merged_dim(dims: &[Dim]) -> Result<Dim> {
    if let Some(bad) = dims.iter().skip(1).find(|d| d.is_dynamic()) {
        return Err(Error::invalid(
            "merge_dims",
            format!(
                "dim {bad} is dynamic but not the first of {}: its padding would end up inside \
                 the merged dim; only the first merged dim may be dynamic",
                fmt_dims(dims)
            ),
        ));
    }
    let head = &dims[0];
    if let Some(lengths) = head.lengths() {
        if let Some(inner) = lengths.dims().iter().find(|d| dims.contains(d)) {
            return Err(Error::invalid(
                "merge_dims",
                format!(
                    "the lengths of {head} are over {inner}, which is merged with it in {}",
                    fmt_dims(dims)
                ),
            ));
        }
    }
    if dims[1..].iter().any(|d| d.static_size().is_none()) {
        return Ok(Dim::new_unknown("merged"));
    }
    dims[1..]
        .iter()
        .try_fold(head.clone(), |merged, d| merged.mul_dim(d, false))
}

/// `source` with `axis` split into `dims` (in order, their product the
/// axis size), in its place. `dims` are static, except that the first may
/// be dynamic when `axis` is: then its lengths times the product of the
/// others must be `axis`'s lengths (the inverse of [`merge_dims`]). A
/// dynamic `axis` split into static dims only would lose its lengths.
pub fn split_dims(source: &RfTensor, axis: &Dim, dims: &[Dim]) -> Result<RfTensor> {
    let i = source.axis("split_dims", axis)?;
    let have = source.sizes();
    check_split(axis, dims)?;
    let sizes: Vec<usize> = dims
        .iter()
        .map(|d| {
            d.size_or_seen()
                .ok_or_else(|| Error::invalid("split_dims", format!("dim {d} has no known size")))
        })
        .collect::<Result<_>>()?;
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

/// The dynamic-dim rules of [`split_dims`].
fn check_split(axis: &Dim, dims: &[Dim]) -> Result<()> {
    let err = |msg: String| Err(Error::invalid("split_dims", msg));
    if let Some(d) = dims.iter().skip(1).find(|d| d.static_size().is_none()) {
        return err(format!(
            "dim {d} is not static; only the first of {} may be dynamic",
            fmt_dims(dims)
        ));
    }
    let Some(head) = dims.first() else {
        return err("needs at least one dim".into());
    };
    match (axis.lengths(), head.lengths()) {
        (None, None) if head.static_size().is_some() => Ok(()),
        (None, _) => err(format!("dim {head} is not static but {axis} is not dynamic")),
        (Some(_), None) => err(format!(
            "{axis} is dynamic; split into static {} it would lose its lengths (make the first dim dynamic)",
            fmt_dims(dims)
        )),
        (Some(whole), Some(part)) => {
            let k: usize = dims[1..].iter().filter_map(Dim::static_size).product();
            let (w, p) = (host_i64(&whole)?, host_i64(&part)?);
            let fits = whole.dims() == part.dims()
                && w.iter().zip(&p).all(|(&w, &p)| w == p * k as i64);
            if fits {
                Ok(())
            } else {
                err(format!(
                    "the lengths of {head} times {k} are not the lengths of {axis}"
                ))
            }
        }
    }
}
