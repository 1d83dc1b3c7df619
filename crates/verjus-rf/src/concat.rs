//! Dim-creating ops that join along a dim: [`concat`] and [`pad`]. Each
//! returns the new dim with the tensor and accepts `out_dim` to reuse one.
//!
//! Only static dims are joined for now: concatenating or padding a dynamic
//! dim has to move each sequence's entries by its own length (RETURNN pads
//! at each sequence's own end), which is an error here until implemented.

use crate::align::permuted;
use crate::{fmt_dims, Dim, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::{ops, DType, Error, Result, Shape};

/// Joins `parts` (each a tensor and its dim to join along) into one dim of
/// the summed size (`out_dim`, or a new static dim). The parts must have the
/// same other dims (in any order; they follow the first part's order).
pub fn concat(parts: &[(RfTensor, Dim)], out_dim: Option<Dim>) -> Result<(RfTensor, Dim)> {
    let Some((first, first_dim)) = parts.first() else {
        return Err(Error::invalid("concat", "needs at least one part"));
    };
    let axis = first.axis("concat", first_dim)?;
    let others: Vec<&Dim> = first.dims().iter().filter(|d| *d != first_dim).collect();
    let mut total = 0;
    let mut vars = Vec::with_capacity(parts.len());
    for (t, d) in parts {
        let size = static_size("concat", t, d)?;
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
        vars.push(permuted(t, &order)?);
        total += size;
    }
    let out_dim = checked_out_dim("concat", out_dim, total)?;
    let var = Var::concat(&vars, axis)?;
    let mut dims = first.dims().to_vec();
    dims[axis] = out_dim.clone();
    Ok((first.with_value(var, dims), out_dim))
}

/// `source` with `padding[i] = (before, after)` entries of `value` around
/// `axes[i]`; returns the new dims (`out_dims`, or new static dims).
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
        let size = static_size("pad", &x, axis)?;
        let out = match &out_dims {
            Some(o) => o[i].clone(),
            None => Dim::new_static(before + size + after, axis.name()),
        };
        let mut parts = Vec::with_capacity(3);
        if before > 0 {
            parts.push(filled(&x, axis, before, "pad_before", value)?);
        }
        parts.push((x.clone(), axis.clone()));
        if after > 0 {
            parts.push(filled(&x, axis, after, "pad_after", value)?);
        }
        let (y, d) = concat(&parts, Some(out))?;
        x = y;
        new_dims.push(d);
    }
    Ok((x, new_dims))
}

/// A constant shaped like `like` with `axis` replaced by a new dim of `n`.
fn filled(
    like: &RfTensor,
    axis: &Dim,
    n: usize,
    name: &str,
    value: f32,
) -> Result<(RfTensor, Dim)> {
    let dim = Dim::new_static(n, name);
    let i = like.axis("pad", axis)?;
    let mut sizes = like.sizes();
    sizes[i] = n;
    let be = like.backend();
    let mut t = ops::zeros(&**be, &Shape::new(sizes)?, DType::F32)?;
    ops::fill(&**be, &mut t, value as f64)?;
    let mut dims = like.dims().to_vec();
    dims[i] = dim.clone();
    let part = RfTensor::new(Var::constant(t, be.clone())?, dims, like.dtype())?;
    Ok((part, dim))
}

fn static_size(op: &str, t: &RfTensor, d: &Dim) -> Result<usize> {
    t.axis(op, d)?;
    d.static_size().ok_or_else(|| {
        Error::invalid(
            op,
            format!("dim {d} is not static; joining dynamic dims is not supported yet"),
        )
    })
}

fn checked_out_dim(op: &str, out_dim: Option<Dim>, total: usize) -> Result<Dim> {
    match out_dim {
        None => Ok(Dim::new_static(total, op)),
        Some(d) if d.static_size() == Some(total) => Ok(d),
        Some(d) => Err(Error::invalid(
            op,
            format!("out_dim {d:?} does not have the joined size {total}"),
        )),
    }
}
