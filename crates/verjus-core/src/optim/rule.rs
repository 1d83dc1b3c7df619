//! The update rule a solver applies: one of the optimizers.
//!
//! An enum rather than a trait object, so that a solver's configuration is plain
//! data (serde) that a checkpoint can store beside its state.

use super::{Adam, NAdam, Sgd, StepPlan};
use crate::{Backend, Result, Tensor};
use serde::{Deserialize, Serialize};

/// Which optimizer updates the parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum UpdateRule {
    Sgd(Sgd),
    Adam(Adam),
    NAdam(NAdam),
}

impl From<Sgd> for UpdateRule {
    fn from(s: Sgd) -> Self {
        UpdateRule::Sgd(s)
    }
}

impl From<Adam> for UpdateRule {
    fn from(a: Adam) -> Self {
        UpdateRule::Adam(a)
    }
}

impl From<NAdam> for UpdateRule {
    fn from(n: NAdam) -> Self {
        UpdateRule::NAdam(n)
    }
}

impl UpdateRule {
    /// The base learning rate.
    pub fn lr(&self) -> f32 {
        match self {
            UpdateRule::Sgd(s) => s.lr,
            UpdateRule::Adam(a) => a.lr,
            UpdateRule::NAdam(n) => n.lr,
        }
    }

    /// Sets the base learning rate (checked with the other hyperparameters);
    /// on error the rule is unchanged.
    pub fn set_lr(&mut self, lr: f32) -> Result<()> {
        let mut changed = *self;
        match &mut changed {
            UpdateRule::Sgd(s) => s.lr = lr,
            UpdateRule::Adam(a) => a.lr = lr,
            UpdateRule::NAdam(n) => n.lr = lr,
        }
        changed.validate()?;
        *self = changed;
        Ok(())
    }

    /// Checks the hyperparameters.
    pub fn validate(&self) -> Result<()> {
        match self {
            UpdateRule::Sgd(s) => s.validate(),
            UpdateRule::Adam(a) => a.validate(),
            UpdateRule::NAdam(n) => n.validate(),
        }
    }

    /// Names of the state buffers kept per parameter, in order.
    pub fn slot_names(&self) -> &'static [&'static str] {
        match self {
            UpdateRule::Sgd(s) => s.slot_names(),
            UpdateRule::Adam(a) => a.slot_names(),
            UpdateRule::NAdam(n) => n.slot_names(),
        }
    }

    /// The state buffers that can never hold a negative value (Adam's second
    /// moment, a running mean of squares): a checkpoint's are checked on load.
    pub fn nonnegative_slots(&self) -> &'static [&'static str] {
        match self {
            UpdateRule::Sgd(_) => &[],
            UpdateRule::Adam(_) | UpdateRule::NAdam(_) => &["v"],
        }
    }

    /// One fused step of one parameter that has taken `steps` steps before
    /// (its first step is `steps == 0`); `slots` are its state buffers, in the
    /// order of [`Self::slot_names`].
    pub fn update(
        &self,
        be: &dyn Backend,
        plan: &StepPlan,
        steps: u64,
        param: &mut Tensor,
        grad: &Tensor,
        slots: &mut [Tensor],
    ) -> Result<()> {
        match self {
            UpdateRule::Sgd(s) => s.update(be, plan, steps, param, grad, slots),
            UpdateRule::Adam(a) => a.update(be, plan, steps, param, grad, slots),
            UpdateRule::NAdam(n) => n.update(be, plan, steps, param, grad, slots),
        }
    }
}
