//! Running a network: forward over the live layers in topological order,
//! backward in reverse, with gradients routed as `gradplan` decided.
//!
//! The backend is an argument of every call and never stored, so a network
//! and its loss may run on different backends, and a context moves freely
//! between threads.

use crate::context::{rows, Context};
use crate::gradplan::{self, Src};
use crate::layers::{
    batched, fmt_shape, internal, Backward, Forward, Inputs, ParamGrads, Params, Seq,
};
use crate::network::Network;
use crate::seqcheck;
use verjus_core::{scoped, Backend, DType, Error, Result, Tensor};

impl Network {
    /// Forward pass: `inputs[i]` is `[batch] + unit shape` of network input `i`
    /// (`[batch, T] + unit shape` for a sequence input, batch-major and padded
    /// to `T` frames) on `be`'s device. The batch size and time length are
    /// taken from the inputs; the context's buffers follow them. Every
    /// sequence has all `T` frames; see [`Network::compute_output_with_lengths`].
    /// Results are read with [`Context::output`].
    pub fn compute_output(
        &self,
        be: &dyn Backend,
        ctx: &mut Context,
        inputs: &[&Tensor],
    ) -> Result<()> {
        scoped(be, || self.forward_here(be, ctx, inputs, None))
    }

    /// [`Network::compute_output`] with each example's length: int32
    /// `[batch]`, each in `0..=T` (host or device). Frames at or past an
    /// example's length are never read.
    pub fn compute_output_with_lengths(
        &self,
        be: &dyn Backend,
        ctx: &mut Context,
        inputs: &[&Tensor],
        lengths: Option<&Tensor>,
    ) -> Result<()> {
        scoped(be, || self.forward_here(be, ctx, inputs, lengths))
    }

