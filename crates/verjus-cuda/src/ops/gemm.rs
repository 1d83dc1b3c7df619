//! GEMM: cuBLAS for real products; an empty inner dimension only scales `C`.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use cudarc::driver::sys::CUdeviceptr;
use verjus_core::ops::{GemmPlan, UnaryOp};
use verjus_core::{DType, Result, Tensor};

pub(crate) fn gemm(
    be: &CudaBackend,
    plan: &GemmPlan,
    a: &Tensor,
    b: &Tensor,
    c: &mut Tensor,
) -> Result<()> {
    let op = "gemm";
    be.enter(op)?;
    let n = c.numel();
    let (a_ptr, b_ptr, c_ptr) = (ptr(op, a)?, ptr(op, b)?, ptr_mut(op, c)?);
    if a.dtype().is_reduced_float() && n > 0 && plan.k > 0 {
        // bfloat16 / float16 operands: cuBLAS on the tensor cores. (The
        // empty cases below read neither operand.)
        return be
            .blas
            .gemm(plan, be.tf32(), a.dtype(), a_ptr, b_ptr, c_ptr);
    }
    gemm_at(be, op, plan, a_ptr, b_ptr, c_ptr, n)
}

/// [`gemm`] on device addresses for ops that multiply inside their own
/// buffers: `c` holds the `n` elements of the plan's output.
pub(crate) fn gemm_at(
    be: &CudaBackend,
    op: &str,
    plan: &GemmPlan,
    a: CUdeviceptr,
    b: CUdeviceptr,
    cp: CUdeviceptr,
    n: usize,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    if plan.k == 0 {
        // C = beta * C (and exactly 0 for beta = 0, whatever C held).
        let beta = plan.spec.beta;
        if beta == 0.0 {
            return super::memory::fill_f32(be, op, cp, n, 0.0);
        }
        let (count, code) = (n as i64, UnaryOp::Scale(beta).code());
        return be.launch_n(
            op,
            Module::Elementwise,
            "unary_f32",
            n,
            &mut [arg(&cp), arg(&cp), arg(&count), arg(&code), arg(&beta)],
        );
    }
    be.blas.gemm(plan, be.tf32(), DType::F32, a, b, cp)
}
