//! The collective interface of data-parallel training: what a rank needs from
//! the other ranks (sums of gradients, rank 0's parameters, counts and flags).
//!
//! verjus has no networking of its own: an implementation hands the buffers to
//! an existing collective engine (MPI through `mpi4py` in the Python package,
//! NCCL in the CUDA backend), which does rendezvous, transport and reduction.
//! [`Solo`], a world of one process, is the default and does nothing, so a
//! single-process run is unchanged bit for bit.
//!
//! An engine that reduces host memory implements the `*_host` methods and
//! inherits the tensor methods, which pack every tensor into one host buffer
//! (one collective call per step, not one per parameter) and unpack it. An
//! engine that reduces device memory in place overrides the tensor methods.
//!
//! Every rank must call the same methods in the same order with buffers of the
//! same lengths: a rank that skips one leaves the others waiting. Callers
//! therefore decide every branch taken before a collective from an all-reduced
//! value (the Trainer's loss tally, the engine's `has_data`).

use crate::{ops, Backend, DType, Device, Error, Result, Tensor};
use std::fmt;
use std::sync::Arc;

/// How values from all ranks combine. There is no mean: callers sum and divide
/// by what they count (MPI has no average, and a frame-weighted mean needs
/// the summed counts anyway).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

/// A group of ranks that reduce and broadcast together. See the module docs.
pub trait Collective: Send + Sync + fmt::Debug {
    /// This process's rank, `0..world()`.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn world(&self) -> usize;
    /// Combines `buf` elementwise over all ranks with `op`, in place; every
    /// rank receives the same result.
    fn all_reduce_host(&self, buf: &mut [f32], op: ReduceOp) -> Result<()>;
    /// Replaces `buf` on every rank with rank `root`'s.
    fn broadcast_host(&self, buf: &mut [f32], root: usize) -> Result<()>;
    /// [`Collective::all_reduce_host`] of a few `f64`s: counts, norms, flags.
    fn all_reduce_scalars(&self, xs: &mut [f64], op: ReduceOp) -> Result<()>;
    /// Returns when every rank has called it.
    fn barrier(&self) -> Result<()>;

    /// [`Collective::all_reduce_host`] of `f32` tensors, as one buffer.
    fn all_reduce(&self, be: &dyn Backend, ts: &mut [&mut Tensor], op: ReduceOp) -> Result<()> {
        let mut flat = pack(be, ts)?;
        self.all_reduce_host(&mut flat, op)?;
        unpack(be, &flat, ts)
    }

    /// [`Collective::broadcast_host`] of `f32` tensors, as one buffer.
    fn broadcast(&self, be: &dyn Backend, ts: &mut [&mut Tensor], root: usize) -> Result<()> {
        let mut flat = pack(be, ts)?;
        self.broadcast_host(&mut flat, root)?;
        unpack(be, &flat, ts)
    }
}

/// A collective shared by a trainer and its caller.
pub type CollectiveRef = Arc<dyn Collective>;

/// The world of one process: every collective returns its input.
#[derive(Clone, Copy, Debug, Default)]
pub struct Solo;

impl Collective for Solo {
    fn rank(&self) -> usize {
        0
    }
    fn world(&self) -> usize {
        1
    }
    fn all_reduce_host(&self, _: &mut [f32], _: ReduceOp) -> Result<()> {
        Ok(())
    }
    fn broadcast_host(&self, _: &mut [f32], _: usize) -> Result<()> {
        Ok(())
    }
    fn all_reduce_scalars(&self, _: &mut [f64], _: ReduceOp) -> Result<()> {
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        Ok(())
    }
    fn all_reduce(&self, _: &dyn Backend, _: &mut [&mut Tensor], _: ReduceOp) -> Result<()> {
        Ok(())
    }
    fn broadcast(&self, _: &dyn Backend, _: &mut [&mut Tensor], _: usize) -> Result<()> {
        Ok(())
    }
}

/// The `f32` tensors `ts`, one after the other, in one host buffer.
fn pack(be: &dyn Backend, ts: &[&mut Tensor]) -> Result<Vec<f32>> {
    let mut flat = vec![0.0; packed_len(ts)];
    pack_into(be, ts, &mut flat)?;
    Ok(flat)
}

/// The length of the buffer [`pack_into`] fills from `ts`.
pub fn packed_len(ts: &[&mut Tensor]) -> usize {
    ts.iter().map(|t| t.numel()).sum()
}

/// Copies the `f32` tensors `ts`, one after the other, into `flat` (of
/// [`packed_len`]): the one buffer a collective engine reduces.
pub fn pack_into(be: &dyn Backend, ts: &[&mut Tensor], flat: &mut [f32]) -> Result<()> {
    let mut start = 0;
    for t in ts {
        if t.dtype() != DType::F32 {
            return Err(Error::DTypeMismatch {
                op: "Collective".into(),
                what: "a reduced tensor".into(),
                expected: DType::F32,
                actual: t.dtype(),
            });
        }
        let part = &mut flat[start..start + t.numel()];
        start += t.numel();
        if t.device() == Device::Cpu {
            part.copy_from_slice(t.as_slice::<f32>()?);
        } else {
            part.copy_from_slice(ops::download(be, t)?.as_slice::<f32>()?);
        }
    }
    Ok(())
}

/// Writes `flat` back into `ts` (the layout of [`pack_into`]), in place where
/// a tensor's host elements are writable.
pub fn unpack(be: &dyn Backend, flat: &[f32], ts: &mut [&mut Tensor]) -> Result<()> {
    let mut start = 0;
    for t in ts.iter_mut() {
        let part = &flat[start..start + t.numel()];
        start += t.numel();
        if let Ok(own) = t.as_mut_slice::<f32>() {
            own.copy_from_slice(part);
            continue;
        }
        // A device tensor, or a read-only view: replaced by a new tensor.
        let host = Tensor::from_vec(t.dims().to_vec(), part.to_vec())?;
        **t = if t.device() == Device::Cpu {
            host
        } else {
            ops::upload(be, &host)?
        };
    }
    Ok(())
}
