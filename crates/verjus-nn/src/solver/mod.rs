//! Solvers: how parameters move given their gradients.
//!
//! A [`Solver`] is an update rule ([`Sgd`] or [`Adam`]), a learning-rate
//! [`LrSchedule`], optional gradient clipping by global norm, and the state those
//! need ([`SolverState`]: moments and step counts, keyed by parameter name).
//! [`SolverConfig`] is the settings without the state, as data (JSON).
//!
//! The rules, schedules, clipping and settings are [`verjus_core::optim`]'s,
//! which the RF frontend's optimizers share; this module adds the static
//! graph's side: state keyed by parameter name (so it survives a rebuild and
//! goes into a checkpoint) and steps over the network's parameters.
//!
//! The network's gradients are *sums* over the batch. [`Solver::step`] takes the
//! batch size of the step that produced them and passes
//! `grad_scale = clip_factor / batch_size` to the fused update ops
//! ([`verjus_core::ops::sgd_update`], [`verjus_core::ops::adam_update`]), so
//!
//! - the update uses the mean gradient of the *actual* batch: a short last batch
//!   of an epoch is not under-weighted (Juice divided by the configured size);
//! - clipping rescales the mean gradient `ĝ = Σg / batch` to global L2 norm at
//!   most `max_norm` with no extra pass over memory;
//! - everything runs on the parameters' device; only the global norm (one scalar)
//!   is read back, and only when clipping is on.
//!
//! State buffers are allocated lazily, on the first step of each parameter, on
//! the backend that runs the step.

mod state;
#[cfg(test)]
mod tests;

pub use state::{ParamState, SolverState};
pub use verjus_core::optim::{clip_factor, Adam, LrSchedule, Sgd, SolverConfig, UpdateRule};

use std::borrow::Borrow;
use std::num::NonZeroUsize;
use verjus_core::optim::GradNorm;
use verjus_core::{Backend, Error, Result, Tensor};

/// A parameter as the solver sees it: a name that keys its state, and its value.
///
/// Implemented for `(&str, &mut Tensor)` and `(String, Tensor)`, for the
/// network's own parameter type and for mutable references to any of them, so
/// a solver steps any of them (or a selection) without copying.
pub trait ParamMut {
    /// The parameter's unique name (its layer path, e.g. `fc1.weight`).
    fn name(&self) -> &str;
    /// The value.
    fn value(&self) -> &Tensor;
    /// The value, updated in place.
    fn value_mut(&mut self) -> &mut Tensor;
}

impl ParamMut for (&str, &mut Tensor) {
    fn name(&self) -> &str {
        self.0
    }
    fn value(&self) -> &Tensor {
        self.1
    }
    fn value_mut(&mut self) -> &mut Tensor {
        self.1
    }
}

impl<P: ParamMut> ParamMut for &mut P {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn value(&self) -> &Tensor {
        (**self).value()
    }
    fn value_mut(&mut self) -> &mut Tensor {
        (**self).value_mut()
    }
}

impl ParamMut for (String, Tensor) {
    fn name(&self) -> &str {
        &self.0
    }
    fn value(&self) -> &Tensor {
        &self.1
    }
    fn value_mut(&mut self) -> &mut Tensor {
        &mut self.1
    }
}

/// What one step did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepStats {
    /// The learning rate the step used (after the schedule).
    pub lr: f32,
    /// The global L2 norm of the mean gradient before clipping (only computed
    /// when clipping is on).
    pub grad_norm: Option<f32>,
}

/// An update rule with a schedule, optional clipping and its state. See the
/// module docs.
#[derive(Debug)]
pub struct Solver {
    /// The optimizer and its hyperparameters.
    pub rule: UpdateRule,
    /// Scales the rule's learning rate by step.
    pub schedule: LrSchedule,
    /// Clip the mean gradient to this global L2 norm; `None` disables clipping.
    pub clip_norm: Option<f32>,
    state: SolverState,
    norm: GradNorm,
}

