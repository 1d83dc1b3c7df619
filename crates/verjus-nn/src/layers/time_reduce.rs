//! Reductions over time that respect each sequence's length: `LastFrame`
//! (the frame at `length - 1`), `MeanOverTime` (the mean over the real
//! frames; 0 for an empty sequence) and `MaxOverTime` (the maximum over the
//! real frames). They turn a sequence value (`[T*B] + unit`, time-major) into
//! one value per example (`[B] + unit`), so the per-example losses apply.
//!
//! Each is a composition of ops whose gradients exist: a gather of the last
//! rows (gradient: scatter-add), a product with per-frame weights and a sum
//! over time, a maximum of the frames with the padding replaced by minus
//! infinity (gradient: `reduce_backward` to the maxima). Padding is replaced
//! with `ops::select`, which never reads the unchosen value, so frames past a
//! length are never read into the result (not even a NaN there), and they
//! receive zero gradient.

use super::frames::write;
use super::{
    expect_inputs, need_seq, scratch_at, Backward, Built, Forward, FrameScratch, Layer, Seq,
};
use verjus_core::ops::{self, BinaryOp, ReduceOp};
use verjus_core::{Backend, Error, Result, Tensor};

/// Which reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Last,
    Mean,
    Max,
}

#[derive(Debug)]
pub(crate) struct TimeReduce {
    path: String,
    kind: Kind,
    /// Unit shape of a frame.
    unit: Vec<usize>,
}

pub(crate) fn build(path: &str, inputs: &[Vec<usize>], kind: Kind) -> Result<Built> {
    let name = match kind {
        Kind::Last => "LastFrame",
        Kind::Mean => "MeanOverTime",
        Kind::Max => "MaxOverTime",
    };
    expect_inputs(path, name, inputs, 1)?;
    Ok(Built {
        layer: Box::new(TimeReduce {
            path: path.to_string(),
            kind,
            unit: inputs[0].clone(),
        }),
        output: inputs[0].clone(),
        params: Vec::new(),
    })
}

impl TimeReduce {
    /// `lead + unit`.
    fn dims(&self, lead: &[usize]) -> Vec<usize> {
        lead.iter().chain(&self.unit).copied().collect()
    }

    /// `lead + [1; rank(unit)]`: per-frame weights that broadcast over a frame.
    fn weight_dims(&self, lead: &[usize]) -> Vec<usize> {
        let ones = std::iter::repeat_n(1, self.unit.len());
        lead.iter().copied().chain(ones).collect()
    }

    /// Fails unless every sequence has a frame.
    fn need_frames(&self, seq: &Seq<'_>) -> Result<()> {
        match seq.host.iter().position(|&l| l < 1) {
            None => Ok(()),
            Some(b) => Err(Error::invalid(
                &self.path,
                format!(
                    "example {b} has length {}: {} needs at least one frame",
                    seq.host[b],
                    if self.kind == Kind::Last {
                        "LastFrame"
                    } else {
                        "MaxOverTime"
                    }
                ),
            )),
        }
    }
}

