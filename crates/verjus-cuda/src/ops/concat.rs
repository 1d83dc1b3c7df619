//! Concat and split: one slab copy per part, between the part and its rows
//! of the whole.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::ConcatPlan;
use verjus_core::{Result, Tensor};

/// Copies `rows x width` f32 elements between pitched layouts.
#[allow(clippy::too_many_arguments)] // the pieces of one kernel launch
fn copy_rows(
    be: &CudaBackend,
    op: &str,
    src: u64,
    dst: u64,
    rows: usize,
    width: usize,
    src_pitch: usize,
    dst_pitch: usize,
) -> Result<()> {
    let (r, w, sp, dp) = (
        rows as i64,
        width as i64,
        src_pitch as i64,
        dst_pitch as i64,
    );
    be.launch_n(
        op,
        Module::Concat,
        "copy_rows_f32",
        rows * width,
        &mut [arg(&src), arg(&dst), arg(&r), arg(&w), arg(&sp), arg(&dp)],
    )
}

pub(crate) fn concat(
    be: &CudaBackend,
    plan: &ConcatPlan,
    parts: &[&Tensor],
    y: &mut Tensor,
) -> Result<()> {
    let op = "concat";
    be.enter(op)?;
    let total: usize = plan.sizes.iter().sum();
    let yp = ptr_mut(op, y)?;
    let mut offset = 0;
    for (part, &size) in parts.iter().zip(&plan.sizes) {
        let dst = yp + (offset * plan.inner * 4) as u64;
        let width = size * plan.inner;
        copy_rows(
            be,
            op,
            ptr(op, part)?,
            dst,
            plan.outer,
            width,
            width,
            total * plan.inner,
        )?;
        offset += size;
    }
    Ok(())
}

pub(crate) fn split(
    be: &CudaBackend,
    plan: &ConcatPlan,
    x: &Tensor,
    parts: &mut [&mut Tensor],
) -> Result<()> {
    let op = "split";
    be.enter(op)?;
    let total: usize = plan.sizes.iter().sum();
    let xp = ptr(op, x)?;
    let mut offset = 0;
    for (part, &size) in parts.iter_mut().zip(&plan.sizes) {
        let src = xp + (offset * plan.inner * 4) as u64;
        let width = size * plan.inner;
        copy_rows(
            be,
            op,
            src,
            ptr_mut(op, part)?,
            plan.outer,
            width,
            total * plan.inner,
            width,
        )?;
        offset += size;
    }
    Ok(())
}
