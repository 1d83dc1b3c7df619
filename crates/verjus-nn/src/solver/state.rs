//! Solver state, keyed by parameter name.
//!
//! Moments and step counts are found by the parameter's *name* (its layer path,
//! such as `fc1.weight`), never by the identity of a tensor or a layer object.
//! Rebuilding a network from the same definition (hot-swap, reloading weights,
//! moving to another device) therefore keeps the optimizer state, and the state
//! can be written to and read from a checkpoint by name.

use std::collections::HashMap;
use verjus_core::{ops, Backend, DType, Error, Result, Tensor};

/// The state of one parameter.
#[derive(Debug)]
pub struct ParamState {
    /// Steps this parameter has taken (Adam's bias correction uses it; SGD's
    /// velocity starts as the gradient when it is 0).
    pub steps: u64,
    /// The optimizer's buffers, in the order of `UpdateRule::slot_names`, each
    /// shaped like the parameter.
    pub slots: Vec<Tensor>,
    /// The solver call that last visited this entry, to catch duplicate names.
    visit: u64,
}

impl ParamState {
    /// State restored from a checkpoint.
    pub fn new(steps: u64, slots: Vec<Tensor>) -> Self {
        ParamState {
            steps,
            slots,
            visit: 0,
        }
    }
}

/// Everything a solver remembers between steps.
#[derive(Debug, Default)]
pub struct SolverState {
    step: u64,
    visits: u64,
    params: HashMap<String, ParamState>,
}

impl SolverState {
    /// Completed solver steps; the schedule reads it.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Sets the step count (when restoring a checkpoint).
    pub fn set_step(&mut self, step: u64) {
        self.step = step;
    }

    /// The state of the parameter `name`, if it has taken a step.
    pub fn get(&self, name: &str) -> Option<&ParamState> {
        self.params.get(name)
    }

    /// The state of the parameter `name`, mutably (to move its buffers).
    pub fn get_mut(&mut self, name: &str) -> Option<&mut ParamState> {
        self.params.get_mut(name)
    }

    /// Installs state for `name` (when restoring a checkpoint); returns the old.
    pub fn insert(&mut self, name: impl Into<String>, state: ParamState) -> Option<ParamState> {
        self.params.insert(name.into(), state)
    }

    /// Forgets the state of `name` (it restarts from zero on its next step).
    pub fn remove(&mut self, name: &str) -> Option<ParamState> {
        self.params.remove(name)
    }

    /// All entries, sorted by parameter name (deterministic for checkpoints).
    pub fn entries(&self) -> Vec<(&str, &ParamState)> {
        let mut all: Vec<_> = self.params.iter().map(|(k, v)| (k.as_str(), v)).collect();
        all.sort_unstable_by_key(|(k, _)| *k);
        all
    }

    /// Number of parameters with state.
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// Whether no parameter has state yet.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// Starts a solver call (for duplicate-name detection).
    pub(crate) fn begin_visit(&mut self) {
        self.visits += 1;
    }

    /// Counts a completed step.
    pub(crate) fn finish_step(&mut self) {
        self.step += 1;
    }

    /// Makes sure `name` has `slots` zero buffers shaped like `param` on `be`'s
    /// device, allocating them on first use. Fails when two parameters share a
    /// name or existing state does not fit the parameter.
    pub(crate) fn prepare(
        &mut self,
        be: &dyn Backend,
        name: &str,
        param: &Tensor,
        slots: usize,
    ) -> Result<()> {
        if !self.params.contains_key(name) {
            self.params
                .insert(name.to_owned(), ParamState::new(0, Vec::new()));
        }
        let visits = self.visits;
        let st = self.entry(name)?;
        if st.visit == visits {
            return Err(Error::invalid(
                "solver",
                format!("two parameters are named {name:?}; names key the solver state"),
            ));
        }
        st.visit = visits;
        if st.slots.is_empty() && slots > 0 {
            // Fresh buffers start a fresh history (SGD's first step, Adam's t = 1).
            st.steps = 0;
            st.slots = (0..slots)
                .map(|_| ops::zeros(be, param.shape(), DType::F32))
                .collect::<Result<_>>()?;
        }
        if st.slots.len() != slots {
            return Err(Error::invalid(
                "solver",
                format!(
                    "the state of parameter {name:?} has {} buffers, this optimizer keeps {slots}; \
                     remove it from the solver state to start afresh",
                    st.slots.len()
                ),
            ));
        }
        if let Some(s) = st.slots.iter().find(|s| s.shape() != param.shape()) {
            return Err(Error::shape(
                "solver",
                format!("state of parameter {name:?} (remove it to start afresh)"),
                param.shape(),
                s.shape(),
            ));
        }
        Ok(())
    }

    /// The entry of `name`, which [`Self::prepare`] made.
    pub(crate) fn entry(&mut self, name: &str) -> Result<&mut ParamState> {
        self.params
            .get_mut(name)
            .ok_or_else(|| Error::invalid("solver", format!("no state was prepared for {name:?}")))
    }
}
