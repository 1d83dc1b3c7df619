//! Unary and broadcasting binary ops, select, and their gradients.
//!
//! Kernels receive an op's code (`UnaryOp::code`, its position in the op
//! table) and scalar; the `switch` they run on it is written from the same
//! table (`elementwise_source.rs`). A
//! binary gradient is computed at every output position first, then summed
//! over the axes along which its operand was broadcast (a reduction launch),
//! unless the operand has the output's shape.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::layout::Strided3;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::{BinaryPlan, SelectPlan, UnaryOp};
use verjus_core::{Result, Tensor};

pub(crate) fn unary(be: &CudaBackend, op: UnaryOp, x: &Tensor, y: &mut Tensor) -> Result<()> {
    let name = op.name();
    be.enter(name)?;
    let n = x.numel();
    let (code, s) = (op.code(), op.scalar());
    let (xp, yp, count) = (ptr(name, x)?, ptr_mut(name, y)?, n as i64);
    be.launch_n(
        name,
        Module::Elementwise,
        "unary_f32",
        n,
        &mut [arg(&xp), arg(&yp), arg(&count), arg(&code), arg(&s)],
    )
}

pub(crate) fn unary_backward(
    be: &CudaBackend,
    op: UnaryOp,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let name = "unary_backward";
    be.enter(name)?;
    let n = x.numel();
    let (code, s) = (op.code(), op.scalar());
    let (xp, yp, dyp, dxp) = (
        ptr(name, x)?,
        ptr(name, y)?,
        ptr(name, dy)?,
        ptr_mut(name, dx)?,
    );
    let count = n as i64;
    be.launch_n(
        name,
        Module::Elementwise,
        "unary_backward_f32",
        n,
        &mut [
            arg(&xp),
            arg(&yp),
            arg(&dyp),
            arg(&dxp),
            arg(&count),
            arg(&code),
            arg(&s),
        ],
    )
}

pub(crate) fn binary(
    be: &CudaBackend,
    plan: &BinaryPlan,
    a: &Tensor,
    b: &Tensor,
    c: &mut Tensor,
) -> Result<()> {
    let name = plan.op.name();
    be.enter(name)?;
    let n = plan.out.numel();
    let same = i32::from(plan.a == plan.out && plan.b == plan.out);
    let layout = Strided3::new(plan.out.dims(), &[&plan.a_strides, &plan.b_strides]);
    let (ap, bp, cp) = (ptr(name, a)?, ptr(name, b)?, ptr_mut(name, c)?);
    let (count, code) = (n as i64, plan.op.code());
    be.launch_n(
        name,
        Module::Elementwise,
        "binary_f32",
        n,
        &mut [
            arg(&ap),
            arg(&bp),
            arg(&cp),
            arg(&count),
            arg(&code),
            arg(&same),
            arg(&layout),
        ],
    )
}

pub(crate) fn binary_backward(
    be: &CudaBackend,
    plan: &BinaryPlan,
    a: &Tensor,
    b: &Tensor,
    dy: &Tensor,
    da: Option<&mut Tensor>,
    db: Option<&mut Tensor>,
) -> Result<()> {
    let name = "binary_backward";
    be.enter(name)?;
    let n = plan.out.numel();
    let bytes = n * 4;
    // Each requested gradient: where the kernel writes it, and the temporary
    // to reduce from when the operand was broadcast.
    let mut targets = Vec::new();
    let mut temps = Vec::new();
    for (grad, shape, strides) in [
        (da, &plan.a, &plan.a_strides),
        (db, &plan.b, &plan.b_strides),
    ] {
        match grad {
            None => targets.push(0u64),
            Some(g) if *shape == plan.out => targets.push(ptr_mut(name, g)?),
            Some(g) => {
                let tmp = be.scratch(name, bytes)?;
                targets.push(tmp.ptr());
                temps.push((tmp, ptr_mut(name, g)?, g.numel(), strides));
            }
        }
    }
    let layout = Strided3::new(plan.out.dims(), &[&plan.a_strides, &plan.b_strides]);
    let (ap, bp, dyp) = (ptr(name, a)?, ptr(name, b)?, ptr(name, dy)?);
    let (count, code) = (n as i64, plan.op.code());
    be.launch_n(
        name,
        Module::Elementwise,
        "binary_grad_f32",
        n,
        &mut [
            arg(&ap),
            arg(&bp),
            arg(&dyp),
            arg(&targets[0]),
            arg(&targets[1]),
            arg(&count),
            arg(&code),
            arg(&layout),
        ],
    )?;
    for (tmp, dst, n_out, strides) in temps {
        let reduced: Vec<bool> = strides.iter().map(|&s| s == 0).collect();
        super::reduce::sum_into(be, name, plan.out.dims(), &reduced, tmp.ptr(), dst, n_out)?;
    }
    Ok(())
}

pub(crate) fn select(
    be: &CudaBackend,
    plan: &SelectPlan,
    cond: &Tensor,
    x: &Tensor,
    y: &Tensor,
    out: &mut Tensor,
) -> Result<()> {
    let name = "select";
    be.enter(name)?;
    let n = plan.out.numel();
    let layout = Strided3::new(
        plan.out.dims(),
        &[&plan.cond_strides, &plan.x_strides, &plan.y_strides],
    );
    let (cp, xp, yp, op) = (
        ptr(name, cond)?,
        ptr(name, x)?,
        ptr(name, y)?,
        ptr_mut(name, out)?,
    );
    let count = n as i64;
    be.launch_n(
        name,
        Module::Elementwise,
        "select_f32",
        n,
        &mut [
            arg(&cp),
            arg(&xp),
            arg(&yp),
            arg(&op),
            arg(&count),
            arg(&layout),
        ],
    )
}
