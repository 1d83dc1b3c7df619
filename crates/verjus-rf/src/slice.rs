//! Parts of one dim: [`slice()`] (`x[start:end:step]` along a dim, returning
//! the new dim) and [`split`] (into consecutive parts of given dims).
//!
//! A slice of a dynamic dim from a non-negative `start` to its end is
//! dynamic again, each sequence keeping its own frames from `start` on
//! (lengths `ceil((len - start) / step)`); a slice with an explicit `end`
//! or `size` is static, as in RETURNN. Negative positions count from the
//! end of the axis, which for a dynamic dim is the padded end and so not
//! meaningful per sequence: they are an error there.

use crate::binary::{float_var, from_float};
use crate::derive::derived;
use crate::{fmt_dims, Dim, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::{Error, Result, Tensor};

/// How many entries [`slice()`] takes: a count, or the size of a dim (which
/// then is the out dim).
#[derive(Clone, Debug)]
pub enum SliceSize {
    Count(usize),
    Dim(Dim),
}

/// RETURNN's `start`, `end`, `step`, `size` of `rf.slice`.
#[derive(Clone, Debug, Default)]
pub struct SliceRange {
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub step: Option<i64>,
    pub size: Option<SliceSize>,
}

/// `source[start:end:step]` along `axis` (or `size` entries from `start`);
/// returns the tensor and its new dim (`out_dim` when given, which must
/// have the sliced size). See the module docs for the new dim's kind.
pub fn slice(
    source: &RfTensor,
    axis: &Dim,
    range: &SliceRange,
    out_dim: Option<Dim>,
) -> Result<(RfTensor, Dim)> {
    let op = "slice";
    let i = source.axis(op, axis)?;
    let n = source.sizes()[i] as i64;
    let step = range.step.unwrap_or(1);
    if step <= 0 {
        return Err(Error::invalid(
            op,
            format!("step must be positive, got {step}"),
        ));
    }
    let dynamic = axis.is_dynamic();
    let negative = range.start.is_some_and(|s| s < 0) || range.end.is_some_and(|e| e < 0);
    if dynamic && negative {
        return Err(Error::invalid(
            op,
            format!(
                "negative start/end on the dynamic dim {axis} count from the padded end, \
                 which is not meaningful per sequence"
            ),
        ));
    }
    let at = |v: i64| if v < 0 { v + n } else { v };
    let start = at(range.start.unwrap_or(0));
    let (end, made) = match (&range.size, range.end) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(op, "give either end or size, not both"));
        }
        (Some(_), None) if step != 1 => {
            return Err(Error::invalid(op, "size needs step 1"));
        }
        (Some(SliceSize::Count(c)), None) => (start + *c as i64, Dim::new_static(*c, "slice")),
        (Some(SliceSize::Dim(d)), None) => {
            let c = d
                .size()
                .ok_or_else(|| Error::invalid(op, format!("size dim {d} has no known size")))?;
            (start + c as i64, d.clone())
        }
        (None, Some(e)) => {
            let e = at(e);
            let count = if e > start {
                (e - start + step - 1) / step
            } else {
                0
            };
            (e, Dim::new_static(count as usize, "slice"))
        }
        (None, None) => {
            let f = |l: i64| ((l - start).max(0) + step - 1) / step;
            let count = f(n) as usize;
            let d = derived(op, axis, "slice", f)?.unwrap_or_else(|| Dim::new_unknown("slice"));
            debug_assert!(d.size().is_none_or(|s| s == count));
            (n, d)
        }
    };
    // An open-ended slice past the end is empty (a sequence shorter than `start`).
    let start = if range.end.is_none() && range.size.is_none() {
        start.min(n)
    } else {
        start
    };
    if start < 0 || start > n || end < start || end > n {
        return Err(Error::invalid(
            op,
            format!(
                "range [{start}, {end}) is outside dim {axis} of size {n} in {}",
                fmt_dims(source.dims())
            ),
        ));
    }
    let picks: Vec<i64> = (start..end).step_by(step as usize).collect();
    let out_dim = match out_dim {
        None => made,
        Some(o) if o.size().is_none_or(|s| s == picks.len()) => o,
        Some(o) => {
            return Err(Error::invalid(
                op,
                format!(
                    "out_dim {o:?} does not have the sliced size {}",
                    picks.len()
                ),
            ))
        }
    };
    let be = source.backend();
    let idx = Var::constant(Tensor::from_vec([picks.len()], picks)?, be.clone())?;
    let x = float_var(source.var().clone(), source.dtype())?;
    let var = from_float(x.index_select(i, &idx)?, source.dtype())?;
    let mut dims = source.dims().to_vec();
    dims[i] = out_dim.clone();
    Ok((source.with_value(var, dims), out_dim))
}

/// `source` cut along `axis` into consecutive parts over `out_dims` (of
/// known sizes adding up to the axis size); gradients flow to each part's
/// entries. A dynamic `axis` cannot be cut per sequence like that.
pub fn split(source: &RfTensor, axis: &Dim, out_dims: &[Dim]) -> Result<Vec<RfTensor>> {
    let op = "split";
    let i = source.axis(op, axis)?;
    if axis.is_dynamic() {
        return Err(Error::invalid(
            op,
            format!("dim {axis} is dynamic; split needs a static dim"),
        ));
    }
    let sizes = out_dims
        .iter()
        .map(|d| {
            d.size()
                .ok_or_else(|| Error::invalid(op, format!("out dim {d} has no known size")))
        })
        .collect::<Result<Vec<_>>>()?;
    let n = source.sizes()[i];
    if sizes.iter().sum::<usize>() != n {
        return Err(Error::invalid(
            op,
            format!(
                "out dims {} (sizes {sizes:?}) do not add up to the size {n} of {axis}",
                fmt_dims(out_dims)
            ),
        ));
    }
    let x = float_var(source.var().clone(), source.dtype())?;
    x.split(i, &sizes)?
        .into_iter()
        .zip(out_dims)
        .map(|(part, d)| {
            let mut dims = source.dims().to_vec();
            dims[i] = d.clone();
            Ok(source.with_value(from_float(part, source.dtype())?, dims))
        })
        .collect()
}
