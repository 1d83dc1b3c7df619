//! Concatenation along an axis and its inverse (and gradient), split.

use super::{check_f32_on, check_shape};
use crate::{Backend, Error, Result, Shape, Tensor};

/// Validated sizes: each part viewed as `[outer, sizes[i], inner]` along the axis.
#[derive(Clone, Debug, PartialEq)]
pub struct ConcatPlan {
    pub axis: usize,
    pub outer: usize,
    pub inner: usize,
    /// The axis length of each part.
    pub sizes: Vec<usize>,
    /// The whole (concatenated) shape.
    pub whole: Shape,
}

impl ConcatPlan {
    /// Checks that the parts agree on every axis but `axis`.
    pub fn new(op: &str, parts: &[&Shape], axis: usize) -> Result<Self> {
        let first = parts
            .first()
            .ok_or_else(|| Error::invalid(op, "needs at least one part"))?;
        let (outer, _, inner) = first.split_at_axis(op, axis)?;
        let mut sizes = Vec::with_capacity(parts.len());
        for (i, p) in parts.iter().enumerate() {
            let same_rank = p.rank() == first.rank();
            let agrees = same_rank
                && p.dims()
                    .iter()
                    .zip(first.dims())
                    .enumerate()
                    .all(|(a, (x, y))| a == axis || x == y);
            if !agrees {
                let expected = format!("{first} with any size on axis {axis}");
                return Err(Error::shape(op, format!("part {i}"), expected, p));
            }
            sizes.push(p.dims()[axis]);
        }
        let mut whole = first.dims().to_vec();
        whole[axis] = sizes
            .iter()
            .try_fold(0usize, |a, &s| a.checked_add(s))
            .ok_or_else(|| Error::invalid(op, "concatenated axis overflows"))?;
        Ok(ConcatPlan {
            axis,
            outer,
            inner,
            sizes,
            whole: Shape::new(whole)?,
        })
    }
}

/// `y = concat(parts, axis)`.
pub fn concat(be: &dyn Backend, parts: &[&Tensor], axis: usize, y: &mut Tensor) -> Result<()> {
    let op = "concat";
    let shapes: Vec<&Shape> = parts.iter().map(|t| t.shape()).collect();
    let plan = ConcatPlan::new(op, &shapes, axis)?;
    for (i, p) in parts.iter().enumerate() {
        check_f32_on(op, be, &[(&format!("part {i}"), p)])?;
    }
    check_f32_on(op, be, &[("output", y)])?;
    check_shape(op, "output", y, &plan.whole)?;
    be.concat(&plan, parts, y)
}

/// Splits `x` along `axis` into `parts`, whose axis lengths must add up to `x`'s.
pub fn split(be: &dyn Backend, x: &Tensor, axis: usize, parts: &mut [&mut Tensor]) -> Result<()> {
    let op = "split";
    let shapes: Vec<&Shape> = parts.iter().map(|t| t.shape()).collect();
    let plan = ConcatPlan::new(op, &shapes, axis)?;
    check_f32_on(op, be, &[("input", x)])?;
    for (i, p) in parts.iter().enumerate() {
        check_f32_on(op, be, &[(&format!("part {i}"), p)])?;
    }
    check_shape(op, "input", x, &plan.whole)?;
    be.split(&plan, x, parts)
}
