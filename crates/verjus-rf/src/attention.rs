//! [`dot_attention`]: RETURNN's `rf.dot_attention` by dims, on the fused
//! core op ([`Var::attention`]), so the scores are never a tensor of the
//! frontend (see `verjus_core::ops::attention`).
//!
//! The keys' dims other than `axis` and `key_dim` are batch dims (the values
//! and the query must have them too); the values' one remaining dim is the
//! value feature dim; the query's remaining dims (none, one, or several,
//! `axis` itself included for self-attention) are merged into the query
//! frames. Everything goes to `[N, Tq, D]` / `[N, Tk, D]` / `[N, Tk, Dv]`
//! (a copy only where the order differs); a dynamic `axis` gives each entry
//! its key length, so keys of padded frames never get weight.

use crate::lstm::lengths_over;
use crate::{fmt_dims, Dim, RfDType, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::{Error, Result};

/// `softmax_axis(scale * query . keys) . values`, reducing `key_dim` and then
/// `axis`. `causal_query_dim` (a query dim as long as `axis`, or `axis`
/// itself) makes query position `i` see keys `0..=i` only. `scale` defaults
/// to `key_dim ** -0.5`. The result is over `[batch dims..., query dims...,
/// value feature dim]`, with that feature dim.
pub fn dot_attention(
    query: &RfTensor,
    keys: &RfTensor,
    values: &RfTensor,
    key_dim: &Dim,
    axis: &Dim,
    causal_query_dim: Option<&Dim>,
    scale: Option<f32>,
) -> Result<RfTensor> {
    let op = "dot_attention";
    keys.axis(op, axis)?;
    keys.axis(op, key_dim)?;
    query.axis(op, key_dim)?;
    if values.axis_of(axis).is_none() {
        return Err(Error::invalid(
            op,
            format!(
                "values {} must have the attention axis {axis} (keys {})",
                fmt_dims(values.dims()),
                fmt_dims(keys.dims())
            ),
        ));
    }
    for (what, t) in [("query", query), ("keys", keys), ("values", values)] {
        if t.dtype() != RfDType::Float32 {
            return Err(Error::invalid(
                op,
                format!("{what} must be float32, got {}", t.dtype()),
            ));
        }
    }
    let batch: Vec<Dim> = keys
        .dims()
        .iter()
        .filter(|d| *d != axis && *d != key_dim)
        .cloned()
        .collect();
    for (what, t) in [("query", query), ("values", values)] {
        if let Some(d) = batch.iter().find(|d| t.axis_of(d).is_none()) {
            return Err(Error::invalid(
                op,
                format!(
                    "{what} {} lacks the keys' batch dim {d} (keys {})",
                    fmt_dims(t.dims()),
                    fmt_dims(keys.dims())
                ),
            ));
        }
    }
    let v_feat = value_feature_dim(op, values, &batch, axis)?;
    let q_dims: Vec<Dim> = query
        .dims()
        .iter()
        .filter(|d| !batch.contains(d) && *d != key_dim)
        .cloned()
        .collect();
    let (qs, ks, vs) = (query.sizes(), keys.sizes(), values.sizes());
    let size = |t: &RfTensor, s: &[usize], d: &Dim| s[t.axis_of(d).unwrap_or(0)];
    let batch_sizes: Vec<usize> = batch.iter().map(|d| size(keys, &ks, d)).collect();
    for (d, &n) in batch.iter().zip(&batch_sizes) {
        for (what, t, s) in [("query", query, &qs), ("values", values, &vs)] {
            if size(t, s, d) != n {
                return Err(Error::invalid(
                    op,
                    format!("{what}'s {d} has {} entries, keys' {n}", size(t, s, d)),
                ));
            }
        }
    }
    let n: usize = batch_sizes.iter().product();
    let tq: usize = q_dims.iter().map(|d| size(query, &qs, d)).product();
    let tk = size(keys, &ks, axis);
    let (d, dv) = (size(keys, &ks, key_dim), size(values, &vs, &v_feat));
    if size(query, &qs, key_dim) != d {
        return Err(Error::invalid(
            op,
            format!(
                "query's {key_dim} has {} features, keys' {d}",
                size(query, &qs, key_dim)
            ),
        ));
    }
    if let Some(c) = causal_query_dim {
        if q_dims.as_slice() != std::slice::from_ref(c) || tq != tk {
            return Err(Error::invalid(
                op,
                format!(
                    "causal attention needs {c} as the query's only dim besides the batch dims and {key_dim}, as long as {axis} ({tk}); the query is {}",
                    fmt_dims(query.dims())
                ),
            ));
        }
    }
    let order = |rest: &[Dim], last: &Dim| -> Vec<Dim> {
        let mut o = batch.clone();
        o.extend(rest.iter().cloned());
        o.push(last.clone());
        o
    };
    let flat = |t: &RfTensor, rest: &[Dim], last: &Dim, rows: usize, cols: usize| -> Result<Var> {
        t.copy_transpose(&order(rest, last))?
            .var()
            .reshape([n, rows, cols])
    };
    let q = flat(query, &q_dims, key_dim, tq, d)?;
    let k = flat(keys, std::slice::from_ref(axis), key_dim, tk, d)?;
    let v = flat(values, std::slice::from_ref(axis), &v_feat, tk, dv)?;
    let lengths = match axis.lengths() {
        Some(l) => Some(lengths_over(op, axis, &l, &batch, &batch_sizes)?.reshape([n])?),
        None => None,
    };
    let scale = scale.unwrap_or(1.0 / (d as f32).sqrt());
    let out = Var::attention(
        &q,
        &k,
        &v,
        lengths.as_ref(),
        causal_query_dim.is_some(),
        scale,
    )?;
    let out_dims = order(&q_dims, &v_feat);
    let mut shape = batch_sizes;
    shape.extend(q_dims.iter().map(|d| size(query, &qs, d)));
    shape.push(dv);
    RfTensor::new(out.reshape(shape)?, out_dims, RfDType::Float32)?.with_feature_dim(Some(v_feat))
}

/// The values' dim that is neither a batch dim nor `axis`: there must be
/// exactly one.
fn value_feature_dim(op: &str, values: &RfTensor, batch: &[Dim], axis: &Dim) -> Result<Dim> {
    let rest: Vec<&Dim> = values
        .dims()
        .iter()
        .filter(|d| !batch.contains(d) && *d != axis)
        .collect();
    match rest.as_slice() {
        [one] => Ok((*one).clone()),
        _ => Err(Error::invalid(
            op,
            format!(
                "cannot infer the value feature dim: values {} must have exactly one dim besides the batch dims {} and {axis}",
                fmt_dims(values.dims()),
                fmt_dims(batch)
            ),
        )),
    }
}
