//! Stochastic gradient descent with momentum, Nesterov momentum and L2 weight decay.

use super::{check_non_negative, StepPlan};
use crate::ops::{self, SgdHyper};
use crate::{Backend, Error, Result, Tensor};
use serde::{Deserialize, Serialize};

/// SGD hyperparameters, in PyTorch's formulation (`torch.optim.SGD`).
///
/// With `ĝ = grad_scale · grad` the (clipped) mean gradient over the batch (see
/// [`StepPlan`]) and `η` the scheduled learning rate, one step is
///
/// ```text
/// g = ĝ + weight_decay · p
/// v = g                                      (first step)
/// v = momentum · v + (1 − dampening) · g     (later steps)
/// p = p − η · (g + momentum · v)             (nesterov)
/// p = p − η · v                              (otherwise)
/// ```
///
/// With `momentum = 0` there is no velocity and the step is `p = p − η · g`.
///
/// In JSON only `lr` is required; the other fields default to PyTorch's (0 or
/// off), and an unknown field is an error.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sgd {
    /// The base learning rate `η` (the schedule scales it).
    pub lr: f32,
    /// Momentum factor in `[0, 1)`; 0 disables the velocity buffer.
    #[serde(default)]
    pub momentum: f32,
    /// Dampening of the gradient's contribution to the velocity, in `[0, 1]`.
    #[serde(default)]
    pub dampening: f32,
    /// Nesterov momentum (needs `momentum > 0` and `dampening = 0`).
    #[serde(default)]
    pub nesterov: bool,
    /// L2 penalty added to the gradient.
    #[serde(default)]
    pub weight_decay: f32,
}

impl Sgd {
    /// Plain SGD with learning rate `lr`: no momentum, no weight decay.
    pub fn new(lr: f32) -> Self {
        Sgd {
            lr,
            momentum: 0.0,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        }
    }

    /// Checks the hyperparameters before any step; errors name the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::invalid("Sgd", msg));
        check_non_negative("Sgd", "lr", self.lr)?;
        if !(0.0..1.0).contains(&self.momentum) {
            return bad(format!("momentum must be in [0, 1), got {}", self.momentum));
        }
        if !(0.0..=1.0).contains(&self.dampening) {
            return bad(format!(
                "dampening must be in [0, 1], got {}",
                self.dampening
            ));
        }
        if self.nesterov && (self.momentum == 0.0 || self.dampening != 0.0) {
            return bad("nesterov needs momentum > 0 and dampening = 0".into());
        }
        check_non_negative("Sgd", "weight_decay", self.weight_decay)
    }

    /// The per-parameter state buffers: the velocity when momentum is on.
    pub fn slot_names(&self) -> &'static [&'static str] {
        if self.momentum != 0.0 {
            &["velocity"]
        } else {
            &[]
        }
    }

    /// One fused step of one parameter that has taken `steps` steps before;
    /// `slots` matches [`Self::slot_names`].
    pub fn update(
        &self,
        be: &dyn Backend,
        plan: &StepPlan,
        steps: u64,
        param: &mut Tensor,
        grad: &Tensor,
        slots: &mut [Tensor],
    ) -> Result<()> {
        let hp = SgdHyper {
            lr: plan.lr,
            momentum: self.momentum,
            dampening: self.dampening,
            nesterov: self.nesterov,
            weight_decay: self.weight_decay,
            grad_scale: plan.grad_scale,
            first_step: steps == 0,
        };
        ops::sgd_update(be, &hp, param, grad, slots.first_mut())
    }
}