    /// The body of [`Network::compute_output`], on the backend's thread.
    fn forward_here(
        &self,
        be: &dyn Backend,
        ctx: &mut Context,
        inputs: &[&Tensor],
        lengths: Option<&Tensor>,
    ) -> Result<()> {
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
        let time = self.time_of(op, inputs)?;
        for (i, t) in inputs.iter().enumerate() {
            let def = &self.def().inputs[i];
            let what = || format!("input {:?}", def.name);
            let mut dims = vec![batch];
            dims.extend(def.sequence.then_some(time));
            dims.extend_from_slice(&def.shape);
            let expected = || {
                if def.sequence {
                    format!(
                        "{} (batch {batch}, padded length {time}, frame shape {})",
                        fmt_shape(&dims),
                        fmt_shape(&def.shape)
                    )
                } else {
                    format!(
                        "{} (batch {batch}, unit shape {})",
                        fmt_shape(&dims),
                        fmt_shape(&def.shape)
                    )
                }
            };
            check_tensor(op, be, what, &dims, expected, def.dtype.dtype(), t)?;
        }
        if lengths.is_some() && !self.takes_sequences() {
            return Err(Error::invalid(
                op,
                "lengths were given, but the network has no sequence input",
            ));
        }
        ctx.prepare(self, be, (batch, time), false)?;
        ctx.forward = None;
        seqcheck::set_lengths(be, ctx, lengths, batch, time)?;
        for (i, t) in inputs.iter().enumerate() {
            if let Some((vocab, layer)) = &self.vocab[i] {
                let name = &self.def().inputs[i].name;
                seqcheck::check_tokens(be, name, t, &ctx.lengths_host, *vocab, layer)?;
            }
        }
        for (i, t) in inputs.iter().enumerate() {
            let dst = &mut ctx.values[i];
            if self.value_seq[i] {
                // Batch-major [B, T, ..] into time-major [T*B, ..].
                let flat = dst.dims().to_vec();
                let mut tb = vec![time, batch];
                tb.extend_from_slice(&self.value_units[i]);
                dst.reshape_in_place(tb)?;
                let mut perm: Vec<usize> = (0..t.dims().len()).collect();
                perm.swap(0, 1);
                let result = verjus_core::ops::permute(be, t, &perm, dst);
                dst.reshape_in_place(flat)?;
                result?;
                seqcheck::clear_padding(be, dst, &ctx.lengths_host)?;
            } else {
                verjus_core::ops::copy(be, t, dst)?;
            }
        }
        let step = ctx.next_step();
        let streams = ctx.streams(step);
        let train = ctx.is_training();
        let precision = ctx.precision();
        let Context {
            values,
            scratch,
            lengths,
            lengths_host,
            carry,
            ..
        } = &mut *ctx;
        let seq = self.takes_sequences().then_some(Seq {
            time,
            batch,
            lengths,
            host: lengths_host,
            carry: *carry,
        });
        for (t, node) in self.nodes.iter().enumerate() {
            if !node.live {
                continue;
            }
            let stream = streams.at(t);
            let (before, after) = values.split_at_mut(self.n_inputs + t);
            let y = after
                .first_mut()
                .ok_or_else(|| internal("value buffer missing"))?;
            let scratch = scratch
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
                    params: Params::new(&node.params, &self.parameters),
                    scratch,
                    train,
                    stream,
                    seq,
                    precision,
                },
            )?;
        }
        ctx.forward = Some((train, step));
        Ok(())
    }

    /// The padded time length of the sequence inputs (which must agree), or 0.
    fn time_of(&self, op: &str, inputs: &[&Tensor]) -> Result<usize> {
        let mut time = None;
        for (i, t) in inputs.iter().enumerate() {
            let def = &self.def().inputs[i];
            if !def.sequence {
                continue;
            }
            let Some(&ti) = t.dims().get(1) else {
                return Err(Error::shape(
                    op,
                    format!("input {:?}", def.name),
                    "[batch, T, ...] (a sequence input)",
                    t.shape(),
                ));
            };
            match time {
                Some(known) if known != ti => {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "the sequence inputs differ in padded length: {known} and {ti} (input {:?})",
                            def.name
                        ),
                    ))
                }
                _ => time = Some(ti),
            }
        }
        match time {
            Some(0) => Err(Error::invalid(
                op,
                "the padded length T is 0: a sequence batch needs at least one frame",
            )),
            Some(t) => Ok(t),
            None => Ok(0),
        }
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
        let (batch, time) = (ctx.batch(), ctx.time());
        for (k, t) in output_grads.iter().enumerate() {
            let (name, v) = &self.outputs[k];
            let what = || format!("gradient of output {name:?}");
            let unit = &self.value_units[*v];
            let dims = batched(rows(self, *v, batch, time), unit);
            let expected = || {
                if self.value_seq[*v] {
                    format!(
                        "{} (time-major: {time} frames of batch {batch}, unit shape {})",
                        fmt_shape(&dims),
                        fmt_shape(unit)
                    )
                } else {
                    format!(
                        "{} (batch {batch}, unit shape {})",
                        fmt_shape(&dims),
                        fmt_shape(unit)
                    )
                }
            };
            check_tensor(op, be, what, &dims, expected, DType::F32, t)?;
        }
        ctx.prepare(self, be, (batch, time), true)?;
        ctx.backward_done = false;
        let precision = ctx.precision();
        let streams = ctx.streams(step);
        let Context {
            values,
            grads,
            param_edges,
            param_grads,
            scratch,
            staging,
            plan,
            lengths,
            lengths_host,
            carry,
            ..
        } = ctx;
        let seq = self.takes_sequences().then_some(Seq {
            time,
            batch,
            lengths,
            host: lengths_host,
            carry: *carry,
        });
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
                        params: Params::new(&node.params, &self.parameters),
                        dparams: ParamGrads {
                            dst: &plan.dparam[t],
                            grads: param_grads,
                            edges: param_edges,
                        },
                        scratch: &mut scratch[t],
                        train,
                        stream: streams.at(t),
                        seq,
                        precision,
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
        self.transform_with_lengths(be, inputs, None)
    }

    /// [`Network::transform`] with each example's length (see
    /// [`Network::compute_output_with_lengths`]); per-frame outputs are 0 at
    /// the frames past each example's length.
    pub fn transform_with_lengths(
        &self,
        be: &dyn Backend,
        inputs: &[&Tensor],
        lengths: Option<&Tensor>,
    ) -> Result<Vec<Tensor>> {
        let mut ctx = self.new_context(be, batch_of_inputs(inputs))?;
        self.infer_into(be, &mut ctx, inputs, lengths)?;
        ctx.into_outputs(be)
    }

    /// The forward pass of [`Network::transform_with_lengths`] into `ctx`
    /// (an inference-mode context of any batch size): its outputs are then
    /// `ctx`'s, 0 past each example's length.
    pub(crate) fn infer_into(
        &self,
        be: &dyn Backend,
        ctx: &mut Context,
        inputs: &[&Tensor],
        lengths: Option<&Tensor>,
    ) -> Result<()> {
        self.compute_output_with_lengths(be, ctx, inputs, lengths)?;
        if lengths.is_some() {
            ctx.clear_output_padding(be, self)?;
        }
        Ok(())
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

/// A caller's tensor must have `dims` and `dtype`, on the backend's device;
/// `what` and `expected` describe it in the error (built only then: this runs
/// every step).
fn check_tensor(
    op: &str,
    be: &dyn Backend,
    what: impl Fn() -> String,
    dims: &[usize],
    expected: impl Fn() -> String,
    dtype: DType,
    t: &Tensor,
) -> Result<()> {
    if t.dims() != dims {
        return Err(Error::shape(op, what(), expected(), t.shape()));
    }
    if t.device() != be.device() {
        return Err(Error::WrongDevice {
            op: op.into(),
            what: what(),
            expected: be.device(),
            actual: t.device(),
        });
    }
    if t.dtype() != dtype {
        return Err(Error::DTypeMismatch {
            op: op.into(),
            what: what(),
            expected: dtype,
            actual: t.dtype(),
        });
    }
    Ok(())
}

/// The batch size of a call's `inputs` (their first axis; 0 without inputs).
pub(crate) fn batch_of_inputs(inputs: &[&Tensor]) -> usize {
    inputs
        .first()
        .and_then(|t| t.dims().first().copied())
        .unwrap_or(0)
}
