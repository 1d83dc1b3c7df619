//! The update rule a [`super::Solver`] applies: one of the optimizers.
//!
//! An enum rather than a trait object, so that a solver's configuration is plain
//! data (serde) that a checkpoint can store beside its state.

use super::{Adam, ParamState, Sgd};
use serde::{Deserialize, Serialize};
use verjus_core::{Backend, Result, Tensor};

/// Which optimizer updates the parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum UpdateRule {
    Sgd(Sgd),
    Adam(Adam),
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

impl UpdateRule {
    /// The base learning rate.
    pub fn lr(&self) -> f32 {
        match self {
            UpdateRule::Sgd(s) => s.lr,
            UpdateRule::Adam(a) => a.lr,
        }
    }

    /// Checks the hyperparameters.
    pub fn validate(&self) -> Result<()> {
        match self {
            UpdateRule::Sgd(s) => s.validate(),
            UpdateRule::Adam(a) => a.validate(),
        }
    }

    /// Names of the state buffers kept per parameter, in order.
    pub fn slot_names(&self) -> &'static [&'static str] {
        match self {
            UpdateRule::Sgd(s) => s.slot_names(),
            UpdateRule::Adam(a) => a.slot_names(),
        }
    }

    /// The state buffers that can never hold a negative value (Adam's second
    /// moment, a running mean of squares): a checkpoint's are checked on load.
    pub(crate) fn nonnegative_slots(&self) -> &'static [&'static str] {
        match self {
            UpdateRule::Sgd(_) => &[],
            UpdateRule::Adam(_) => &["v"],
        }
    }

    /// One fused step of one parameter.
    pub(crate) fn update(
        &self,
        be: &dyn Backend,
        lr: f32,
        grad_scale: f32,
        param: &mut Tensor,
        grad: &Tensor,
        state: &mut ParamState,
    ) -> Result<()> {
        match self {
            UpdateRule::Sgd(s) => s.update(be, lr, grad_scale, param, grad, state),
            UpdateRule::Adam(a) => a.update(be, lr, grad_scale, param, grad, state),
        }
    }
}
