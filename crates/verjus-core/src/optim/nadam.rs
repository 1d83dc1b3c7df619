//! NAdam: Adam with Nesterov momentum and momentum decay (`torch.optim.NAdam`).
//!
//! The rule keeps the settings and works out each step's constants (the
//! momentum schedule `μ_t` and its running product); the update itself is
//! [`ops::nadam_update`], fused where the backend has a kernel.

use super::adam::{default_beta1, default_beta2, default_eps};
use super::{check_non_negative, StepPlan};
use crate::ops::{self, NAdamStep};
use crate::{Backend, Error, Result, Tensor};
use serde::{Deserialize, Serialize};

/// NAdam hyperparameters, as `torch.optim.NAdam`'s. With `ĝ` the (clipped,
/// scaled) gradient, `η` the scheduled learning rate, `t` this step (from 1),
/// `μ_t = β1 · (1 − ½ · 0.96^(t · momentum_decay))` and `Π_t = μ_1 ⋯ μ_t`:
///
/// ```text
/// g = ĝ + weight_decay · p            (or p = p − η · weight_decay · p when decoupled)
/// m = β1 · m + (1 − β1) · g
/// v = β2 · v + (1 − β2) · g²
/// d = sqrt(v / (1 − β2^t)) + eps
/// p = p − η (1 − μ_t) / (1 − Π_t) · g / d − η μ_{t+1} / (1 − Π_t μ_{t+1}) · m / d
/// ```
///
/// In JSON only `lr` is required; the others default to PyTorch's (`beta1`
/// 0.9, `beta2` 0.999, `eps` 1e-8, `momentum_decay` 0.004, no weight decay).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NAdam {
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
    /// L2 penalty, or the decoupled decay rate when `decoupled`.
    #[serde(default)]
    pub weight_decay: f32,
    /// How fast the momentum factor `μ_t` rises to `β1`.
    #[serde(default = "default_momentum_decay")]
    pub momentum_decay: f32,
    /// Decay the weights directly instead of adding to the gradient.
    #[serde(default)]
    pub decoupled: bool,
}

fn default_momentum_decay() -> f32 {
    0.004
}

impl NAdam {
    /// NAdam with PyTorch's defaults.
    pub fn new(lr: f32) -> Self {
        NAdam {
            lr,
            beta1: default_beta1(),
            beta2: default_beta2(),
            eps: default_eps(),
            weight_decay: 0.0,
            momentum_decay: default_momentum_decay(),
            decoupled: false,
        }
    }

    /// Checks the hyperparameters before any step; errors name the field.
    pub fn validate(&self) -> Result<()> {
        check_non_negative("NAdam", "lr", self.lr)?;
        for (field, beta) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&beta) {
                return Err(Error::invalid(
                    "NAdam",
                    format!("{field} must be in [0, 1), got {beta}"),
                ));
            }
        }
        check_non_negative("NAdam", "eps", self.eps)?;
        check_non_negative("NAdam", "weight_decay", self.weight_decay)?;
        check_non_negative("NAdam", "momentum_decay", self.momentum_decay)
    }

    /// The per-parameter state buffers: first and second moments.
    pub fn slot_names(&self) -> &'static [&'static str] {
        &["m", "v"]
    }

    /// `μ_t`.
    fn mu(&self, t: u64) -> f64 {
        let decay = f64::from(self.momentum_decay);
        f64::from(self.beta1) * (1.0 - 0.5 * 0.96f64.powf(t as f64 * decay))
    }

    /// `Π_t = μ_1 ⋯ μ_t`, in closed form so a step costs the same at step 10
    /// and step 10⁶: with `r = 0.96^momentum_decay`,
    /// `ln Π_t = t ln β1 − Σ_k (½)^k / k · r^k (1 − r^{kt}) / (1 − r^k)`
    /// (the series of `ln(1 − ½ r^i)` summed over `i` first).
    fn mu_product(&self, t: u64) -> f64 {
        let r = 0.96f64.powf(f64::from(self.momentum_decay));
        let t = t as f64;
        let mut log = t * f64::from(self.beta1).ln();
        if r >= 1.0 {
            // No decay: every μ_i is β1 / 2.
            return (log + t * 0.5f64.ln()).exp();
        }
        for k in 1..=60 {
            let k = f64::from(k);
            let rk = r.powf(k);
            log -= 0.5f64.powf(k) / k * rk * (1.0 - r.powf(k * t)) / (1.0 - rk);
        }
        log.exp()
    }

    /// One step of one parameter that has taken `steps` steps before; `slots`
    /// is `[m, v]`.
    pub fn update(
        &self,
        be: &dyn Backend,
        plan: &StepPlan,
        steps: u64,
        param: &mut Tensor,
        grad: &Tensor,
        slots: &mut [Tensor],
    ) -> Result<()> {
        let [m, v] = slots else {
            return Err(Error::invalid(
                "nadam_update",
                format!("NAdam keeps 2 state buffers (m, v), found {}", slots.len()),
            ));
        };
        ops::nadam_update(be, &self.step(plan, steps), param, grad, m, v)
    }

    /// The constants of step `steps + 1` (see [`NAdamStep`]), in f64 before
    /// rounding: `Π_t` underflows gracefully, and `1 − Π_t` keeps its digits.
    fn step(&self, plan: &StepPlan, steps: u64) -> NAdamStep {
        let t = steps + 1;
        let lr = f64::from(plan.lr);
        let (mu, mu_next) = (self.mu(t), self.mu(t + 1));
        let product = self.mu_product(t);
        let (l2, decay) = match (self.decoupled, self.weight_decay) {
            (_, 0.0) => (0.0, 1.0),
            (true, wd) => (0.0, 1.0 - plan.lr * wd),
            (false, wd) => (wd, 1.0),
        };
        NAdamStep {
            grad_coef: (lr * (1.0 - mu) / (1.0 - product)) as f32,
            moment_coef: (lr * mu_next / (1.0 - product * mu_next)) as f32,
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            bias2: (1.0 - f64::from(self.beta2).powf(t as f64)) as f32,
            l2,
            decay,
            grad_scale: plan.grad_scale,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_form_product_equals_the_running_product() {
        let rule = NAdam::new(1e-3);
        let mut running = 1.0f64;
        let mut t = 0;
        // Up to where the product leaves the normal f64 range (t ≈ 900).
        while running > 1e-290 {
            t += 1;
            running *= rule.mu(t);
            let closed = rule.mu_product(t);
            assert!(
                (closed - running).abs() <= 1e-9 * running,
                "t={t}: {closed} vs {running}"
            );
        }
    }
}
