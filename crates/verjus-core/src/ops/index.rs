//! Index-select (gather of slices along an axis) and its gradient, index-add
//! (scatter-add of slices along an axis).

use super::{check_device, check_f32_on, check_shape};
use crate::{Backend, DType, Error, Result, Shape, Tensor};

/// Validated sizes: the source viewed as `[outer, len, inner]` along the axis, and
/// `count` indices.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexPlan {
    pub axis: usize,
    pub outer: usize,
    /// Length of the indexed axis in the source (`x` of index_select, `dst` of index_add).
    pub len: usize,
    pub inner: usize,
    /// Number of indices.
    pub count: usize,
}

impl IndexPlan {
    fn new(op: &str, source: &Shape, axis: usize, indices: &Tensor) -> Result<Self> {
        if !indices.dtype().is_int() {
            return Err(Error::DTypeMismatch {
                op: op.into(),
                what: "indices".into(),
                expected: DType::I64,
                actual: indices.dtype(),
            });
        }
        if indices.shape().rank() != 1 {
            return Err(Error::shape(
                op,
                "indices",
                "rank 1 [count]",
                indices.shape(),
            ));
        }
        let (outer, len, inner) = source.split_at_axis(op, axis)?;
        Ok(IndexPlan {
            axis,
            outer,
            len,
            inner,
            count: indices.numel(),
        })
    }

    /// The shape with the indexed axis replaced by `count`.
    pub fn selected_shape(&self, source: &Shape) -> Result<Shape> {
        let mut dims = source.dims().to_vec();
        dims[self.axis] = self.count;
        Shape::new(dims)
    }
}

/// `y = x` with slices `indices[j]` along `axis` stacked; `y`'s axis has `count` entries.
/// An index outside `[0, len)` is an error that names it (the backend checks).
pub fn index_select(
    be: &dyn Backend,
    x: &Tensor,
    axis: usize,
    indices: &Tensor,
    y: &mut Tensor,
) -> Result<()> {
    let op = "index_select";
    let plan = IndexPlan::new(op, x.shape(), axis, indices)?;
    check_f32_on(op, be, &[("x", x), ("y", y)])?;
    check_device(op, "indices", be, indices)?;
    check_shape(op, "y", y, &plan.selected_shape(x.shape())?)?;
    be.index_select(&plan, x, indices, y)
}

/// `dst[.., indices[j], ..] += src[.., j, ..]` along `axis`; repeated indices add up.
pub fn index_add(
    be: &dyn Backend,
    src: &Tensor,
    axis: usize,
    indices: &Tensor,
    dst: &mut Tensor,
) -> Result<()> {
    let op = "index_add";
    let plan = IndexPlan::new(op, dst.shape(), axis, indices)?;
    check_f32_on(op, be, &[("src", src), ("dst", dst)])?;
    check_device(op, "indices", be, indices)?;
    check_shape(op, "src", src, &plan.selected_shape(dst.shape())?)?;
    be.index_add(&plan, src, indices, dst)
}
