//! index_select, index_add, and the range check of indices and labels.
//!
//! Validation cannot see tensor contents, so indices are checked on the
//! device: a kernel records the first position whose value is out of range and
//! the host reads that one word back. This is the one place an op waits for
//! the GPU (a few microseconds): an out-of-range index must be an error that
//! names it, never an out-of-bounds access.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::IndexPlan;
use verjus_core::{DType, Error, Result, Tensor};

/// The first `(position, value)` of `indices` outside `[0, len)`, if any. Waits.
pub(crate) fn first_out_of_range(
    be: &CudaBackend,
    op: &str,
    indices: &Tensor,
    len: usize,
) -> Result<Option<(usize, i64)>> {
    let count = indices.numel();
    if count == 0 {
        return Ok(None);
    }
    let status = be.scratch(op, 8)?;
    let (sp, none, one) = (status.ptr(), -1i64, 1i64);
    be.launch_n(
        op,
        Module::Memory,
        "fill_i64",
        1,
        &mut [arg(&sp), arg(&one), arg(&none)],
    )?;
    let check_kernel = kernel(indices, "check_indices_i64", "check_indices_i32");
    let (ip, c, l) = (ptr(op, indices)?, count as i64, len as i64);
    be.launch_n(
        op,
        Module::Index,
        check_kernel,
        count,
        &mut [arg(&ip), arg(&c), arg(&l), arg(&sp)],
    )?;
    let mut first = [0u8; 8];
    be.staging.download(op, sp, &mut first)?;
    let pos = u64::from_le_bytes(first);
    if pos == u64::MAX {
        return Ok(None);
    }
    let size = indices.dtype().size_in_bytes();
    let mut value = [0u8; 8];
    be.staging
        .download(op, ip + pos * size as u64, &mut value[..size])?;
    let value = if size == 8 {
        i64::from_le_bytes(value)
    } else {
        i64::from(i32::from_le_bytes([value[0], value[1], value[2], value[3]]))
    };
    Ok(Some((pos as usize, value)))
}

fn check(be: &CudaBackend, op: &str, plan: &IndexPlan, indices: &Tensor) -> Result<()> {
    match first_out_of_range(be, op, indices, plan.len)? {
        None => Ok(()),
        Some((j, v)) => Err(Error::invalid(
            op,
            format!(
                "index {v} at position {j} is out of range for axis {} of length {}",
                plan.axis, plan.len
            ),
        )),
    }
}

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

/// Checks `indices`, then runs the `(i64, i32)` kernel pair's one for their
/// dtype over `n` threads as `kernel(src, indices, dst, outer, len, inner, count)`.
#[allow(clippy::too_many_arguments)] // the op's operands plus its kernel pair
fn launch_indexed(
    be: &CudaBackend,
    op: &str,
    (i64_name, i32_name): (&'static str, &'static str),
    plan: &IndexPlan,
    src: &Tensor,
    indices: &Tensor,
    dst: &mut Tensor,
    n: usize,
) -> Result<()> {
    be.enter(op)?;
    check(be, op, plan, indices)?;
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
