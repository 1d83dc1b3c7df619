//! Reductions, their gradients and argmax: one warp per output (a block when
//! the group is long), see `kernels/reduce.cu`.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::launch::block_per_row;
use crate::layout::Reduction;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::{AxisPlan, ReduceOp, ReducePlan};
use verjus_core::{Result, Tensor};

fn code(op: ReduceOp) -> i32 {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Mean => 1,
        ReduceOp::Max => 2,
        ReduceOp::Min => 3,
    }
}

/// Launches `reduce_f32` on raw addresses: `y[o] = op over the group of o`.
#[allow(clippy::too_many_arguments)] // the pieces of one kernel launch
fn launch_reduce(
    be: &CudaBackend,
    name: &str,
    op: ReduceOp,
    dims: &[usize],
    reduced: &[bool],
    x: u64,
    y: u64,
    n_out: usize,
) -> Result<()> {
    let group: usize = dims
        .iter()
        .zip(reduced)
        .filter(|(_, &r)| r)
        .map(|(&d, _)| d)
        .product();
    let layout = Reduction::new(dims, reduced);
    let (n, g, c, pb) = (
        n_out as i64,
        group as i64,
        code(op),
        i32::from(block_per_row(group)),
    );
    be.launch_rows(
        name,
        Module::Reduce,
        "reduce_f32",
        n_out,
        group,
        &mut [
            arg(&x),
            arg(&y),
            arg(&n),
            arg(&g),
            arg(&c),
            arg(&pb),
            arg(&layout),
        ],
    )
}

/// Sums the tensor at `x` (contiguous `dims`) over the `reduced` axes into
/// the `n_out` elements at `y` (the gradient of a broadcast).
pub(crate) fn sum_into(
    be: &CudaBackend,
    name: &str,
    dims: &[usize],
    reduced: &[bool],
    x: u64,
    y: u64,
    n_out: usize,
) -> Result<()> {
    launch_reduce(be, name, ReduceOp::Sum, dims, reduced, x, y, n_out)
}

pub(crate) fn reduce(
    be: &CudaBackend,
    plan: &ReducePlan,
    x: &Tensor,
    y: &mut Tensor,
) -> Result<()> {
    let name = plan.op.name();
    be.enter(name)?;
    let (xp, yp) = (ptr(name, x)?, ptr_mut(name, y)?);
    launch_reduce(
        be,
        name,
        plan.op,
        plan.x.dims(),
        &plan.reduced,
        xp,
        yp,
        y.numel(),
    )
}

pub(crate) fn reduce_backward(
    be: &CudaBackend,
    plan: &ReducePlan,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let name = "reduce_backward";
    be.enter(name)?;
    if x.numel() == 0 {
        return Ok(());
    }
    let layout = Reduction::new(plan.x.dims(), &plan.reduced);
    let n_out = y.numel();
    let (xp, yp, dyp, dxp) = (
        ptr(name, x)?,
        ptr(name, y)?,
        ptr(name, dy)?,
        ptr_mut(name, dx)?,
    );
    let (n, g, c, pb) = (
        n_out as i64,
        plan.group as i64,
        code(plan.op),
        i32::from(block_per_row(plan.group)),
    );
    be.launch_rows(
        name,
        Module::Reduce,
        "reduce_backward_f32",
        n_out,
        plan.group,
        &mut [
            arg(&xp),
            arg(&yp),
            arg(&dyp),
            arg(&dxp),
            arg(&n),
            arg(&g),
            arg(&c),
            arg(&pb),
            arg(&layout),
        ],
    )
}

pub(crate) fn argmax(be: &CudaBackend, plan: &AxisPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
    let name = "argmax";
    be.enter(name)?;
    let rows = plan.outer * plan.inner;
    if rows == 0 || plan.len == 0 {
        return Ok(());
    }
    let (xp, yp) = (ptr(name, x)?, ptr_mut(name, y)?);
    let (o, l, i) = (plan.outer as i64, plan.len as i64, plan.inner as i64);
    // argmax_f32 always uses a warp per row.
    be.launch_rows(
        name,
        Module::Reduce,
        "argmax_f32",
        rows,
        1,
        &mut [arg(&xp), arg(&yp), arg(&o), arg(&l), arg(&i)],
    )
}
