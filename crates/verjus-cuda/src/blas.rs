//! GEMM through cuBLAS.
//!
//! verjus stores matrices row-major, cuBLAS reads them column-major. A
//! row-major `C [m, n]` is the column-major `C^T [n, m]`, and
//! `C^T = op(B)^T op(A)^T`, so each product is issued with the operands
//! swapped and the transposes kept. Batches use the strided-batched call (a
//! shared operand gets stride 0); a batched untransposed `A` times a shared
//! `B` (a linear layer over a sequence) becomes one large GEMM ([`gemm_call`]).
//!
//! Precision: full fp32 by default (`CUBLAS_DEFAULT_MATH`); TF32 tensor cores
//! only when asked for (`VERJUS_CUDA_TF32=1` or `CudaBackend::set_tf32`), since
//! TF32 keeps 10 mantissa bits and changes results visibly.

use crate::device::Gpu;
use crate::error::too_large;
use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::driver::sys::CUdeviceptr;
use std::sync::{Arc, Mutex};
use verjus_core::ops::GemmPlan;
use verjus_core::{DType, Result};

/// One cuBLAS strided-batched call in column-major terms (operands swapped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    /// Transpose of the first cuBLAS operand (verjus' B).
    pub trans_first: bool,
    /// Transpose of the second cuBLAS operand (verjus' A).
    pub trans_second: bool,
    /// cuBLAS' m, n, k (verjus' n, m, k).
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub ld_first: usize,
    pub ld_second: usize,
    pub ldc: usize,
    /// Element strides between batch entries (0 for a shared operand).
    pub stride_first: usize,
    pub stride_second: usize,
    pub stride_c: usize,
    pub batch: usize,
}

/// The cuBLAS call for a plan. When `A` is batched, untransposed and `B`
/// shared, the batch folds into `m` (one larger GEMM instead of many small).
pub(crate) fn gemm_call(p: &GemmPlan) -> Call {
    let fold = p.a_batched && !p.b_batched && !p.spec.trans_a;
    let (m, batch) = if fold {
        (p.m * p.batch, 1)
    } else {
        (p.m, p.batch)
    };
    Call {
        trans_first: p.spec.trans_b,
        trans_second: p.spec.trans_a,
        m: p.n,
        n: m,
        k: p.k,
        // B row-major [k, n] is column-major n x k (ld n); transposed [n, k] has ld k.
        ld_first: if p.spec.trans_b { p.k } else { p.n }.max(1),
        ld_second: if p.spec.trans_a { m } else { p.k }.max(1),
        ldc: p.n.max(1),
        stride_first: if p.b_batched { p.k * p.n } else { 0 },
        stride_second: if p.a_batched && !fold { p.m * p.k } else { 0 },
        stride_c: if fold { 0 } else { p.m * p.n },
        batch,
    }
}

#[derive(Debug)]
struct Handle {
    raw: blas_sys::cublasHandle_t,
    tf32: bool,
}

/// The cuBLAS handle of one device (cuBLAS handles are not for concurrent use).
#[derive(Debug)]
pub(crate) struct Blas {
    gpu: Arc<Gpu>,
    handle: Mutex<Handle>,
}

// SAFETY: the handle is only used with its lock held and the context current.
unsafe impl Send for Blas {}
// SAFETY: as above.
unsafe impl Sync for Blas {}

impl Blas {
    /// A handle on the device's stream (the context must be current).
    pub fn new(gpu: Arc<Gpu>) -> Result<Self> {
        let raw = blas::create_handle().map_err(|e| gpu.error("open", "cublasCreate", e))?;
        // SAFETY: a fresh handle and the device's live stream.
        unsafe { blas::set_stream(raw, gpu.stream() as blas_sys::cudaStream_t) }
            .map_err(|e| gpu.error("open", "cublasSetStream", e))?;
        Ok(Blas {
            gpu,
            handle: Mutex::new(Handle { raw, tf32: false }),
        })
    }

