//! [`Optimizer`]: the solvers of [`verjus_core::optim`] (SGD with momentum,
//! Nesterov and weight decay, Adam/AdamW, learning-rate schedules, clipping
//! by global norm) over RF parameters.
//!
//! The rules are the static graph's, called the same way; what is the RF
//! frontend's own is the state: buffers (velocity, moments) and a step count
//! per parameter, in the order the parameters were given. [`Optimizer::step`]
//! applies one update from each parameter's accumulated gradient (the gradient
//! of whatever loss `backward` ran on, taken as it is: a batch of 1), in place
//! (graphs recorded before keep the old values), and skips parameters without
//! one.

use crate::{fmt_dims, RfTensor};
use std::num::NonZeroUsize;
use std::sync::Arc;
use verjus_core::optim::{GradNorm, SolverConfig};
use verjus_core::{ops, DType, Error, Result, Tensor};

/// A parameter and its optimizer state.
struct Slot {
    param: RfTensor,
    /// The rule's buffers, in the order of its `slot_names`.
    buffers: Vec<Tensor>,
    /// Updates this parameter has taken (Adam's bias correction uses it; SGD's
    /// velocity starts as the gradient when it is 0).
    steps: u64,
}

/// An optimizer over a fixed list of parameters.
pub struct Optimizer {
    config: SolverConfig,
    slots: Vec<Slot>,
    step: u64,
    norm: GradNorm,
}

impl Optimizer {
    /// An optimizer for `params` (float32 leaves that require gradients) with
    /// the settings of `config`, which are checked.
    pub fn new(params: Vec<RfTensor>, config: SolverConfig) -> Result<Optimizer> {
        config.validate()?;
        let count = config.rule.slot_names().len();
        let mut slots = Vec::with_capacity(params.len());
        for param in params {
            let var = param.var();
            if !var.requires_grad() || !var.is_leaf() {
                return Err(Error::invalid(
                    "optimizer",
                    format!(
                        "parameter {} must be a leaf that requires a gradient",
                        fmt_dims(param.dims())
                    ),
                ));
            }
            let be = param.backend().clone();
            let buffers = (0..count)
                .map(|_| ops::zeros(&*be, &var.shape(), DType::F32))
                .collect::<Result<_>>()?;
            slots.push(Slot {
                param,
                buffers,
                steps: 0,
            });
        }
        Ok(Optimizer {
            config,
            slots,
            step: 0,
            norm: GradNorm::default(),
        })
    }

    /// The number of steps taken.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// Clears every parameter's gradient.
    pub fn zero_grad(&self) {
        for s in &self.slots {
            s.param.var().zero_grad();
        }
    }

    /// One update of every parameter that has a gradient, at the learning rate
    /// the schedule gives this step; with clipping on, the gradients that are
    /// there are clipped together to the global norm.
    pub fn step(&mut self) -> Result<()> {
        let step = self.step;
        self.step += 1;
        let live: Vec<(&mut Slot, Arc<Tensor>)> = self
            .slots
            .iter_mut()
            .filter_map(|s| s.param.var().grad().map(|g| (s, g)))
            .collect();
        let Some(be) = live.first().map(|(s, _)| s.param.backend().clone()) else {
            return Ok(());
        };
        let grads: Vec<&Tensor> = live.iter().map(|(_, g)| &**g).collect();
        let plan = self
            .config
            .plan_step(&*be, step, &grads, NonZeroUsize::MIN, &mut self.norm)?;
        let rule = self.config.rule;
        for (slot, grad) in live {
            let var = slot.param.var().clone();
            let be = var.backend().clone();
            var.update_value(|p| {
                rule.update(&*be, &plan, slot.steps, p, &grad, &mut slot.buffers)
            })?;
            slot.steps += 1;
        }
        Ok(())
    }
}
