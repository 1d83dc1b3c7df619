//! Keeping data-parallel replicas of RF parameters equal: gradient averaging
//! before each update, or parameter averaging every few steps (RETURNN's
//! `torch_distributed` `reduce_type` "grad" and "param").
//!
//! RF gradients are of an already normalised loss (a batch of 1), so the ranks'
//! gradients are averaged (summed, then divided by the world size), as
//! RETURNN's torch engine does. Every rank must take part in the same
//! collectives, so the set of parameters with a gradient is agreed on first: a
//! parameter that has one on some rank takes part with zeros where it has none
//! (PyTorch DDP's `find_unused_parameters`), and one that has none anywhere is
//! skipped by every rank's update.

use crate::RfTensor;
use verjus_core::ops::UnaryOp;
use verjus_core::{ops, Backend, Collective, CollectiveRef, DType, ReduceOp, Result, Tensor};

/// How an optimizer keeps its parameters equal across ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Averaging {
    /// Average the gradients before every update.
    Grads,
    /// Update locally; average the parameters after every `every`-th update.
    Values { every: u64 },
}

/// The ranks an optimizer's parameters are replicated on, and how.
#[derive(Clone, Debug)]
pub struct Replicas {
    pub collective: CollectiveRef,
    pub averaging: Averaging,
}

/// Averages the gradients of `params` over the ranks of `collective`, in place.
pub fn average_grads(collective: &dyn Collective, params: &[&RfTensor]) -> Result<()> {
    let Some(be) = params.first().map(|p| p.backend().clone()) else {
        return Ok(());
    };
    let mut present: Vec<f64> = params
        .iter()
        .map(|p| f64::from(u8::from(p.var().grad().is_some())))
        .collect();
    collective.all_reduce_scalars(&mut present, ReduceOp::Max)?;
    let mut live = Vec::new();
    let mut grads = Vec::new();
    for (p, &anywhere) in params.iter().zip(&present) {
        if anywhere == 0.0 {
            continue;
        }
        let var = p.var();
        grads.push(match var.grad() {
            Some(g) => copy_of(&*be, &g)?,
            None => ops::zeros(&*be, &var.shape(), DType::F32)?,
        });
        live.push(p);
    }
    let mut views: Vec<&mut Tensor> = grads.iter_mut().collect();
    collective.all_reduce(&*be, &mut views, ReduceOp::Sum)?;
    let scale = UnaryOp::Scale(1.0 / collective.world() as f32);
    for (p, sum) in live.into_iter().zip(&grads) {
        let mut mean = ops::output(&*be, sum.shape(), DType::F32)?;
        ops::unary(&*be, scale, sum, &mut mean)?;
        p.var().set_grad(mean)?;
    }
    Ok(())
}

/// Replaces the values of `params` by their mean over the ranks.
pub fn average_values(collective: &dyn Collective, params: &[&RfTensor]) -> Result<()> {
    let scale = UnaryOp::Scale(1.0 / collective.world() as f32);
    exchange_values(params, |be, values| {
        let mut views: Vec<&mut Tensor> = values.iter_mut().collect();
        collective.all_reduce(be, &mut views, ReduceOp::Sum)?;
        for v in values.iter_mut() {
            let mut mean = ops::output(be, v.shape(), DType::F32)?;
            ops::unary(be, scale, v, &mut mean)?;
            *v = mean;
        }
        Ok(())
    })
}

/// Gives every rank rank 0's values of `params`.
pub fn broadcast_values(collective: &dyn Collective, params: &[&RfTensor]) -> Result<()> {
    exchange_values(params, |be, values| {
        let mut views: Vec<&mut Tensor> = values.iter_mut().collect();
        collective.broadcast(be, &mut views, 0)
    })
}

/// Runs `f` on copies of the values of `params` and sets them back.
fn exchange_values(
    params: &[&RfTensor],
    f: impl FnOnce(&dyn Backend, &mut [Tensor]) -> Result<()>,
) -> Result<()> {
    let Some(be) = params.first().map(|p| p.backend().clone()) else {
        return Ok(());
    };
    let mut values = params
        .iter()
        .map(|p| copy_of(&*be, &p.var().value()))
        .collect::<Result<Vec<_>>>()?;
    f(&*be, &mut values)?;
    for (p, v) in params.iter().zip(values) {
        p.var().set_value(v)?;
    }
    Ok(())
}

/// A new tensor with `t`'s elements (for the collective to overwrite).
fn copy_of(be: &dyn Backend, t: &Tensor) -> Result<Tensor> {
    let mut out = ops::output(be, t.shape(), t.dtype())?;
    ops::copy(be, t, &mut out)?;
    Ok(out)
}
