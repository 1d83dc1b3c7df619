//! index_select and index_add. Their indices are range-checked on the device
//! without waiting (`deferred/`): an out-of-range index is skipped by the
//! kernels and reported, named, at the next read from the GPU.

use crate::backend::CudaBackend;
use crate::deferred::Range;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::IndexPlan;
use verjus_core::{DType, Result, Tensor};

fn kernel(indices: &Tensor, i64_name: &'static str, i32_name: &'static str) -> &'static str {
    if indices.dtype() == DType::I64 {
        i64_name
    } else {
        i32_name
    }
}

pub(crate) fn index_select(
    be: &CudaBackend,
    plan: &IndexPlan,
    x: &Tensor,
    indices: &Tensor,
    y: &mut Tensor,
) -> Result<()> {
    let kernels = ("index_select_i64", "index_select_i32");
    let n = y.numel();
    launch_indexed(be, "index_select", kernels, plan, x, indices, y, n)
}

pub(crate) fn index_add(
    be: &CudaBackend,
    plan: &IndexPlan,
    src: &Tensor,
    indices: &Tensor,
    dst: &mut Tensor,
) -> Result<()> {
    let kernels = ("index_add_i64", "index_add_i32");
    let n = src.numel();
    launch_indexed(be, "index_add", kernels, plan, src, indices, dst, n)
}

/// Queues the check of `indices`, then runs the `(i64, i32)` kernel pair's one for their
/// dtype over `n` threads as `kernel(src, indices, dst, outer, len, inner, count)`.
#[allow(clippy::too_many_arguments)] // the op's operands plus its kernel pair
fn launch_indexed(
    be: &CudaBackend,
    op: &'static str,
    (i64_name, i32_name): (&'static str, &'static str),
    plan: &IndexPlan,
    src: &Tensor,
    indices: &Tensor,
    dst: &mut Tensor,
    n: usize,
) -> Result<()> {
    be.enter(op)?;
    let range = Range::Axis {
        axis: plan.axis,
        len: plan.len,
    };
    be.deferred.check(be, op, indices, range)?;
    let (sp, ip, dp) = (ptr(op, src)?, ptr(op, indices)?, ptr_mut(op, dst)?);
    let (o, l, i, c) = (
        plan.outer as i64,
        plan.len as i64,
        plan.inner as i64,
        plan.count as i64,
    );
    be.launch_n(
        op,
        Module::Index,
        kernel(indices, i64_name, i32_name),
        n,
        &mut [
            arg(&sp),
            arg(&ip),
            arg(&dp),
            arg(&o),
            arg(&l),
            arg(&i),
            arg(&c),
        ],
    )
}
