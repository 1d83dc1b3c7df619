//! Reductions over chosen axes, argmax, and their gradients.

use super::{check_device, check_dtype, check_f32_on, check_shape};
use crate::{Backend, DType, Error, Result, Shape, Tensor};

/// How a reduction combines elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
}

impl ReduceOp {
    /// The op's name for messages.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "reduce_sum",
            ReduceOp::Mean => "reduce_mean",
            ReduceOp::Max => "reduce_max",
            ReduceOp::Min => "reduce_min",
        }
    }
}

/// Validated shapes of a reduction.
#[derive(Clone, Debug, PartialEq)]
pub struct ReducePlan {
    pub op: ReduceOp,
    /// The input shape.
    pub x: Shape,
    /// `reduced[i]` is true when axis `i` is reduced.
    pub reduced: Vec<bool>,
    /// The output shape with reduced axes kept as 1 (the output tensor itself may
    /// have them squeezed away; the element order is the same).
    pub keepdims: Shape,
    /// Number of input elements combined into each output element.
    pub group: usize,
}

impl ReducePlan {
    /// Checks the axes (in range, no repeats).
    pub fn new(op: ReduceOp, x: &Shape, axes: &[usize]) -> Result<Self> {
        let mut reduced = vec![false; x.rank()];
        for &a in axes {
            x.dim(op.name(), a)?;
            if std::mem::replace(&mut reduced[a], true) {
                return Err(Error::invalid(
                    op.name(),
                    format!("axis {a} is listed twice"),
                ));
            }
        }
        let keep: Vec<usize> = x
            .dims()
            .iter()
            .zip(&reduced)
            .map(|(&d, &r)| if r { 1 } else { d })
            .collect();
        let group = x
            .dims()
            .iter()
            .zip(&reduced)
            .filter(|(_, &r)| r)
            .map(|(&d, _)| d)
            .product();
        Ok(ReducePlan {
            op,
            x: x.clone(),
            reduced,
            keepdims: Shape::new(keep)?,
            group,
        })
    }

    /// The output shape with reduced axes removed.
    pub fn squeezed(&self) -> Shape {
        let dims: Vec<usize> = self
            .x
            .dims()
            .iter()
            .zip(&self.reduced)
            .filter(|(_, &r)| !r)
            .map(|(&d, _)| d)
            .collect();
        Shape::new(dims).expect("a sub-shape of a valid shape is valid")
    }

    fn check_output(&self, what: &str, y: &Tensor) -> Result<()> {
        if y.shape() != &self.keepdims && y.shape() != &self.squeezed() {
            return Err(Error::shape(
                self.op.name(),
                what,
                format!("{} or {}", self.keepdims, self.squeezed()),
                y.shape(),
            ));
        }
        Ok(())
    }
}

/// `y = op over axes of x`; `y` has the reduced axes either kept as 1 or removed.
/// Max and min over an empty group are errors; sum gives 0 and mean NaN-free 0.
pub fn reduce(
    be: &dyn Backend,
    op: ReduceOp,
    x: &Tensor,
    axes: &[usize],
    y: &mut Tensor,
) -> Result<()> {
    let plan = ReducePlan::new(op, x.shape(), axes)?;
    check_f32_on(op.name(), be, &[("x", x), ("y", y)])?;
    plan.check_output("y", y)?;
    if plan.group == 0 && matches!(op, ReduceOp::Max | ReduceOp::Min) && y.numel() > 0 {
        return Err(Error::invalid(
            op.name(),
            format!("reduction over an empty axis of {}", x.shape()),
        ));
    }
    be.reduce(&plan, x, y)
}

/// `dx` from `dy` for `y = reduce(x)`: sum spreads `dy`, mean spreads `dy / n`,
/// max and min send `dy` to the elements equal to `y`, split evenly between ties.
pub fn reduce_backward(
    be: &dyn Backend,
    op: ReduceOp,
    x: &Tensor,
    axes: &[usize],
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let plan = ReducePlan::new(op, x.shape(), axes)?;
    let name = format!("{}_backward", op.name());
    check_f32_on(&name, be, &[("x", x), ("y", y), ("dy", dy), ("dx", dx)])?;
    plan.check_output("y", y)?;
    plan.check_output("dy", dy)?;
    check_shape(&name, "dx", dx, x.shape())?;
    be.reduce_backward(&plan, x, y, dy, dx)
}

/// The view of a tensor as `[outer, len, inner]` around one axis, as softmax,
/// argmax and the losses use it.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisPlan {
    pub shape: Shape,
    pub axis: usize,
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
}

impl AxisPlan {
    /// Checks the axis.
    pub fn new(op: &str, shape: &Shape, axis: usize) -> Result<Self> {
        let (outer, len, inner) = shape.split_at_axis(op, axis)?;
        Ok(AxisPlan {
            shape: shape.clone(),
            axis,
            outer,
            len,
            inner,
        })
    }

    /// The shape with `axis` removed.
    pub fn squeezed(&self) -> Shape {
        let mut dims = self.shape.dims().to_vec();
        dims.remove(self.axis);
        Shape::new(dims).expect("a sub-shape of a valid shape is valid")
    }
}

/// `y = argmax of x along axis` as int64 (first maximum wins); `y` has the axis removed.
pub fn argmax(be: &dyn Backend, x: &Tensor, axis: usize, y: &mut Tensor) -> Result<()> {
    let op = "argmax";
    let plan = AxisPlan::new(op, x.shape(), axis)?;
    check_f32_on(op, be, &[("x", x)])?;
    check_device(op, "y", be, y)?;
    check_dtype(op, "y", y, DType::I64)?;
    check_shape(op, "y", y, &plan.squeezed())?;
    if plan.len == 0 && y.numel() > 0 {
        return Err(Error::invalid(
            op,
            format!("argmax over an empty axis of {}", x.shape()),
        ));
    }
    be.argmax(&plan, x, y)
}
