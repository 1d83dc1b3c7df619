//! The LSTM over a sequence through cuDNN (`cudnn/rnn.rs`), and what cuDNN
//! leaves to the op.
//!
//! Each call reads the lengths to the host (cuDNN takes them there; the one
//! wait of the op) and checks them, packs `W_ih`, `W_hh`, `b_ih`, `b_hh` into
//! the weight space at the start of the reserve (a few device copies; the
//! backward finds them there), and runs cuDNN. Around it:
//! - frames past a sequence's length: cuDNN fills padding outputs with 0; the
//!   op zeroes `y`'s and `dx`'s padding itself as well, so that the result
//!   does not rest on how cuDNN treats padding of each buffer;
//! - sequences of length 0, which cuDNN rejects, run one frame inside cuDNN:
//!   afterwards their output frame is zeroed and their final state is the
//!   initial one; backward, their output gradients are zeroed before cuDNN
//!   (so the frame adds nothing to the weight gradients) and the final
//!   state's gradients pass to the initial state;
//! - `F = 0`: cuDNN is given one input feature, all zeros, through a zero
//!   input matrix;
//! - no frame at all: done without cuDNN ([`super::lstm`]).
//!
//! The backward hands cuDNN a copy of the reserve: cuDNN's backward data
//! writes intermediate gradients into its reserve space (input and output in
//! its API), so a second backward from the same forward (`rf.gradient` twice,
//! or a retained graph) on the reserve itself got wrong gradients, seen on an
//! H100. The copy is one device-to-device copy of the reserve per backward.

use super::lstm::{carry, no_frames_backward, opt, GradPtrs};
use super::memory::{copy_bytes, fill_f32, zero_bytes};
use crate::alloc::Block;
use crate::backend::CudaBackend;
use crate::cudnn::{LstmBackwardPtrs, LstmForwardPtrs, LstmKey, Param, SeqLengths, WeightLayout};
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use cudarc::driver::sys::CUdeviceptr;
use verjus_core::ops::{check_lengths, LstmArgs, LstmOutputGrads, LstmOutputs, LstmPlan};
use verjus_core::{Error, Result, Tensor};

/// The lengths on the host, checked (this waits for the work that wrote them).
fn read_lengths(
    be: &CudaBackend,
    op: &str,
    plan: &LstmPlan,
    lengths: Option<&Tensor>,
) -> Result<SeqLengths> {
    let host = match lengths {
        Some(t) if plan.batch > 0 => {
            let mut bytes = vec![0u8; 4 * plan.batch];
            be.read_back(op, ptr(op, t)?, &mut bytes)?;
            let v: Vec<i32> = bytes
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            check_lengths(op, &v, plan.steps)?;
            Some(v)
        }
        _ => None,
    };
    Ok(SeqLengths::new(host.as_deref(), plan.steps, plan.batch))
}

/// The input cuDNN reads: `x`, or for `F = 0` one zero feature per frame
/// (the block, kept alive by the caller, holds it).
fn input(
    be: &CudaBackend,
    op: &str,
    plan: &LstmPlan,
    x: &Tensor,
) -> Result<(CUdeviceptr, Option<Block>)> {
    if plan.input > 0 {
        return Ok((ptr(op, x)?, None));
    }
    let bytes = 4 * plan.steps * plan.batch;
    let zeros = be.scratch(op, bytes)?;
    zero_bytes(be, op, zeros.ptr(), bytes)?;
    Ok((zeros.ptr(), Some(zeros)))
}

/// The address of a parameter.
fn param(op: &str, args: &LstmArgs<'_>, p: Param) -> Result<CUdeviceptr> {
    let t = match p {
        Param::WIh => Some(args.w_ih),
        Param::WHh => Some(args.w_hh),
        Param::BIh => args.b_ih,
        Param::BHh => args.b_hh,
    };
    let t =
        t.ok_or_else(|| Error::invalid(op, "the cuDNN weight layout has biases, the call none"))?;
    ptr(op, t)
}

