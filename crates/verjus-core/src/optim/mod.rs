//! Optimizers, written once for every frontend: the update rules ([`Sgd`],
//! [`Adam`]/AdamW, [`NAdam`]), learning-rate [`LrSchedule`]s and gradient clipping by
//! global norm, with their settings as data ([`SolverConfig`], serde).
//!
//! The static graph's solver (`verjus_nn::solver::Solver`) and the RF
//! frontend's optimizer (`verjus_rf::Optimizer`) keep their own state
//! (buffers keyed by parameter name, or by position) and call the same
//! functions here for everything else, so the math of a step exists once:
//!
//! 1. [`SolverConfig::validate`] before a step (errors name the field);
//! 2. [`SolverConfig::plan_step`]: the step's [`StepPlan`], its learning rate
//!    after the schedule and the `grad_scale` the fused update ops multiply the
//!    raw gradients by (the mean over the batch, times the clip factor);
//! 3. [`UpdateRule::update`] per parameter: the hyper-parameters, the
//!    parameter's step count, the learning rate and the scale turned into one
//!    fused op call ([`crate::ops::sgd_update`], [`crate::ops::adam_update`]).

mod adam;
mod clip;
mod config;
mod nadam;
mod plan;
mod rule;
mod schedule;
mod sgd;

pub use adam::Adam;
pub use clip::{clip_factor, GradNorm};
pub use config::SolverConfig;
pub use nadam::NAdam;
pub use plan::StepPlan;
pub use rule::UpdateRule;
pub use schedule::LrSchedule;
pub use sgd::Sgd;

use crate::{Error, Result};

/// `Err` from `op` saying that `field` must be finite and >= 0, unless it is.
fn check_non_negative(op: &str, field: &str, value: f32) -> Result<()> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(
            op,
            format!("{field} must be finite and >= 0, got {value}"),
        ))
    }
}
