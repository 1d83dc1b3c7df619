//! [`Optimizer`]: SGD (momentum, Nesterov, weight decay) and Adam/AdamW
//! over RF parameters, with the fused update ops of `verjus_core::ops`.
//!
//! The optimizer keeps its own state per parameter (velocity, moments) in
//! the order the parameters were given; [`Optimizer::step`] applies one
//! update from each parameter's accumulated gradient, in place (graphs
//! recorded before keep the old values), and skips parameters without one.

use crate::{fmt_dims, RfTensor};
use verjus_core::ops::{self, AdamHyper, SgdHyper};
use verjus_core::{DType, Error, Result, Tensor};

/// The update rule and its hyperparameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    Sgd {
        lr: f32,
        momentum: f32,
        nesterov: bool,
        weight_decay: f32,
    },
    Adam {
        lr: f32,
        betas: (f32, f32),
        eps: f32,
        weight_decay: f32,
        decoupled: bool,
    },
}

/// A rule's settings as the fused update kernels take them, for one step.
enum Hyper {
    Sgd(SgdHyper),
    Adam(AdamHyper),
}

impl Rule {
    /// The kernels' hyperparameters for step `step` (counting from 1).
    fn hyper(&self, step: u64) -> Hyper {
        match *self {
            Rule::Sgd {
                lr,
                momentum,
                nesterov,
                weight_decay,
            } => Hyper::Sgd(SgdHyper {
                lr,
                momentum,
                dampening: 0.0,
                nesterov,
                weight_decay,
                grad_scale: 1.0,
                first_step: step == 1,
            }),
            Rule::Adam {
                lr,
                betas: (beta1, beta2),
                eps,
                weight_decay,
                decoupled,
            } => Hyper::Adam(AdamHyper {
                lr,
                beta1,
                beta2,
                eps,
                weight_decay,
                decoupled,
                step,
                grad_scale: 1.0,
            }),
        }
    }

    /// Checks the hyperparameters (the trainer's checks: a NaN learning rate
    /// would make every parameter NaN at the first step); errors name the field.
    fn validate(&self) -> Result<()> {
        match self.hyper(1) {
            Hyper::Sgd(hp) => hp.validate("SGD"),
            Hyper::Adam(hp) => hp.validate(if hp.decoupled { "AdamW" } else { "Adam" }),
        }
    }
}

/// A parameter's optimizer state.
struct Slot {
    param: RfTensor,
    /// SGD's velocity, or Adam's first and second moments.
    buffers: Vec<Tensor>,
}

/// An optimizer over a fixed list of parameters.
pub struct Optimizer {
    rule: Rule,
    slots: Vec<Slot>,
    step: u64,
}

impl Optimizer {
    /// An optimizer for `params` (float32 leaves that require gradients).
    pub fn new(params: Vec<RfTensor>, rule: Rule) -> Result<Optimizer> {
        rule.validate()?;
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
            let count = match rule {
                Rule::Sgd { momentum, .. } if momentum != 0.0 => 1,
                Rule::Sgd { .. } => 0,
                Rule::Adam { .. } => 2,
            };
            let be = param.backend().clone();
            let buffers = (0..count)
                .map(|_| ops::zeros(&*be, &var.shape(), DType::F32))
                .collect::<Result<_>>()?;
            slots.push(Slot { param, buffers });
        }
        Ok(Optimizer {
            rule,
            slots,
            step: 0,
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

    /// One update of every parameter that has a gradient.
    pub fn step(&mut self) -> Result<()> {
        self.step += 1;
        let (rule, step) = (self.rule, self.step);
        for slot in &mut self.slots {
            let var = slot.param.var().clone();
            let Some(grad) = var.grad() else { continue };
            let be = var.backend().clone();
            let buffers = &mut slot.buffers;
            var.update_value(|p| match rule.hyper(step) {
                Hyper::Sgd(hp) => ops::sgd_update(&*be, &hp, p, &grad, buffers.first_mut()),
                Hyper::Adam(hp) => {
                    let [m, v] = buffers.as_mut_slice() else {
                        return Err(Error::invalid("adam", "missing moment buffers"));
                    };
                    ops::adam_update(&*be, &hp, p, &grad, m, v)
                }
            })?;
        }
        Ok(())
    }
}
