//! Fused scaled dot-product attention on the GPU (semantics:
//! [`verjus_core::ops::attention`]; arithmetic mirrors the native backend).
//!
//! Forward: `s = scale q k^T` for all `N` entries by one strided-batched cuBLAS
//! GEMM into scratch `[N, Tq, Tk]`, one row kernel (`kernels/attention.cu`)
//! that masks, soft-maxes in place and writes `lse`, and `out = p v` by a
//! second batched GEMM. Backward: the scores again, `p = exp(s - lse)` masked
//! (kernel), `dv = p^T dout`, `dp = dout v^T`, `ds = p (dp - rowsum(dout out))`
//! (kernel), `dq = scale ds k`, `dk = scale ds^T q`; gradients not asked for
//! are not computed, those asked for are overwritten. GEMMs follow the
//! backend's TF32 setting (full fp32 by default).
//!
//! Memory: the whole score tensor is scratch, `4 N Tq Tk` bytes in the forward
//! and twice that in the backward (`p` and `ds`), freed when the call returns
//! (at 16 sequences, 8 heads and 1000 frames: 512 MB forward, 1 GB backward).
//! A blocked (flash-style) kernel would avoid it; it is not needed yet.
//!
//! Key lengths: their values decide memory accesses of no kernel (a length
//! only shortens the masked row), but one outside `0..=Tk` must be the same
//! error as on the native backend, so each call reads them to the host and
//! checks them with `check_key_lengths` before launching: one small download,
//! which waits for the work queued before it. A deferred device-side check
//! (a flag read at the next host read, as planned for the index ops) could
//! replace that wait.

use super::attention_gemm as gemms;
use super::gemm::gemm_at;
use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::launch::block_per_row;
use crate::storage::{ptr, ptr_mut};
use cudarc::driver::sys::CUdeviceptr;
use std::ffi::c_void;
use verjus_core::ops::{check_key_lengths, AttentionArgs, AttentionGrads, AttentionPlan, GemmPlan};
use verjus_core::{Error, Result, Tensor};

/// Reads the key lengths to the host and checks them (waits); returns their
/// device address, or 0 (null to the kernels) when every key counts.
fn checked_lengths(
    be: &CudaBackend,
    op: &str,
    plan: &AttentionPlan,
    lengths: Option<&Tensor>,
) -> Result<CUdeviceptr> {
    let Some(t) = lengths else {
        return Ok(0);
    };
    if plan.entries == 0 {
        return Ok(0);
    }
    let p = ptr(op, t)?;
    let mut bytes = vec![0u8; 4 * plan.entries];
    be.staging.download(op, p, &mut bytes)?;
    let host: Vec<i32> = bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    check_key_lengths(op, &host, plan.keys)?;
    Ok(p)
}

/// Bytes of one `[N, Tq, Tk]` f32 score tensor (an error where that overflows).
pub(super) fn score_bytes(op: &str, plan: &AttentionPlan) -> Result<usize> {
    plan.entries
        .checked_mul(plan.queries)
        .and_then(|x| x.checked_mul(plan.keys))
        .and_then(|x| x.checked_mul(4))
        .ok_or_else(|| {
            Error::invalid(
                op,
                format!(
                    "the scores [{}, {}, {}] exceed the address space",
                    plan.entries, plan.queries, plan.keys
                ),
            )
        })
}

/// One batched product on device addresses (`c` holds `batch * m * n` floats).
fn product(
    be: &CudaBackend,
    op: &str,
    g: &GemmPlan,
    a: CUdeviceptr,
    b: CUdeviceptr,
    c: CUdeviceptr,
) -> Result<()> {
    gemm_at(be, op, g, a, b, c, g.batch * g.m * g.n)
}

/// Launches one of the row kernels over the `N * Tq` score rows of `Tk`
/// (its last argument says whether a row has a block, see [`row_team`]).
fn rows(
    be: &CudaBackend,
    op: &str,
    plan: &AttentionPlan,
    name: &'static str,
    args: &mut [*mut c_void],
) -> Result<()> {
    let count = plan.entries * plan.queries;
    be.launch_rows(op, Module::Attention, name, count, plan.keys, args)
}

/// The row kernels' `per_block` argument: the team `launch_rows` sized the
/// grid for, given rows of `Tk` scores.
fn row_team(plan: &AttentionPlan) -> i32 {
    i32::from(block_per_row(plan.keys))
}

