//! Dim-creating ops that join along a dim: [`concat()`] and [`pad`]. Each
//! returns the new dim with the tensor and accepts `out_dim` to reuse one.
//!
//! Static (and unknown-size) dims join as they are. Dynamic dims join per
//! sequence, as RETURNN defines it: `concat` puts each sequence's own
//! frames one after the other (new lengths: the sum, `seq_concat.rs`),
//! and `pad` puts the right padding after each sequence's own end (new
//! lengths: old plus the padding), so a sequence padded or joined in a
//! batch equals the same sequence done alone.

use crate::align::permuted;
use crate::binary::{combine, combine_scalar, float_var, from_float, select_into};
use crate::derive::derived;
use crate::mask::range_over_dim;
use crate::window::pad_axis;
use crate::{fmt_dims, Dim, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::ops::BinaryOp;
use verjus_core::{Error, Result};

/// Joins `parts` (each a tensor and its dim to join along) into one dim of
/// the summed size (`out_dim`, or a new dim: static when all parts are, the
/// sum of their dims by dim arithmetic; dynamic when one is). The parts must have the same other dims (in any
/// order; they follow the first part's order).
pub fn concat(parts: &[(RfTensor, Dim)], out_dim: Option<Dim>) -> Result<(RfTensor, Dim)> {
    let Some((first, first_dim)) = parts.first() else {
        return Err(Error::invalid("concat", "needs at least one part"));
    };
    let axis = first.axis("concat", first_dim)?;
    let others: Vec<&Dim> = first.dims().iter().filter(|d| *d != first_dim).collect();
    let mut vars = Vec::with_capacity(parts.len());
    for (t, d) in parts {
        t.axis("concat", d)?;
        let rest: Vec<&Dim> = t.dims().iter().filter(|x| *x != d).collect();
        if rest.len() != others.len() || rest.iter().any(|x| !others.contains(x)) {
            return Err(Error::invalid(
                "concat",
                format!(
                    "parts must agree on their other dims: {} (joining {first_dim}) vs {} (joining {d})",
                    fmt_dims(first.dims()),
                    fmt_dims(t.dims())
                ),
            ));
        }
        let mut order = first.dims().to_vec();
        order[axis] = d.clone();
        vars.push(float_var(permuted(t, &order)?, t.dtype())?);
    }
    let var = from_float(Var::concat(&vars, axis)?, first.dtype())?;
    let total = var.shape().dims()[axis];
    let mut dims = first.dims().to_vec();
    if parts.iter().any(|(_, d)| d.is_dynamic()) {
        let joined = Dim::new_static(total, "concat_raw");
        dims[axis] = joined.clone();
        let raw = first.with_value(var, dims);
        return crate::seq_concat::by_sequence(&raw, &joined, parts, out_dim);
    }
    let out_dim = match out_dim {
        // The sum by dim arithmetic, as RETURNN: the same parts give the same
        // dim, and it equals `a + b` written in the model.
        None if parts.iter().all(|(_, d)| d.static_size().is_some()) => parts[1..]
            .iter()
            .try_fold(parts[0].1.clone(), |sum, (_, d)| sum.add_dim(d, false))?,
        None => Dim::new_unknown("concat"),
        Some(d) if d.size().is_none_or(|s| s == total) => d,
        Some(d) => {
            return Err(Error::invalid(
                "concat",
                format!("out_dim {d:?} does not have the joined size {total}"),
            ))
        }
    };
    dims[axis] = out_dim.clone();
    Ok((first.with_value(var, dims), out_dim))
}

/// `source` with `padding[i] = (before, after)` entries of `value` around
/// `axes[i]`; returns the new dims (`out_dims`, or new dims of the padded
/// sizes, dynamic for a dynamic axis, see the module docs).
pub fn pad(
    source: &RfTensor,
    axes: &[Dim],
    padding: &[(usize, usize)],
    out_dims: Option<Vec<Dim>>,
    value: f32,
) -> Result<(RfTensor, Vec<Dim>)> {
    if axes.len() != padding.len() || out_dims.as_ref().is_some_and(|o| o.len() != axes.len()) {
        return Err(Error::invalid(
            "pad",
            format!(
                "{} axes {} need as many paddings (got {}) and out_dims",
                axes.len(),
                fmt_dims(axes),
                padding.len()
            ),
        ));
    }
    let mut x = source.clone();
    let mut new_dims = Vec::with_capacity(axes.len());
    for (i, (axis, &(before, after))) in axes.iter().zip(padding).enumerate() {
        let out = match &out_dims {
            Some(o) => o[i].clone(),
            None => {
                let grow = (before + after) as i64;
                derived("pad", axis, axis.name(), |l| l + grow)?
                    .unwrap_or_else(|| Dim::new_unknown(axis.name()))
            }
        };
        x = pad_raw(&x, axis, (before, after), value, &out)?;
        if axis.is_dynamic() && after > 0 {
            x = fill_after_ends(&x, axis, &out, before, value)?;
        }
        new_dims.push(out);
    }
    Ok((x, new_dims))
}

/// `x` with `before` / `after` entries of `value` around the raw axis of
/// `axis`, which becomes `out` (whose size, when known, must fit).
pub(crate) fn pad_raw(
    x: &RfTensor,
    axis: &Dim,
    (before, after): (usize, usize),
    value: f32,
    out: &Dim,
) -> Result<RfTensor> {
    let i = x.axis("pad", axis)?;
    let total = x.sizes()[i] + before + after;
    if out.size().is_some_and(|s| s != total) {
        return Err(Error::invalid(
            "pad",
            format!("out dim {out:?} does not have the padded size {total} of {axis}"),
        ));
    }
    let mut dims = x.dims().to_vec();
    dims[i] = out.clone();
    let own = float_var(x.var().clone(), x.dtype())?;
    let var = from_float(pad_axis(&own, i, (before, after), value)?, x.dtype())?;
    Ok(x.with_value(var, dims))
}

/// `x` (padded along `out`) with `value` from each sequence's own end
/// (`before + len` of the dynamic `axis`) on.
fn fill_after_ends(
    x: &RfTensor,
    axis: &Dim,
    out: &Dim,
    before: usize,
    value: f32,
) -> Result<RfTensor> {
    let lengths = axis
        .lengths()
        .ok_or_else(|| Error::invalid("pad", format!("dim {axis} has no lengths")))?;
    let ends = combine_scalar(&lengths, BinaryOp::Add, before as f64, false)?;
    let range = range_over_dim(out, x.backend())?;
    let inside = combine(&range, BinaryOp::Lt, &ends, true)?;
    let out_dims = crate::align::union(x.dims(), inside.dims());
    let fill = RfTensor::scalar(value, x.backend())?;
    let y = select_into(out_dims, &inside, x, &fill)?;
    // The cast back to x's dtype keeps the values; the sparse dim is x's too.
    crate::unary::cast(&y, x.dtype())?.with_sparse_dim(x.sparse_dim().cloned())
}
