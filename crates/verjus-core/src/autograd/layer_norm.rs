//! Fused layer normalisation on the tape.
//!
//! The node reads its operands' values (`x`, `scale`) in backward and owns
//! the per-row mean and reciprocal standard deviation of the forward, so the
//! backward never recomputes the statistics nor keeps the normalised `x`.

use super::alloc;
use super::node::{need, BackwardFn};
use super::record::{Reads, Saves};
use super::saved::Saved;
use super::var::Var;
use crate::ops::{self, LayerNormArgs, LayerNormGrads};
use crate::{Result, Tensor};
use std::sync::Arc;

impl Var {
    /// `x [N, D]` normalised over its last axis to mean 0 and variance 1,
    /// times `scale [D]`, plus `bias [D]` (see [`ops::layer_norm`]).
    /// Gradients flow to `x`, `scale` and `bias`.
    pub fn layer_norm(&self, scale: Option<&Var>, bias: Option<&Var>, eps: f32) -> Result<Var> {
        let mut inputs = vec![self];
        let scale_at = scale.map(|s| {
            inputs.push(s);
            inputs.len() - 1
        });
        let bias_at = bias.map(|b| {
            inputs.push(b);
            inputs.len() - 1
        });
        let args_of =
            move |xs: &[Arc<Tensor>]| -> (Arc<Tensor>, Option<Arc<Tensor>>, Option<Arc<Tensor>>) {
                (
                    xs[0].clone(),
                    scale_at.map(|i| xs[i].clone()),
                    bias_at.map(|i| xs[i].clone()),
                )
            };
        // The backward reads x and the scale, not the bias; it owns the
        // forward's statistics.
        let reads: &'static [usize] = if scale_at.is_some() { &[0, 1] } else { &[0] };
        let saves = Saves::own(Reads::Only(reads));
        Var::record(
            "layer_norm",
            self.backend(),
            &inputs,
            saves,
            move |be, xs| {
                let (x, scale, bias) = args_of(xs);
                let args = LayerNormArgs {
                    x: &x,
                    scale: scale.as_deref(),
                    bias: bias.as_deref(),
                    eps,
                };
                let plan = ops::layer_norm_plan("layer_norm", be, &args)?;
                let mut y = alloc::output(be, x.shape())?;
                let mut mean = alloc::output(be, &plan.stats_shape())?;
                let mut rstd = alloc::output(be, &plan.stats_shape())?;
                ops::layer_norm(be, &args, &mut y, &mut mean, &mut rstd)?;
                let (mean, rstd) = (Saved::owned(mean), Saved::owned(rstd));
                let backward: BackwardFn = Box::new(move |be, dy, inputs, needs| {
                    let x = inputs.get(0)?;
                    let scale = scale_at.map(|i| inputs.get(i)).transpose()?;
                    let mut grads: Vec<Option<Tensor>> = Vec::with_capacity(3);
                    grads.push(
                        need(needs, 0)
                            .then(|| alloc::output(be, x.shape()))
                            .transpose()?,
                    );
                    for at in [scale_at, bias_at].into_iter().flatten() {
                        let shape = crate::Shape::new([x.dims()[1]])?;
                        grads.push(
                            need(needs, at)
                                .then(|| alloc::output(be, &shape))
                                .transpose()?,
                        );
                    }
                    let mut slots = grads.iter_mut();
                    let dx = slots.next().and_then(Option::as_mut);
                    let dscale = scale_at.and_then(|_| slots.next()).and_then(Option::as_mut);
                    let dbias = bias_at.and_then(|_| slots.next()).and_then(Option::as_mut);
                    let args = LayerNormArgs {
                        x: &x,
                        scale: scale.as_deref(),
                        bias: None,
                        eps,
                    };
                    ops::layer_norm_backward(
                        be,
                        &args,
                        &mean,
                        &rstd,
                        &dy,
                        LayerNormGrads { dx, dscale, dbias },
                    )?;
                    Ok(grads)
                });
                Ok((Arc::new(y), backward))
            },
        )
    }
}