impl Solver {
    /// A solver with a constant learning rate and no clipping.
    pub fn new(rule: impl Into<UpdateRule>) -> Self {
        Solver {
            rule: rule.into(),
            schedule: LrSchedule::Constant,
            clip_norm: None,
            state: SolverState::default(),
            norm: GradNorm::default(),
        }
    }

    /// The same solver with a learning-rate schedule.
    pub fn with_schedule(mut self, schedule: LrSchedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// The same solver, clipping the mean gradient to global L2 norm `max_norm`.
    pub fn with_clip_norm(mut self, max_norm: f32) -> Self {
        self.clip_norm = Some(max_norm);
        self
    }

    /// A fresh solver (no state) with the settings of `cfg`, which are checked.
    pub fn from_config(cfg: SolverConfig) -> Result<Solver> {
        let mut solver = Solver::new(cfg.rule).with_schedule(cfg.schedule);
        solver.clip_norm = cfg.clip_norm;
        solver.validate()?;
        Ok(solver)
    }

    /// The settings (not the state) of this solver.
    pub fn config(&self) -> SolverConfig {
        SolverConfig {
            rule: self.rule,
            schedule: self.schedule,
            clip_norm: self.clip_norm,
        }
    }

    /// Checks the rule, the schedule and the clipping norm.
    pub fn validate(&self) -> Result<()> {
        self.config().validate()
    }

    /// The learning rate the next step will use.
    pub fn lr(&self) -> f32 {
        self.config().lr_at(self.state.step())
    }

    /// The state: step count and per-parameter buffers.
    pub fn state(&self) -> &SolverState {
        &self.state
    }

    /// The state, mutably (to restore a checkpoint or reset a parameter).
    pub fn state_mut(&mut self) -> &mut SolverState {
        &mut self.state
    }

    /// The state buffers by name, `"{parameter}.{slot}"` (e.g. `fc1.weight.m`),
    /// sorted by parameter name: what a checkpoint stores besides the step counts.
    pub fn state_tensors(&self) -> Vec<(String, &Tensor)> {
        let slots = self.rule.slot_names();
        self.state
            .entries()
            .into_iter()
            .flat_map(|(name, st)| {
                slots
                    .iter()
                    .zip(&st.slots)
                    .map(move |(slot, t)| (format!("{name}.{slot}"), t))
            })
            .collect()
    }

    /// One update of `params` from `grads`, the gradients *summed* over a batch of
    /// `batch_size` examples (aligned with `params`).
    ///
    /// Everything is checked (hyperparameters, counts, shapes, existing state)
    /// before any parameter changes; an error from a kernel midway can leave the
    /// parameters partly updated.
    pub fn step<P: ParamMut, G: Borrow<Tensor>>(
        &mut self,
        be: &dyn Backend,
        params: &mut [P],
        grads: &[G],
        batch_size: usize,
    ) -> Result<StepStats> {
        let config = self.config();
        config.validate()?;
        let Some(batch) = NonZeroUsize::new(batch_size) else {
            return Err(Error::invalid("solver step", "the batch is empty"));
        };
        if grads.len() != params.len() {
            return Err(Error::invalid(
                "solver step",
                format!("{} gradients for {} parameters", grads.len(), params.len()),
            ));
        }
        let slots = self.rule.slot_names().len();
        self.state.begin_visit();
        for (p, g) in params.iter().zip(grads) {
            let g = g.borrow();
            if g.shape() != p.value().shape() {
                return Err(Error::shape(
                    "solver step",
                    format!("gradient of {:?}", p.name()),
                    p.value().shape(),
                    g.shape(),
                ));
            }
            self.state.prepare(be, p.name(), p.value(), slots)?;
        }
        let plan = config.plan_step(be, self.state.step(), grads, batch, &mut self.norm)?;
        for (p, g) in params.iter_mut().zip(grads) {
            let st = self.state.entry(p.name())?;
            let value = p.value_mut();
            self.rule
                .update(be, &plan, st.steps, value, g.borrow(), &mut st.slots)?;
            st.steps += 1;
        }
        self.state.finish_step();
        Ok(StepStats {
            lr: plan.lr,
            grad_norm: plan.grad_norm,
        })
    }
}