/// The forward: `out` and `lse` (see [`verjus_core::ops::attention`]).
pub(crate) fn forward(
    be: &CudaBackend,
    plan: &AttentionPlan,
    args: &AttentionArgs<'_>,
    out: &mut Tensor,
    lse: &mut Tensor,
) -> Result<()> {
    let op = "attention";
    be.enter(op)?;
    let lens = checked_lengths(be, op, plan, args.lengths)?;
    if plan.entries * plan.queries == 0 {
        return Ok(());
    }
    let s = be.scratch(op, score_bytes(op, plan)?)?;
    let sp = s.ptr();
    let (qp, kp, vp) = (ptr(op, args.q)?, ptr(op, args.k)?, ptr(op, args.v)?);
    product(be, op, &gemms::scores(plan), qp, kp, sp)?;
    let lp = ptr_mut(op, lse)?;
    let causal = i32::from(plan.causal);
    let (n_rows, tq, tk) = (
        (plan.entries * plan.queries) as i64,
        plan.queries as i64,
        plan.keys as i64,
    );
    let per_block = row_team(plan);
    rows(
        be,
        op,
        plan,
        "attention_softmax_f32",
        &mut [
            arg(&sp),
            arg(&lp),
            arg(&lens),
            arg(&causal),
            arg(&n_rows),
            arg(&tq),
            arg(&tk),
            arg(&per_block),
        ],
    )?;
    product(be, op, &gemms::output(plan), sp, vp, ptr_mut(op, out)?)
}

/// The backward (see [`verjus_core::ops::attention_backward`]).
pub(crate) fn backward(
    be: &CudaBackend,
    plan: &AttentionPlan,
    args: &AttentionArgs<'_>,
    out: &Tensor,
    lse: &Tensor,
    dout: &Tensor,
    grads: AttentionGrads<'_>,
) -> Result<()> {
    let op = "attention_backward";
    be.enter(op)?;
    let lens = checked_lengths(be, op, plan, args.lengths)?;
    let AttentionGrads { dq, dk, dv } = grads;
    if dq.is_none() && dk.is_none() && dv.is_none() {
        return Ok(());
    }
    let bytes = score_bytes(op, plan)?;
    let (qp, kp, vp) = (ptr(op, args.q)?, ptr(op, args.k)?, ptr(op, args.v)?);
    let (outp, lp, dop) = (ptr(op, out)?, ptr(op, lse)?, ptr(op, dout)?);
    let p = be.scratch(op, bytes)?;
    let pp = p.ptr();
    product(be, op, &gemms::scores(plan), qp, kp, pp)?;
    let causal = i32::from(plan.causal);
    let (n_rows, tq, tk, dvf) = (
        (plan.entries * plan.queries) as i64,
        plan.queries as i64,
        plan.keys as i64,
        plan.value_feat as i64,
    );
    let per_block = row_team(plan);
    rows(
        be,
        op,
        plan,
        "attention_probs_f32",
        &mut [
            arg(&pp),
            arg(&lp),
            arg(&lens),
            arg(&causal),
            arg(&n_rows),
            arg(&tq),
            arg(&tk),
            arg(&per_block),
        ],
    )?;
    if let Some(g) = dv {
        product(be, op, &gemms::grad_value(plan), pp, dop, ptr_mut(op, g)?)?;
    }
    if dq.is_none() && dk.is_none() {
        return Ok(());
    }
    let ds = be.scratch(op, bytes)?;
    let dsp = ds.ptr();
    product(be, op, &gemms::grad_weights(plan), dop, vp, dsp)?;
    rows(
        be,
        op,
        plan,
        "attention_grad_scores_f32",
        &mut [
            arg(&pp),
            arg(&dsp),
            arg(&outp),
            arg(&dop),
            arg(&n_rows),
            arg(&tk),
            arg(&dvf),
            arg(&per_block),
        ],
    )?;
    if let Some(g) = dq {
        product(be, op, &gemms::grad_query(plan), dsp, kp, ptr_mut(op, g)?)?;
    }
    if let Some(g) = dk {
        product(be, op, &gemms::grad_key(plan), dsp, qp, ptr_mut(op, g)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(entries: usize, queries: usize, keys: usize) -> AttentionPlan {
        AttentionPlan {
            entries,
            queries,
            keys,
            key_feat: 1,
            value_feat: 1,
            has_lengths: false,
            causal: false,
            scale: 1.0,
        }
    }

    #[test]
    fn score_scratch_is_four_bytes_a_score_or_an_error() {
        assert_eq!(score_bytes("attention", &plan(3, 4, 5)).unwrap(), 240);
        assert_eq!(score_bytes("attention", &plan(3, 0, 5)).unwrap(), 0);
        let err = score_bytes("attention", &plan(1 << 30, 1 << 20, 1 << 20)).unwrap_err();
        assert!(err.to_string().contains("attention"), "{err}");
    }
}
