//! Running a network: forward over the live layers in topological order,
//! backward in reverse, with gradients routed as `gradplan` decided.
//!
//! The backend is an argument of every call and never stored, so a network
//! and its loss may run on different backends, and a context moves freely
//! between threads.

use crate::context::Context;
use crate::gradplan::{self, Src};
use crate::layers::{batched, fmt_shape, internal, Backward, Forward, Inputs, ParamGrads, Params};
use crate::network::Network;
use verjus_core::{scoped, Backend, DType, Error, Result, Tensor};

impl Network {
    /// Forward pass: `inputs[i]` is `[batch] + unit shape` of network input `i`
    /// on `be`'s device. The batch size is taken from the inputs; the context's
    /// buffers follow it. Results are read with [`Context::output`].
    pub fn compute_output(
        &self,
        be: &dyn Backend,
        ctx: &mut Context,
        inputs: &[&Tensor],
    ) -> Result<()> {
        scoped(be, || self.forward_here(be, ctx, inputs))
    }

    /// The body of [`Network::compute_output`], on the backend's thread.
    fn forward_here(&self, be: &dyn Backend, ctx: &mut Context, inputs: &[&Tensor]) -> Result<()> {
        let op = "Network::compute_output";
        if inputs.len() != self.n_inputs {
            return Err(Error::invalid(
                op,
                format!(
                    "expected {} input tensor(s) ({}), got {}",
                    self.n_inputs,
                    self.input_names(),
                    inputs.len()
                ),
            ));
        }
        let batch = match inputs.first() {
            Some(t) => *t
                .dims()
                .first()
                .ok_or_else(|| Error::shape(op, "input 0", "a batch axis", t.shape()))?,
            None => ctx.batch(),
        };
        for (i, t) in inputs.iter().enumerate() {
            let what = || format!("input {:?}", self.def().inputs[i].name);
            check_tensor(op, be, what, batch, &self.value_units[i], t)?;
        }
        ctx.prepare(self, be, batch, false)?;
        ctx.forward = None;
        for (i, t) in inputs.iter().enumerate() {
            verjus_core::ops::copy(be, t, &mut ctx.values[i])?;
        }
        let step = ctx.next_step();
        let streams = ctx.streams(step);
        let train = ctx.is_training();
        for (t, node) in self.nodes.iter().enumerate() {
            if !node.live {
                continue;
            }
            let stream = streams.at(t);
            let (before, after) = ctx.values.split_at_mut(self.n_inputs + t);
            let y = after
                .first_mut()
                .ok_or_else(|| internal("value buffer missing"))?;
            let scratch = ctx
                .scratch
                .get_mut(t)
                .ok_or_else(|| internal("scratch missing"))?;
            node.layer.forward(
                be,
                Forward {
                    x: Inputs {
                        ids: &node.inputs,
                        values: before,
                    },
                    y,
                    params: Params {
                        ids: &node.params,
                        all: &self.parameters,
                    },
                    scratch,
                    train,
                    stream,
                },
            )?;
        }
        ctx.forward = Some((train, step));
        Ok(())
    }

    /// Backward pass after [`Network::compute_output`]: `output_grads[i]` is the
    /// gradient of the loss wrt output `i` (`[batch] + unit shape`). Fills
    /// [`Context::param_grads`] (overwriting the previous pass; sums over the
    /// batch) and, when requested, [`Context::input_grad`].
    pub fn compute_gradients(
        &self,
        be: &dyn Backend,
        ctx: &mut Context,
        output_grads: &[&Tensor],
    ) -> Result<()> {
        scoped(be, || self.backward_here(be, ctx, output_grads))
    }