impl Layer for TimeReduce {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        let seq = need_seq(io.seq, "a time reduction")?;
        let (time, batch, host) = (seq.time, seq.batch, seq.host);
        let x = io.x.get(0)?;
        match self.kind {
            Kind::Last => {
                self.need_frames(&seq)?;
                let idx = scratch_at(io.scratch, 0)?;
                write(be, idx, |b| (host[b] - 1) * batch as i32 + b as i32)?;
                ops::index_select(be, x, 0, idx, io.y)
            }
            Kind::Mean => {
                let tb = self.dims(&[time, batch]);
                let [w, kept, prod] = scratch_three(io.scratch)?;
                write(be, w, |row| {
                    let len = host[row % batch];
                    if (row / batch) < len as usize {
                        1.0 / len as f32
                    } else {
                        0.0
                    }
                })?;
                // The padding never enters: x where the weight is not 0, else 0.
                ops::select(be, w, x, w, kept)?;
                ops::binary(be, BinaryOp::Mul, kept, w, prod)?;
                reduce_time(be, ReduceOp::Sum, prod, tb, io.y)
            }
            Kind::Max => {
                self.need_frames(&seq)?;
                let tb = self.dims(&[time, batch]);
                let [pad, masked] = scratch_pair(io.scratch)?;
                write(be, pad, |row| {
                    if (row / batch) < host[row % batch] as usize {
                        0.0
                    } else {
                        f32::NEG_INFINITY
                    }
                })?;
                // Minus infinity at the padding (never read), x elsewhere.
                ops::select(be, pad, pad, x, masked)?;
                reduce_time(be, ReduceOp::Max, masked, tb, io.y)
            }
        }
    }

    fn backward(&self, be: &dyn Backend, io: Backward<'_>) -> Result<()> {
        let seq = need_seq(io.seq, "a time reduction")?;
        let Some(dx) = io.dx.get_mut(0).and_then(Option::as_mut) else {
            return Ok(());
        };
        let flat = dx.dims().to_vec();
        let tb = self.dims(&[seq.time, seq.batch]);
        match self.kind {
            Kind::Last => {
                ops::fill(be, dx, 0.0)?;
                let idx = scratch_at(io.scratch, 0)?;
                ops::index_add(be, io.dy, 0, idx, dx)
            }
            Kind::Mean => {
                let [w, _, _] = scratch_three(io.scratch)?;
                let wflat = w.dims().to_vec();
                w.reshape_in_place(self.weight_dims(&[seq.time, seq.batch]))?;
                dx.reshape_in_place(tb)?;
                let result = ops::binary(be, BinaryOp::Mul, w, io.dy, dx);
                w.reshape_in_place(wflat)?;
                dx.reshape_in_place(flat)?;
                result
            }
            Kind::Max => {
                let [_, masked] = scratch_pair(io.scratch)?;
                masked.reshape_in_place(tb.clone())?;
                dx.reshape_in_place(tb)?;
                let result = ops::reduce_backward(be, ReduceOp::Max, masked, &[0], io.y, io.dy, dx);
                let mflat = flat.clone();
                masked.reshape_in_place(mflat)?;
                dx.reshape_in_place(flat)?;
                result
            }
        }
    }

    fn frame_scratch(
        &self,
        _be: &dyn Backend,
        time: usize,
        batch: usize,
        _needs_dx: &[bool],
    ) -> Result<Vec<FrameScratch>> {
        let rows = time * batch;
        Ok(match self.kind {
            Kind::Last => vec![FrameScratch::i32(vec![batch])],
            Kind::Mean => vec![
                FrameScratch::f32(self.weight_dims(&[rows])),
                FrameScratch::f32(self.dims(&[rows])),
                FrameScratch::f32(self.dims(&[rows])),
            ],
            Kind::Max => vec![
                FrameScratch::f32(self.weight_dims(&[rows])),
                FrameScratch::f32(self.dims(&[rows])),
            ],
        })
    }
}

/// The two scratch buffers of a mean or a maximum.
fn scratch_pair(scratch: &mut [Tensor]) -> Result<[&mut Tensor; 2]> {
    match scratch {
        [a, b, ..] => Ok([a, b]),
        _ => Err(super::internal("scratch buffer missing")),
    }
}

/// The three scratch buffers of a mean.
fn scratch_three(scratch: &mut [Tensor]) -> Result<[&mut Tensor; 3]> {
    match scratch {
        [a, b, c, ..] => Ok([a, b, c]),
        _ => Err(super::internal("scratch buffer missing")),
    }
}

/// `y = op over time of frames` (`[T*B] + unit`, viewed as `[T, B] + unit`).
fn reduce_time(
    be: &dyn Backend,
    op: ReduceOp,
    frames: &mut Tensor,
    tb: Vec<usize>,
    y: &mut Tensor,
) -> Result<()> {
    let flat = frames.dims().to_vec();
    frames.reshape_in_place(tb)?;
    let result = ops::reduce(be, op, frames, &[0], y);
    frames.reshape_in_place(flat)?;
    result
}
