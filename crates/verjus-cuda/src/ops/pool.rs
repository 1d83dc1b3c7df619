//! Pooling: max pooling by own kernels (the native first-maximum rule, which
//! cuDNN does not promise), average pooling through cuDNN.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::{Pool2dPlan, PoolKind};
use verjus_core::{Result, Tensor};

/// `PoolGeom` in pool.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct PoolGeom {
    planes: i64,
    h: i64,
    w: i64,
    oh: i64,
    ow: i64,
    kh: i32,
    kw: i32,
    sh: i32,
    sw: i32,
    ph: i32,
    pw: i32,
}

fn geom(p: &Pool2dPlan) -> PoolGeom {
    let q = p.params;
    // Window, stride and padding are bounded by the (validated) input sizes,
    // which the kernels index in 64 bits; the i32 fields hold window sizes.
    let small = |v: usize| i32::try_from(v).unwrap_or(i32::MAX);
    PoolGeom {
        planes: (p.n * p.c) as i64,
        h: p.h as i64,
        w: p.w as i64,
        oh: p.oh as i64,
        ow: p.ow as i64,
        kh: small(q.kernel[0]),
        kw: small(q.kernel[1]),
        sh: small(q.stride[0]),
        sw: small(q.stride[1]),
        ph: small(q.padding[0]),
        pw: small(q.padding[1]),
    }
}

pub(crate) fn pool2d(
    be: &CudaBackend,
    plan: &Pool2dPlan,
    x: &Tensor,
    y: &mut Tensor,
) -> Result<()> {
    let op = "pool2d";
    be.enter(op)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let (xp, yp) = (ptr(op, x)?, ptr_mut(op, y)?);
    match plan.kind {
        PoolKind::Max => {
            let g = geom(plan);
            be.launch_n(
                op,
                Module::Pool,
                "max_pool2d_f32",
                n,
                &mut [arg(&xp), arg(&yp), arg(&g)],
            )
        }
        PoolKind::Avg => be.cudnn.avg_pool(plan, xp, yp),
    }
}

pub(crate) fn pool2d_backward(
    be: &CudaBackend,
    plan: &Pool2dPlan,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let op = "pool2d_backward";
    be.enter(op)?;
    let n = dx.numel();
    if n == 0 {
        return Ok(());
    }
    let (xp, yp, dyp, dxp) = (ptr(op, x)?, ptr(op, y)?, ptr(op, dy)?, ptr_mut(op, dx)?);
    match plan.kind {
        PoolKind::Max => {
            let g = geom(plan);
            be.launch_n(
                op,
                Module::Pool,
                "max_pool2d_backward_f32",
                n,
                &mut [arg(&xp), arg(&dyp), arg(&dxp), arg(&g)],
            )
        }
        PoolKind::Avg => be.cudnn.avg_pool_backward(plan, xp, yp, dyp, dxp),
    }
}
