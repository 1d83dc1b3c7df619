//! The CTC loss on the tape.
//!
//! The forward-backward pass yields the log-probabilities' gradient with the
//! losses, so the forward computes it when recording and the node keeps it;
//! the backward (a product with it) scales it by the incoming
//! per-entry gradient.

use super::alloc;
use super::checkpoint::in_checkpoint_scope;
use super::node::{recording, BackwardFn};
use super::record::{Reads, Saves};
use super::saved::Saved;
use super::var::Var;
use crate::ops::CtcInputs;
use crate::ops::{self, BinaryOp};
use crate::{Backend, Result, Shape, Tensor};
use std::sync::Arc;

/// The integer operands of [`Var::ctc_loss`]: `targets [B, S]`,
/// `input_lengths [B]`, `target_lengths [B]` (int32; no gradient).
#[derive(Clone, Copy, Debug)]
pub struct CtcTargets<'a> {
    pub targets: &'a Var,
    pub input_lengths: &'a Var,
    pub target_lengths: &'a Var,
}

impl Var {
    /// Per-entry CTC losses `[B]` of log-probabilities `[B, T, C]` (self),
    /// see [`ops::ctc_loss`]; the gradient flows to self only.
    pub fn ctc_loss(&self, t: &CtcTargets<'_>, blank: usize, max_approx: bool) -> Result<Var> {
        let be = self.backend();
        let inputs = [self, t.targets, t.input_lengths, t.target_lengths];
        if !recording(&[self]) && !in_checkpoint_scope() {
            let values: Vec<Arc<Tensor>> = inputs.iter().map(|v| v.value()).collect();
            let losses = forward(&**be, &values, blank, max_approx, None)?;
            return Ok(Var::from_parts(Arc::new(losses), be.clone(), false, None));
        }
        // The backward reads no input: it keeps the gradient the forward made.
        let saves = Saves::own(Reads::Nothing);
        Var::record("ctc_loss", be, &inputs, saves, move |be, xs| {
            let mut dlp = alloc::output(be, xs[0].shape())?;
            let losses = forward(be, xs, blank, max_approx, Some(&mut dlp))?;
            let dlp = Saved::owned(dlp);
            let backward: BackwardFn = Box::new(move |be, dy, _, _| {
                let n = dy.numel();
                let dy = dy.reshape([n, 1, 1])?;
                let mut dx = alloc::output(be, dlp.shape())?;
                ops::binary(be, BinaryOp::Mul, &dlp, &dy, &mut dx)?;
                Ok(vec![Some(dx), None, None, None])
            });
            Ok((Arc::new(losses), backward))
        })
    }
}

/// The losses of `xs = [log_probs, targets, input_lengths, target_lengths]`,
/// and the gradient into `dlog_probs` when given.
fn forward(
    be: &dyn Backend,
    xs: &[Arc<Tensor>],
    blank: usize,
    max_approx: bool,
    dlog_probs: Option<&mut Tensor>,
) -> Result<Tensor> {
    let inputs = CtcInputs {
        log_probs: &xs[0],
        targets: &xs[1],
        input_lengths: &xs[2],
        target_lengths: &xs[3],
    };
    let batch = xs[0].dims().first().copied().unwrap_or(0);
    let mut losses = alloc::output(be, &Shape::new([batch])?)?;
    ops::ctc_loss(be, &inputs, blank, max_approx, &mut losses, dlog_probs)?;
    Ok(losses)
}