/// The address of a parameter's gradient (0: not wanted).
fn grad(g: &GradPtrs, p: Param) -> CUdeviceptr {
    match p {
        Param::WIh => g.dw_ih,
        Param::WHh => g.dw_hh,
        Param::BIh => g.db_ih,
        Param::BHh => g.db_hh,
    }
}

/// Copies the parameters into the weight space at `space`.
fn pack(
    be: &CudaBackend,
    op: &str,
    layout: &WeightLayout,
    args: &LstmArgs<'_>,
    space: CUdeviceptr,
) -> Result<()> {
    if !layout.covers_all() {
        zero_bytes(be, op, space, layout.bytes)?;
    }
    for b in &layout.blocks {
        let src = param(op, args, b.param)? + 4 * b.at as u64;
        copy_bytes(be, op, space + 4 * b.packed as u64, src, 4 * b.len)?;
    }
    Ok(())
}

/// Copies the wanted gradients out of the gradient space at `space`.
fn unpack(
    be: &CudaBackend,
    op: &str,
    layout: &WeightLayout,
    space: CUdeviceptr,
    g: &GradPtrs,
) -> Result<()> {
    for b in &layout.blocks {
        let dst = grad(g, b.param);
        if dst != 0 {
            let src = space + 4 * b.packed as u64;
            copy_bytes(be, op, dst + 4 * b.at as u64, src, 4 * b.len)?;
        }
    }
    Ok(())
}

/// Zeroes the frames of `v [T, B, width]` past each sequence's length.
fn mask_frames(
    be: &CudaBackend,
    op: &str,
    v: CUdeviceptr,
    lengths: CUdeviceptr,
    plan: &LstmPlan,
    width: usize,
) -> Result<()> {
    let (t, b, w) = (plan.steps as i64, plan.batch as i64, width as i64);
    be.launch_n(
        op,
        Module::Lstm,
        "lstm_mask_frames",
        plan.steps * plan.batch * width,
        &mut [arg(&v), arg(&lengths), arg(&t), arg(&b), arg(&w)],
    )
}

/// `dst [B, H]` = `src`, with the rows of sequences of length 0 taken from
/// `fill` (0: zeros); nothing when `dst` is not wanted.
fn empty_rows(
    be: &CudaBackend,
    op: &str,
    plan: &LstmPlan,
    (dst, src, fill): (CUdeviceptr, CUdeviceptr, CUdeviceptr),
    lengths: CUdeviceptr,
) -> Result<()> {
    if dst == 0 {
        return Ok(());
    }
    let (b, h) = (plan.batch as i64, plan.hidden as i64);
    be.launch_n(
        op,
        Module::Lstm,
        "lstm_empty_rows",
        plan.batch * plan.hidden,
        &mut [
            arg(&dst),
            arg(&src),
            arg(&fill),
            arg(&lengths),
            arg(&b),
            arg(&h),
        ],
    )
}

