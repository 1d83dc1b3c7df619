//! Fused softmax cross-entropy.
//!
//! The fused op gives the logits' gradient in the same pass as the losses, so
//! the forward computes it (with scale 1) when recording and the node saves
//! it; the backward (a product with it) only scales each
//! row by the incoming per-example gradient.

use super::alloc;
use super::checkpoint::in_checkpoint_scope;
use super::node::{recording, BackwardFn};
use super::record::{Reads, Saves};
use super::saved::Saved;
use super::var::Var;
use crate::ops::{self, BinaryOp};
use crate::{Backend, Result, Shape, Tensor};
use std::sync::Arc;

impl Var {
    /// Per-example losses `[n]` of logits `[n, classes]` (self) against integer
    /// `labels` `[n]`, with label smoothing in `[0, 1)`.
    pub fn softmax_cross_entropy(&self, labels: &Var, smoothing: f32) -> Result<Var> {
        let be = self.backend();
        if !recording(&[self]) && !in_checkpoint_scope() {
            let (logits, labels) = (self.value(), labels.value());
            let losses = forward(&**be, &logits, &labels, smoothing, None)?;
            return Ok(Var::from_parts(Arc::new(losses), be.clone(), false, None));
        }
        let name = "softmax_cross_entropy";
        let saves = Saves::own(Reads::Nothing);
        Var::record(name, be, &[self, labels], saves, move |be, xs| {
            let mut dlogits = alloc::output(be, xs[0].shape())?;
            let losses = forward(be, &xs[0], &xs[1], smoothing, Some(&mut dlogits))?;
            let n = losses.numel();
            let dlogits = Saved::owned(dlogits);
            let backward: BackwardFn = Box::new(move |be, dy, _, _| {
                let dy = dy.reshape([n, 1])?;
                let mut dx = alloc::output(be, dlogits.shape())?;
                ops::binary(be, BinaryOp::Mul, &dlogits, &dy, &mut dx)?;
                Ok(vec![Some(dx), None])
            });
            Ok((Arc::new(losses), backward))
        })
    }
}

/// The losses, and the logits' gradient into `dlogits` when given.
fn forward(
    be: &dyn Backend,
    logits: &Tensor,
    labels: &Tensor,
    smoothing: f32,
    dlogits: Option<&mut Tensor>,
) -> Result<Tensor> {
    let n = logits.dims().first().copied().unwrap_or(0);
    let mut losses = alloc::output(be, &Shape::new([n])?)?;
    ops::softmax_cross_entropy(be, logits, labels, smoothing, 1.0, &mut losses, dlogits)?;
    Ok(losses)
}
