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

use crate::replicas::{self, Averaging, Replicas};
use crate::{fmt_dims, RfTensor};
use std::num::NonZeroUsize;
use std::sync::Arc;
use verjus_core::ops::{BinaryOp, UnaryOp};
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

/// One parameter's saved optimizer state: its steps and its buffers (host
/// tensors, in the rule's slot order).
pub struct SlotState {
    /// Updates the parameter has taken.
    pub steps: u64,
    /// The rule's buffers.
    pub buffers: Vec<Tensor>,
}

/// An optimizer over a fixed list of parameters.
pub struct Optimizer {
    config: SolverConfig,
    slots: Vec<Slot>,
    step: u64,
    norm: GradNorm,
    /// Data-parallel ranks, when training on several ([`Optimizer::replicate`]).
    replicas: Option<Replicas>,
    /// Whether this step's gradients are already the ranks' average.
    grads_averaged: bool,
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
            replicas: None,
            grads_averaged: false,
        })
    }

    /// The number of steps taken.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// The base learning rate (before the schedule).
    pub fn lr(&self) -> f32 {
        self.config.rule.lr()
    }

    /// Sets the base learning rate from the next step on, as an engine's
    /// learning-rate control does between steps or epochs (checked; on error
    /// the rate is unchanged).
    pub fn set_lr(&mut self, lr: f32) -> Result<()> {
        self.config.rule.set_lr(lr)
    }

    /// The names of the state buffers each parameter has, in order.
    pub fn slot_names(&self) -> &'static [&'static str] {
        self.config.rule.slot_names()
    }

    /// The optimizer's state, on the host: the steps taken, and per parameter
    /// (in the order given) its steps and buffers (in [`Self::slot_names`] order).
    pub fn state(&self) -> Result<(u64, Vec<SlotState>)> {
        let slots = self
            .slots
            .iter()
            .map(|s| {
                let be = s.param.backend();
                let buffers = s
                    .buffers
                    .iter()
                    .map(|b| ops::download(&**be, b))
                    .collect::<Result<_>>()?;
                Ok(SlotState {
                    steps: s.steps,
                    buffers,
                })
            })
            .collect::<Result<_>>()?;
        Ok((self.step, slots))
    }

    /// Restores a state [`Self::state`] gave, for the same parameters in the
    /// same order: every count, shape and buffer is checked before anything
    /// changes, so a bad state leaves the optimizer as it was.
    pub fn load_state(&mut self, step: u64, state: Vec<SlotState>) -> Result<()> {
        let bad = |msg: String| Error::invalid("optimizer load_state", msg);
        if state.len() != self.slots.len() {
            return Err(bad(format!(
                "state for {} parameters, the optimizer has {}",
                state.len(),
                self.slots.len()
            )));
        }
        let names = self.slot_names();
        let nonnegative = self.config.rule.nonnegative_slots();
        let mut restored = Vec::with_capacity(state.len());
        for (i, (slot, saved)) in self.slots.iter().zip(state).enumerate() {
            if saved.buffers.len() != names.len() {
                return Err(bad(format!(
                    "parameter {i}: {} buffers, the rule keeps {} ({names:?})",
                    saved.buffers.len(),
                    names.len()
                )));
            }
            let shape = slot.param.var().shape();
            let be = slot.param.backend();
            let mut buffers = Vec::with_capacity(names.len());
            for (name, buffer) in names.iter().zip(saved.buffers) {
                if buffer.shape() != &shape || buffer.dtype() != DType::F32 {
                    return Err(bad(format!(
                        "parameter {i}: buffer {name} is {:?} {}, the parameter is F32 {shape}",
                        buffer.dtype(),
                        buffer.shape()
                    )));
                }
                let host = ops::download(&**be, &buffer)?;
                let values = host.as_slice::<f32>()?;
                if values.iter().any(|x| !x.is_finite())
                    || (nonnegative.contains(name) && values.iter().any(|&x| x < 0.0))
                {
                    return Err(bad(format!(
                        "parameter {i}: buffer {name} holds a value it can never hold"
                    )));
                }
                buffers.push(ops::upload(&**be, &host)?);
            }
            restored.push((saved.steps, buffers));
        }
        for (slot, (steps, buffers)) in self.slots.iter_mut().zip(restored) {
            slot.steps = steps;
            slot.buffers = buffers;
        }
        self.step = step;
        Ok(())
    }

    /// The global L2 norm of the gradients there are (computed on the device,
    /// one scalar read back); with [`Self::scale_grads`], clipping across
    /// several optimizers (parameter groups) by one norm.
    pub fn grad_norm(&mut self) -> Result<f32> {
        self.average_grads()?;
        let grads: Vec<Arc<Tensor>> = self
            .slots
            .iter()
            .filter_map(|s| s.param.var().grad())
            .collect();
        let Some(be) = self.slots.first().map(|s| s.param.backend().clone()) else {
            return Ok(0.0);
        };
        self.norm.compute(&*be, &grads)
    }

    /// Multiplies every gradient there is by `factor`.
    pub fn scale_grads(&mut self, factor: f32) -> Result<()> {
        self.average_grads()?;
        self.map_grads(|be, g, out| ops::unary(be, UnaryOp::Scale(factor), g, out))
    }

    /// Clips every gradient there is to `[-max, max]` elementwise
    /// (`torch.nn.utils.clip_grad_value_`); `max` must be finite and > 0.
    pub fn clip_grad_values(&mut self, max: f32) -> Result<()> {
        if !(max.is_finite() && max > 0.0) {
            return Err(Error::invalid(
                "clip_grad_values",
                format!("the limit must be finite and > 0, got {max}"),
            ));
        }
        self.average_grads()?;
        self.map_grads(|be, g, out| {
            let bound = |v: f32| ops::upload(be, &Tensor::from_vec(Vec::<usize>::new(), vec![v])?);
            let mut low = ops::output(be, g.shape(), DType::F32)?;
            ops::binary(be, BinaryOp::Max, g, &bound(-max)?, &mut low)?;
            ops::binary(be, BinaryOp::Min, &low, &bound(max)?, out)
        })
    }

    /// Replaces every gradient there is by `f(grad)` (written into a new tensor).
    fn map_grads(
        &self,
        f: impl Fn(&dyn verjus_core::Backend, &Tensor, &mut Tensor) -> Result<()>,
    ) -> Result<()> {
        for s in &self.slots {
            let var = s.param.var();
            let Some(grad) = var.grad() else { continue };
            let be = var.backend();
            let mut out = ops::output(&**be, grad.shape(), DType::F32)?;
            f(&**be, &grad, &mut out)?;
            var.set_grad(out)?;
        }
        Ok(())
    }

    /// Trains data-parallel with the ranks of `replicas` (see [`replicas`]):
    /// every rank's parameters become rank 0's now, and from here on each
    /// [`Optimizer::step`] is a collective call that all ranks make.
    pub fn replicate(&mut self, replicas: Replicas) -> Result<()> {
        if let Averaging::Values { every: 0 } = replicas.averaging {
            return Err(Error::invalid(
                "optimizer",
                "parameter averaging needs a sync step count > 0",
            ));
        }
        replicas::broadcast_values(&*replicas.collective, &self.params())?;
        self.replicas = Some(replicas);
        Ok(())
    }

    /// Replaces every parameter by its mean over the ranks (parameter
    /// averaging at an epoch's end, before a checkpoint); nothing when alone.
    pub fn average_parameters(&self) -> Result<()> {
        match &self.replicas {
            Some(r) => replicas::average_values(&*r.collective, &self.params()),
            None => Ok(()),
        }
    }

    /// Replaces the gradients by their average over the ranks, once per step
    /// (when replicated with gradient averaging): before anything looks at
    /// them (clipping, the norm, the update), so that all see the global
    /// batch's gradient, as after PyTorch DDP's backward.
    pub fn average_grads(&mut self) -> Result<()> {
        if let Some(Replicas {
            collective,
            averaging: Averaging::Grads,
        }) = &self.replicas
        {
            if !self.grads_averaged {
                replicas::average_grads(&**collective, &self.params())?;
                self.grads_averaged = true;
            }
        }
        Ok(())
    }

    fn params(&self) -> Vec<&RfTensor> {
        self.slots.iter().map(|s| &s.param).collect()
    }

    /// Clears every parameter's gradient.
    pub fn zero_grad(&mut self) {
        self.grads_averaged = false;
        for s in &self.slots {
            s.param.var().zero_grad();
        }
    }

    /// One update of every parameter that has a gradient, at the learning rate
    /// the schedule gives this step; with clipping on, the gradients that are
    /// there are clipped together to the global norm. Data-parallel, the
    /// gradients are first averaged over the ranks ([`Optimizer::average_grads`]),
    /// or the parameters are averaged after every `every`-th step.
    pub fn step(&mut self) -> Result<()> {
        self.average_grads()?;
        self.update()?;
        self.grads_averaged = false;
        if let Some(Replicas {
            collective,
            averaging: Averaging::Values { every },
        }) = &self.replicas
        {
            if self.step.is_multiple_of(*every) {
                replicas::average_values(&**collective, &self.params())?;
            }
        }
        Ok(())
    }

    /// The update of [`Optimizer::step`], on this rank's gradients.
    fn update(&mut self) -> Result<()> {
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
