//! Fused softmax cross-entropy.
//!
//! The fused op gives the logits' gradient in the same pass as the losses, so
//! the forward computes it (with scale 1) when recording and the node saves
//! it; the backward ([`crate::grad::softmax_cross_entropy`]) only scales each
//! row by the incoming per-example gradient.

use super::alloc;
use super::node::{recording, BackwardFn};
use super::var::Var;
use crate::{grad, ops};
use crate::{Result, Shape};
use std::sync::Arc;

impl Var {
    /// Per-example losses `[n]` of logits `[n, classes]` (self) against integer
    /// `labels` `[n]`, with label smoothing in `[0, 1)`.
    pub fn softmax_cross_entropy(&self, labels: &Var, smoothing: f32) -> Result<Var> {
        let be = self.backend();
        let (logits, labels) = (self.value(), labels.value());
        let n = logits.dims().first().copied().unwrap_or(0);
        let mut losses = alloc::zeros(&**be, &Shape::new([n])?)?;
        let mut dlogits = recording(&[self])
            .then(|| alloc::zeros(&**be, logits.shape()))
            .transpose()?;
        ops::softmax_cross_entropy(
            &**be,
            &logits,
            &labels,
            smoothing,
            1.0,
            &mut losses,
            dlogits.as_mut(),
        )?;
        let Some(dlogits) = dlogits else {
            return Ok(Var::from_parts(Arc::new(losses), be.clone(), false, None));
        };
        let backward: BackwardFn = Box::new(move |be, dy, _| {
            let dy = dy.reshape([n, 1])?;
            let mut dx = alloc::zeros(be, dlogits.shape())?;
            grad::softmax_cross_entropy(be, &dlogits, &dy, &mut dx)?;
            Ok(vec![Some(dx)])
        });
        Ok(Var::from_op(
            "softmax_cross_entropy",
            Arc::new(losses),
            be,
            &[self],
            backward,
        ))
    }
}