pub(super) fn forward(
    be: &CudaBackend,
    op: &str,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    out: LstmOutputs<'_>,
) -> Result<()> {
    let lengths = read_lengths(be, op, plan, args.lengths)?;
    let y = ptr_mut(op, out.y)?;
    let h_n = out.h_n.map(|t| ptr_mut(op, t)).transpose()?.unwrap_or(0);
    let c_n = ptr_mut(op, out.c_n)?;
    let (h0, c0) = (opt(op, args.h0)?, opt(op, args.c0)?);
    let state = plan.batch * plan.hidden;
    if lengths.none_run() {
        fill_f32(be, op, y, plan.steps * state, 0.0)?;
        carry(be, op, h_n, h0, state)?;
        return carry(be, op, c_n, c0, state);
    }
    let key = LstmKey::new(plan, be.tf32());
    let space = be.cudnn.lstm_space(op, &key, plan.steps, plan.batch)?;
    let reserve = ptr_mut(op, out.reserve)?;
    pack(be, op, &space.weights, args, reserve)?;
    let (x, _zeros) = input(be, op, plan, args.x)?;
    let t = LstmForwardPtrs {
        x,
        y,
        hx: h0,
        cx: c0,
        hy: h_n,
        cy: c_n,
    };
    be.cudnn
        .lstm_forward(op, &key, &lengths, &space.reserve, &t, reserve)?;
    if lengths.padded {
        let lens = opt(op, args.lengths)?;
        mask_frames(be, op, y, lens, plan, plan.hidden)?;
        if lengths.empty > 0 {
            empty_rows(be, op, plan, (h_n, h_n, h0), lens)?;
            empty_rows(be, op, plan, (c_n, c_n, c0), lens)?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)] // the backward's operands, as the Backend method has them
pub(super) fn backward(
    be: &CudaBackend,
    op: &str,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    y: &Tensor,
    reserve: &Tensor,
    dout: &LstmOutputGrads<'_>,
    g: &GradPtrs,
) -> Result<()> {
    let lengths = read_lengths(be, op, plan, args.lengths)?;
    let (dh_n, dc_n) = (opt(op, dout.dh_n)?, opt(op, dout.dc_n)?);
    if lengths.none_run() {
        return no_frames_backward(be, op, plan, dh_n, dc_n, g);
    }
    let key = LstmKey::new(plan, be.tf32());
    let space = be.cudnn.lstm_space(op, &key, plan.steps, plan.batch)?;
    let lens = opt(op, args.lengths)?;
    let state = plan.batch * plan.hidden;
    let frames = plan.steps * state;
    // Buffers made here live until the end of the call (their reuse is
    // queued behind this op's work on the stream).
    let mut temps: Vec<Block> = Vec::new();
    let mut temp = |bytes: usize| -> Result<CUdeviceptr> {
        let b = be.scratch(op, bytes)?;
        let p = b.ptr();
        temps.push(b);
        Ok(p)
    };
    // dy as cuDNN reads it: present, and 0 on the frame a sequence of length
    // 0 runs inside cuDNN.
    let dy = match dout.dy {
        Some(d) if lengths.empty == 0 => ptr(op, d)?,
        given => {
            let p = temp(4 * frames)?;
            carry(be, op, p, opt(op, given)?, frames)?;
            if given.is_some() {
                mask_frames(be, op, p, lens, plan, plan.hidden)?;
            }
            p
        }
    };
    // dh_n and dc_n likewise, 0 on the rows of sequences of length 0.
    let mut state_grad = |d: CUdeviceptr| -> Result<CUdeviceptr> {
        if d == 0 || lengths.empty == 0 {
            return Ok(d);
        }
        let p = temp(4 * state)?;
        empty_rows(be, op, plan, (p, d, 0), lens)?;
        Ok(p)
    };
    let (dhy, dcy) = (state_grad(dh_n)?, state_grad(dc_n)?);
    let (x, _zeros) = input(be, op, plan, args.x)?;
    let dx = match g.dx {
        p if p != 0 && plan.input > 0 => p,
        _ => temp(4 * plan.steps * plan.batch * key.cudnn_input())?,
    };
    let dweights = if g.weights() {
        let p = temp(space.reserve.weight_bytes)?;
        zero_bytes(be, op, p, space.reserve.weight_bytes)?;
        Some(p)
    } else {
        None
    };
    let t = LstmBackwardPtrs {
        x,
        y: ptr(op, y)?,
        hx: opt(op, args.h0)?,
        cx: opt(op, args.c0)?,
        dy,
        dhy,
        dcy,
        dx,
        dhx: g.dh0,
        dcx: g.dc0,
    };
    let bytes = space.reserve.f32_len() * 4;
    let base = temp(bytes)?;
    copy_bytes(be, op, base, ptr(op, reserve)?, bytes)?;
    be.cudnn
        .lstm_backward(op, &key, &lengths, &space.reserve, &t, base, dweights)?;
    if let Some(dw) = dweights {
        unpack(be, op, &space.weights, dw, g)?;
    }
    if lengths.padded && dx == g.dx {
        mask_frames(be, op, dx, lens, plan, plan.input)?;
    }
    if lengths.empty > 0 {
        empty_rows(be, op, plan, (g.dh0, g.dh0, dh_n), lens)?;
        empty_rows(be, op, plan, (g.dc0, g.dc0, dc_n), lens)?;
    }
    Ok(())
}
