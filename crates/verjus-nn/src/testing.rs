//! A host backend for tests that implements only what the solver uses, straight
//! from the equations in `verjus_core::ops`' docs.
//!
//! It lets the solver's own logic (batch normalisation, clipping, schedules,
//! state keyed by name) be tested independently of the native kernels; every
//! solver test also runs on the native backend.

use verjus_core::ops::{AdamHyper, ConcatPlan, ReduceOp, ReducePlan, SgdHyper, UnaryOp};
use verjus_core::{Backend, DType, Device, Error, Result, Shape, Tensor};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Reference;

impl Backend for Reference {
    fn name(&self) -> &str {
        "reference"
    }
    fn device(&self) -> Device {
        Device::Cpu
    }
    fn alloc_zeroed(&self, shape: &Shape, dtype: DType) -> Result<Tensor> {
        Tensor::zeros_host(shape, dtype)
    }
    fn upload(&self, host: &Tensor) -> Result<Tensor> {
        host.try_clone_host()
    }
    fn download(&self, t: &Tensor) -> Result<Tensor> {
        t.try_clone_host()
    }
    fn unary(&self, op: UnaryOp, x: &Tensor, y: &mut Tensor) -> Result<()> {
        let x = x.as_slice::<f32>()?;
        for (y, &x) in y.as_mut_slice::<f32>()?.iter_mut().zip(x) {
            *y = op.apply(x);
        }
        Ok(())
    }
    fn reduce(&self, plan: &ReducePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        if plan.op != ReduceOp::Sum || y.numel() != 1 {
            return Err(Error::unsupported("partial reduce", self.name()));
        }
        let sum: f64 = x.as_slice::<f32>()?.iter().map(|&v| f64::from(v)).sum();
        y.as_mut_slice::<f32>()?[0] = sum as f32;
        Ok(())
    }
    fn concat(&self, plan: &ConcatPlan, parts: &[&Tensor], y: &mut Tensor) -> Result<()> {
        let y = y.as_mut_slice::<f32>()?;
        let mut at = 0;
        for o in 0..plan.outer {
            for (p, &size) in parts.iter().zip(&plan.sizes) {
                let n = size * plan.inner;
                y[at..at + n].copy_from_slice(&p.as_slice::<f32>()?[o * n..(o + 1) * n]);
                at += n;
            }
        }
        Ok(())
    }
    fn sgd_update(
        &self,
        hp: &SgdHyper,
        param: &mut Tensor,
        grad: &Tensor,
        velocity: Option<&mut Tensor>,
    ) -> Result<()> {
        let grad = grad.as_slice::<f32>()?;
        let mut velocity = velocity;
        for (i, p) in param.as_mut_slice::<f32>()?.iter_mut().enumerate() {
            let g = hp.grad_scale * grad[i] + hp.weight_decay * *p;
            let step = match velocity.as_deref_mut() {
                Some(v) if hp.momentum != 0.0 => {
                    let v = &mut v.as_mut_slice::<f32>()?[i];
                    *v = if hp.first_step {
                        g
                    } else {
                        hp.momentum * *v + (1.0 - hp.dampening) * g
                    };
                    if hp.nesterov {
                        g + hp.momentum * *v
                    } else {
                        *v
                    }
                }
                _ => g,
            };
            *p -= hp.lr * step;
        }
        Ok(())
    }
    fn adam_update(
        &self,
        hp: &AdamHyper,
        param: &mut Tensor,
        grad: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
    ) -> Result<()> {
        let (grad, m, v) = (
            grad.as_slice::<f32>()?,
            m.as_mut_slice::<f32>()?,
            v.as_mut_slice::<f32>()?,
        );
        let t = i32::try_from(hp.step).unwrap_or(i32::MAX);
        let (c1, c2) = (1.0 - hp.beta1.powi(t), 1.0 - hp.beta2.powi(t));
        for (i, p) in param.as_mut_slice::<f32>()?.iter_mut().enumerate() {
            let mut g = hp.grad_scale * grad[i];
            if hp.decoupled {
                *p -= hp.lr * hp.weight_decay * *p;
            } else {
                g += hp.weight_decay * *p;
            }
            m[i] = hp.beta1 * m[i] + (1.0 - hp.beta1) * g;
            v[i] = hp.beta2 * v[i] + (1.0 - hp.beta2) * g * g;
            *p -= hp.lr * (m[i] / c1) / ((v[i] / c2).sqrt() + hp.eps);
        }
        Ok(())
    }
}