    /// `C = alpha op(A) op(B) + beta C` for device addresses `a`, `b`, `c`:
    /// `A` and `B` of the dtype `inputs` (float32, or bfloat16 / float16 on
    /// the tensor cores with float32 accumulation), `C` float32.
    pub fn gemm(
        &self,
        plan: &GemmPlan,
        tf32: bool,
        inputs: DType,
        a: CUdeviceptr,
        b: CUdeviceptr,
        c: CUdeviceptr,
    ) -> Result<()> {
        let op = "gemm";
        let call = gemm_call(plan);
        let dev = self.gpu.device;
        let int = |what: &str, v: usize| i32::try_from(v).map_err(|_| too_large(dev, op, what, v));
        let (m, n, k) = (int("n", call.m)?, int("m", call.n)?, int("k", call.k)?);
        let (ld1, ld2, ldc) = (
            int("leading dimension", call.ld_first)?,
            int("leading dimension", call.ld_second)?,
            int("leading dimension", call.ldc)?,
        );
        let batch = int("batch", call.batch)?;
        let stride = |v: usize| v as i64;
        let t = |yes: bool| {
            if yes {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let mut h = self.handle.lock().unwrap_or_else(|e| e.into_inner());
        if h.tf32 != tf32 {
            let mode = if tf32 {
                blas_sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH
            } else {
                blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH
            };
            // SAFETY: a live handle, used under its lock.
            unsafe { blas_sys::cublasSetMathMode(h.raw, mode) }
                .result()
                .map_err(|e| self.gpu.error(op, "cublasSetMathMode", e))?;
            h.tf32 = tf32;
        }
        let (alpha, beta) = (plan.spec.alpha, plan.spec.beta);
        let reduced = match inputs {
            DType::BF16 => Some(blas_sys::cudaDataType::CUDA_R_16BF),
            DType::F16 => Some(blas_sys::cudaDataType::CUDA_R_16F),
            _ => None,
        };
        if let Some(input_type) = reduced {
            let c_type = blas_sys::cudaDataType::CUDA_R_32F;
            // SAFETY: as for the float32 call below; the operands hold
            // 2-byte elements of `input_type`, C 4-byte float32 ones, and
            // alpha and beta are float32 as CUBLAS_COMPUTE_32F reads them.
            return unsafe {
                blas_sys::cublasGemmStridedBatchedEx(
                    h.raw,
                    t(call.trans_first),
                    t(call.trans_second),
                    m,
                    n,
                    k,
                    (&raw const alpha).cast(),
                    b as *const std::ffi::c_void,
                    input_type,
                    ld1,
                    stride(call.stride_first),
                    a as *const std::ffi::c_void,
                    input_type,
                    ld2,
                    stride(call.stride_second),
                    (&raw const beta).cast(),
                    c as *mut std::ffi::c_void,
                    c_type,
                    ldc,
                    stride(call.stride_c),
                    batch,
                    blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
                )
            }
            .result()
            .map_err(|e| self.gpu.error(op, "cublasGemmStridedBatchedEx", e));
        }
        // SAFETY: the addresses are live allocations of the sizes the plan
        // describes (validated shapes); alpha and beta outlive the call, which
        // only reads them before returning (host pointer mode).
        unsafe {
            blas::sgemm_strided_batched(
                h.raw,
                t(call.trans_first),
                t(call.trans_second),
                m,
                n,
                k,
                &alpha,
                b as *const f32,
                ld1,
                stride(call.stride_first),
                a as *const f32,
                ld2,
                stride(call.stride_second),
                &beta,
                c as *mut f32,
                ldc,
                stride(call.stride_c),
                batch,
            )
        }
        .map_err(|e| self.gpu.error(op, "cublasSgemmStridedBatched", e))
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        let h = self.handle.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the handle was created in `new` and is used by no one else.
        unsafe {
            let _ = self.gpu.bind("drop");
            let _ = blas::destroy_handle(h.raw);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verjus_core::ops::GemmSpec;
    use verjus_core::Shape;

    fn plan(a: &[usize], b: &[usize], ta: bool, tb: bool) -> GemmPlan {
        let s = |d: &[usize]| Shape::new(d.to_vec()).unwrap();
        GemmPlan::new(&s(a), &s(b), GemmSpec::new(ta, tb)).unwrap()
    }

    #[test]
    fn row_major_maps_to_swapped_column_major() {
        // A [2, 3] @ B [3, 4]: cuBLAS computes C^T [4, 2] = B^T A^T.
        let c = gemm_call(&plan(&[2, 3], &[3, 4], false, false));
        assert_eq!((c.m, c.n, c.k), (4, 2, 3));
        assert_eq!((c.ld_first, c.ld_second, c.ldc), (4, 3, 4));
        assert!(!c.trans_first && !c.trans_second);
        // A^T with A stored [3, 2], B^T with B stored [4, 3].
        let c = gemm_call(&plan(&[3, 2], &[4, 3], true, true));
        assert_eq!((c.m, c.n, c.k), (4, 2, 3));
        assert_eq!((c.ld_first, c.ld_second), (3, 2));
        assert!(c.trans_first && c.trans_second);
    }

    #[test]
    fn batches_fold_or_stride() {
        // [5, 2, 3] @ [3, 4] folds into one [10, 3] @ [3, 4].
        let c = gemm_call(&plan(&[5, 2, 3], &[3, 4], false, false));
        assert_eq!((c.n, c.batch, c.stride_second, c.stride_c), (10, 1, 0, 0));
        // Transposed A cannot fold: strided batch with a shared B.
        let c = gemm_call(&plan(&[5, 3, 2], &[3, 4], true, false));
        assert_eq!(
            (c.batch, c.stride_first, c.stride_second, c.stride_c),
            (5, 0, 6, 8)
        );
        assert_eq!(c.ld_second, 2);
        // Shared A, batched B.
        let c = gemm_call(&plan(&[2, 3], &[5, 3, 4], false, false));
        assert_eq!((c.batch, c.stride_first, c.stride_second), (5, 12, 0));
    }
}