    /// The body of [`Network::compute_gradients`], on the backend's thread.
    fn backward_here(
        &self,
        be: &dyn Backend,
        ctx: &mut Context,
        output_grads: &[&Tensor],
    ) -> Result<()> {
        let op = "Network::compute_gradients";
        let Some((train, step)) = ctx.forward.filter(|_| ctx.net_id == self.id) else {
            return Err(Error::invalid(
                op,
                "no forward pass of this network is current in the context: call compute_output first",
            ));
        };
        if output_grads.len() != self.outputs.len() {
            return Err(Error::invalid(
                op,
                format!(
                    "expected {} output gradient(s), got {}",
                    self.outputs.len(),
                    output_grads.len()
                ),
            ));
        }
        let batch = ctx.batch();
        for (k, t) in output_grads.iter().enumerate() {
            let (name, v) = &self.outputs[k];
            let what = || format!("gradient of output {name:?}");
            check_tensor(op, be, what, batch, &self.value_units[*v], t)?;
        }
        ctx.prepare(self, be, batch, true)?;
        ctx.backward_done = false;
        let streams = ctx.streams(step);
        let Context {
            values,
            grads,
            param_edges,
            param_grads,
            scratch,
            staging,
            plan,
            ..
        } = ctx;
        let n_in = self.n_inputs;
        for (t, node) in self.nodes.iter().enumerate().rev() {
            if !plan.run[t] {
                continue;
            }
            let out = n_in + t;
            complete_value(be, plan, out, grads, output_grads)?;
            staging.clear();
            for dst in &plan.dx[t] {
                staging.push(match dst {
                    Some(s) => Some(Context::take(grads, *s)?),
                    None => None,
                });
            }
            let result = {
                let dy = match plan.dy[t] {
                    Some(Src::Slot(s)) => grads.get(s).and_then(Option::as_ref),
                    Some(Src::Output(k)) => output_grads.get(k).copied(),
                    None => None,
                }
                .ok_or_else(|| internal("output gradient missing"))?;
                node.layer.backward(
                    be,
                    Backward {
                        x: Inputs {
                            ids: &node.inputs,
                            values,
                        },
                        y: &values[out],
                        dy,
                        dx: staging,
                        params: Params {
                            ids: &node.params,
                            all: &self.parameters,
                        },
                        dparams: ParamGrads {
                            dst: &plan.dparam[t],
                            grads: param_grads,
                            edges: param_edges,
                        },
                        scratch: &mut scratch[t],
                        train,
                        stream: streams.at(t),
                    },
                )
            };
            for (dst, buf) in plan.dx[t].iter().zip(staging.drain(..)) {
                if let Some(s) = dst {
                    grads[*s] = buf;
                }
            }
            result?;
        }
        for v in 0..n_in {
            complete_value(be, plan, v, grads, output_grads)?;
        }
        for (p, sum) in &plan.param_sums {
            let acc = param_grads
                .get_mut(*p)
                .ok_or_else(|| internal("parameter gradient missing"))?;
            gradplan::sum(be, sum, param_edges, &[], acc)?;
        }
        ctx.backward_done = true;
        Ok(())
    }

    /// Inference: a fresh context (training off) over `inputs`, returning the outputs.
    pub fn transform(&self, be: &dyn Backend, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let batch = inputs
            .first()
            .and_then(|t| t.dims().first().copied())
            .unwrap_or(0);
        let mut ctx = self.new_context(be, batch)?;
        self.compute_output(be, &mut ctx, inputs)?;
        ctx.into_outputs(be)
    }

    fn input_names(&self) -> String {
        let names: Vec<&str> = self.def().inputs.iter().map(|i| i.name.as_str()).collect();
        names.join(", ")
    }
}

/// Sums the contributions to value `v`'s gradient, if it has several.
fn complete_value(
    be: &dyn Backend,
    plan: &gradplan::GradPlan,
    v: usize,
    grads: &mut [Option<Tensor>],
    output_grads: &[&Tensor],
) -> Result<()> {
    let (Some(sum), Some(slot)) = (&plan.value_sum[v], plan.value_slot[v]) else {
        return Ok(());
    };
    let mut acc = Context::take(grads, slot)?;
    let result = gradplan::sum(be, sum, grads, output_grads, &mut acc);
    grads[slot] = Some(acc);
    result
}

/// A caller's tensor must be f32, `[batch] + unit`, on the backend's device;
/// `what` names it in the error (built only then: this runs every step).
fn check_tensor(
    op: &str,
    be: &dyn Backend,
    what: impl Fn() -> String,
    batch: usize,
    unit: &[usize],
    t: &Tensor,
) -> Result<()> {
    let dims = t.dims();
    if dims.first() != Some(&batch) || &dims[1..] != unit {
        return Err(Error::shape(
            op,
            what(),
            format!(
                "{} (batch {batch}, unit shape {})",
                fmt_shape(&batched(batch, unit)),
                fmt_shape(unit)
            ),
            t.shape(),
        ));
    }
    if t.device() != be.device() {
        return Err(Error::WrongDevice {
            op: op.into(),
            what: what(),
            expected: be.device(),
            actual: t.device(),
        });
    }
    if t.dtype() != DType::F32 {
        return Err(Error::DTypeMismatch {
            op: op.into(),
            what: what(),
            expected: DType::F32,
            actual: t.dtype(),
        });
    }
    Ok(())
}
