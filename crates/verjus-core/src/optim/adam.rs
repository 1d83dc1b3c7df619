//! Adam and AdamW.

use super::{check_non_negative, StepPlan};
use crate::ops::{self, AdamHyper};
use crate::{Backend, Error, Result, Tensor};
use serde::{Deserialize, Serialize};

/// Adam hyperparameters (`torch.optim.Adam`, and `torch.optim.AdamW` when
/// `decoupled`).
///
/// With `ĝ = grad_scale · grad` the (clipped) mean gradient over the batch (see
/// [`StepPlan`]), `η` the scheduled learning rate and `t` the number of
/// steps this parameter has taken, counting this one:
///
/// ```text
/// g = ĝ + weight_decay · p                    (Adam: L2 penalty in the gradient)
/// p = p − η · weight_decay · p                (AdamW: decoupled decay, applied first)
/// m = β1 · m + (1 − β1) · g
/// v = β2 · v + (1 − β2) · g²
/// p = p − η · (m / (1 − β1^t)) / (sqrt(v / (1 − β2^t)) + eps)
/// ```
///
/// In JSON only `lr` is required; the other fields default to PyTorch's
/// (`beta1` 0.9, `beta2` 0.999, `eps` 1e-8, no weight decay, not decoupled), and
/// an unknown field is an error.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Adam {
    /// The base learning rate `η` (the schedule scales it).
    pub lr: f32,
    /// Decay of the first moment, in `[0, 1)`.
    #[serde(default = "default_beta1")]
    pub beta1: f32,
    /// Decay of the second moment, in `[0, 1)`.
    #[serde(default = "default_beta2")]
    pub beta2: f32,
    /// Added to the denominator for stability.
    #[serde(default = "default_eps")]
    pub eps: f32,
    /// L2 penalty (Adam) or decoupled decay rate (AdamW).
    #[serde(default)]
    pub weight_decay: f32,
    /// AdamW: decay the weights directly instead of adding to the gradient.
    #[serde(default)]
    pub decoupled: bool,
}

pub(super) fn default_beta1() -> f32 {
    0.9
}

pub(super) fn default_beta2() -> f32 {
    0.999
}

pub(super) fn default_eps() -> f32 {
    1e-8
}

impl Adam {
    /// Adam with PyTorch's defaults: betas (0.9, 0.999), eps 1e-8, no weight decay.
    pub fn new(lr: f32) -> Self {
        Adam {
            lr,
            beta1: default_beta1(),
            beta2: default_beta2(),
            eps: default_eps(),
            weight_decay: 0.0,
            decoupled: false,
        }
    }

    /// AdamW with PyTorch's defaults and decoupled weight decay `weight_decay`.
    pub fn adamw(lr: f32, weight_decay: f32) -> Self {
        Adam {
            weight_decay,
            decoupled: true,
            ..Adam::new(lr)
        }
    }

    /// The name errors use: `AdamW` when decoupled, else `Adam`.
    fn name(&self) -> &'static str {
        if self.decoupled {
            "AdamW"
        } else {
            "Adam"
        }
    }

    /// Checks the hyperparameters before any step; errors name the field.
    pub fn validate(&self) -> Result<()> {
        let op = self.name();
        check_non_negative(op, "lr", self.lr)?;
        for (field, beta) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&beta) {
                return Err(Error::invalid(
                    op,
                    format!("{field} must be in [0, 1), got {beta}"),
                ));
            }
        }
        check_non_negative(op, "eps", self.eps)?;
        check_non_negative(op, "weight_decay", self.weight_decay)
    }

    /// The per-parameter state buffers: first and second moments.
    pub fn slot_names(&self) -> &'static [&'static str] {
        &["m", "v"]
    }

    /// One fused step of one parameter that has taken `steps` steps before;
    /// `slots` is `[m, v]`.
    pub fn update(
        &self,
        be: &dyn Backend,
        plan: &StepPlan,
        steps: u64,
        param: &mut Tensor,
        grad: &Tensor,
        slots: &mut [Tensor],
    ) -> Result<()> {
        let hp = AdamHyper {
            lr: plan.lr,
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            weight_decay: self.weight_decay,
            decoupled: self.decoupled,
            step: steps + 1,
            grad_scale: plan.grad_scale,
        };
        match slots {
            [m, v] => ops::adam_update(be, &hp, param, grad, m, v),
            other => Err(Error::invalid(
                "adam_update",
                format!("Adam keeps 2 state buffers (m, v), found {}", other.len()),
            )),
        }
    }
}
