//! One invocation's state: the dynamic half of Juice's new layer architecture.
//!
//! A [`Context`] holds everything that depends on the batch: the activation of
//! every value, gradient buffers, parameter gradients, layer scratch, the
//! training flag and the dropout stream, all on one device. The network stays
//! immutable, so many contexts (threads, batch sizes) can use one network.
//!
//! Buffers are allocated when the context is made and again only when the
//! batch size (taken from the inputs) or the input-gradient setting changes;
//! a training step allocates no tensors. Gradient buffers are allocated on the
//! first backward pass, so an inference-only context never holds them.
//!
//! Dropout draws element `i` of layer `t` at step `s` from the Philox stream
//! with key `mix(seed, t)` and block offset `s * 2^32`: every training forward
//! advances `s` (a fresh mask), backward reuses forward's `s` (the same mask),
//! and one draw (at most 2^34 elements, the largest tensor) never reaches the
//! next step's blocks.

use crate::gradplan::GradPlan;
use crate::layers::{batched, internal, Stream};
use crate::network::Network;
use verjus_core::ops;
use verjus_core::{Backend, DType, Device, Error, Result, Shape, Tensor};

/// Per-invocation state. See the module docs.
#[derive(Debug)]
pub struct Context {
    pub(crate) net_id: u64,
    device: Device,
    batch: usize,
    train: bool,
    input_grads: bool,
    seed: u64,
    step: u64,
    /// The training flag and step of the last forward pass, if its values are current.
    pub(crate) forward: Option<(bool, u64)>,
    pub(crate) backward_done: bool,
    /// Value ids of the network's outputs.
    outputs: Vec<usize>,
    pub(crate) values: Vec<Tensor>,
    /// Value-gradient store (see `gradplan`); empty until the first backward.
    pub(crate) grads: Vec<Option<Tensor>>,
    pub(crate) param_edges: Vec<Option<Tensor>>,
    pub(crate) param_grads: Vec<Tensor>,
    pub(crate) scratch: Vec<Vec<Tensor>>,
    /// Reused holder of one layer's input-gradient buffers during its backward.
    pub(crate) staging: Vec<Option<Tensor>>,
    pub(crate) plan: GradPlan,
    grads_allocated: bool,
}

impl Network {
    /// A context for batches of `batch` examples on `be`'s device (training off).
    pub fn new_context(&self, be: &dyn Backend, batch: usize) -> Result<Context> {
        let plan = GradPlan::new(self, false);
        let param_grads = self
            .parameters
            .iter()
            .map(|p| ops::zeros(be, p.value.shape(), DType::F32))
            .collect::<Result<Vec<_>>>()?;
        let max_inputs = self.nodes.iter().map(|n| n.inputs.len()).max().unwrap_or(0);
        let mut ctx = Context {
            net_id: self.id,
            device: be.device(),
            batch,
            train: false,
            input_grads: false,
            seed: mix(self.seed, 0x5eed),
            step: 0,
            forward: None,
            backward_done: false,
            outputs: self.outputs.iter().map(|&(_, v)| v).collect(),
            values: Vec::new(),
            grads: Vec::new(),
            param_edges: Vec::new(),
            param_grads,
            scratch: Vec::new(),
            staging: Vec::with_capacity(max_inputs),
            plan,
            grads_allocated: false,
        };
        ctx.values = ctx.alloc_values(self, be, batch)?;
        ctx.scratch = ctx.alloc_scratch(self, be, batch)?;
        Ok(ctx)
    }
}

impl Context {
    /// The batch size the buffers are allocated for.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Training mode: dropout is active. Off by default.
    pub fn set_train(&mut self, train: bool) {
        self.train = train;
    }

    /// Whether the context is in training mode.
    pub fn is_training(&self) -> bool {
        self.train
    }

    /// Whether backward also computes the gradients of the network inputs
    /// ([`Context::input_grad`]). Off by default: it costs work a solver does
    /// not need (for a first Linear layer, a whole GEMM).
    pub fn set_input_grads(&mut self, on: bool) {
        self.input_grads = on;
    }

    /// Reseeds the dropout stream and restarts its step counter.
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
        self.step = 0;
    }

    /// Number of training forward passes so far (the dropout step).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Moves the dropout stream to `step` (the next training forward uses
    /// `step + 1`): a [`crate::Trainer`] keeps one position across all its
    /// contexts, so a resumed run draws the masks an uninterrupted one would.
    pub fn set_step(&mut self, step: u64) {
        self.step = step;
    }

    /// Output `i` of the last forward pass, `[batch] + unit shape`.
    ///
    /// # Panics
    /// When `i` is not below the number of network outputs (like slice indexing).
    pub fn output(&self, i: usize) -> &Tensor {
        &self.values[self.outputs[i]]
    }

    /// Parameter gradients of the last backward pass, aligned with
    /// [`Network::parameters`]. Each is the **sum** over the batch (and over
    /// all users of a shared parameter); a solver divides by the actual batch
    /// size. Zero before the first backward pass and for parameters that feed
    /// no output.
    pub fn param_grads(&self) -> &[Tensor] {
        &self.param_grads
    }

    /// The gradient of network input `i` from the last backward pass, when
    /// input gradients were requested with [`Context::set_input_grads`].
    pub fn input_grad(&self, i: usize) -> Option<&Tensor> {
        if !self.backward_done || !self.plan.input_grads {
            return None;
        }
        let slot = (*self.plan.value_slot.get(i)?)?;
        self.grads.get(slot)?.as_ref()
    }

    /// The dropout streams of `step`.
    pub(crate) fn streams(&self, step: u64) -> Streams {
        Streams {
            seed: self.seed,
            step,
        }
    }

    /// Advances the dropout step when training; returns the step to use.
    pub(crate) fn next_step(&mut self) -> u64 {
        if self.train {
            self.step = self.step.wrapping_add(1);
        }
        self.step
    }

    /// Makes the buffers fit `batch` and the current settings; allocates only
    /// when something changed, and replaces nothing unless all allocations succeed.
    pub(crate) fn prepare(
        &mut self,
        net: &Network,
        be: &dyn Backend,
        batch: usize,
        backward: bool,
    ) -> Result<()> {
        if self.net_id != net.id {
            return Err(Error::invalid(
                "Network",
                "this context was made by another network",
            ));
        }
        if self.device != be.device() {
            return Err(Error::WrongDevice {
                op: "Network".into(),
                what: "context".into(),
                expected: be.device(),
                actual: self.device,
            });
        }
        let replan = self.plan.input_grads != self.input_grads;
        let resize = batch != self.batch;
        if !replan && !resize && (self.grads_allocated || !backward) {
            return Ok(());
        }
        if !replan {
            return self.reallocate(net, be, batch, backward, false, resize);
        }
        let old_plan = std::mem::replace(&mut self.plan, GradPlan::new(net, self.input_grads));
        let result = self.reallocate(net, be, batch, backward, true, resize);
        if result.is_err() {
            self.plan = old_plan;
        }
        result
    }

    fn reallocate(
        &mut self,
        net: &Network,
        be: &dyn Backend,
        batch: usize,
        backward: bool,
        replan: bool,
        resize: bool,
    ) -> Result<()> {
        let values = if resize {
            Some(self.alloc_values(net, be, batch)?)
        } else {
            None
        };
        let scratch = if resize || replan {
            Some(self.alloc_scratch(net, be, batch)?)
        } else {
            None
        };
        let grads =
            if (backward || self.grads_allocated) && (resize || replan || !self.grads_allocated) {
                Some(self.alloc_grads(be, batch)?)
            } else {
                None
            };
        if let Some(v) = values {
            self.values = v;
            self.batch = batch;
            self.forward = None;
            self.backward_done = false;
        }
        if let Some(s) = scratch {
            self.scratch = s;
        }
        if let Some((g, e)) = grads {
            self.grads = g;
            self.param_edges = e;
            self.grads_allocated = true;
            self.backward_done = false;
        }
        Ok(())
    }

    fn alloc_values(&self, net: &Network, be: &dyn Backend, batch: usize) -> Result<Vec<Tensor>> {
        let n_in = net.n_inputs;
        net.value_units
            .iter()
            .enumerate()
            .map(|(v, unit)| {
                let live = v < n_in || net.nodes.get(v - n_in).is_some_and(|n| n.live);
                let dims = if live { batched(batch, unit) } else { vec![0] };
                ops::zeros(be, &Shape::new(dims)?, DType::F32)
            })
            .collect()
    }

    fn alloc_scratch(
        &self,
        net: &Network,
        be: &dyn Backend,
        batch: usize,
    ) -> Result<Vec<Vec<Tensor>>> {
        net.nodes
            .iter()
            .enumerate()
            .map(|(t, node)| {
                if !node.live {
                    return Ok(Vec::new());
                }
                node.layer
                    .scratch(&self.plan.needs_dx(t))
                    .iter()
                    .map(|s| {
                        let mut buf = ops::zeros(be, &Shape::new(s.dims(batch))?, DType::F32)?;
                        if s.fill != 0.0 {
                            ops::fill(be, &mut buf, f64::from(s.fill))?;
                        }
                        Ok(buf)
                    })
                    .collect()
            })
            .collect()
    }

    fn alloc_grads(&self, be: &dyn Backend, batch: usize) -> Result<GradStores> {
        let grads = self
            .plan
            .slots
            .iter()
            .map(|unit| {
                Ok(Some(ops::zeros(
                    be,
                    &Shape::new(batched(batch, unit))?,
                    DType::F32,
                )?))
            })
            .collect::<Result<Vec<_>>>()?;
        let edges = self
            .plan
            .param_edges
            .iter()
            .map(|dims| {
                Ok(Some(ops::zeros(
                    be,
                    &Shape::new(dims.clone())?,
                    DType::F32,
                )?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((grads, edges))
    }

    /// Takes the tensor out of gradient slot `s` (put back after use).
    pub(crate) fn take(store: &mut [Option<Tensor>], s: usize) -> Result<Tensor> {
        store
            .get_mut(s)
            .and_then(Option::take)
            .ok_or_else(|| internal("gradient buffer missing"))
    }

    /// The outputs, moved out of the context.
    pub(crate) fn into_outputs(self, be: &dyn Backend) -> Result<Vec<Tensor>> {
        let mut values: Vec<Option<Tensor>> = self.values.into_iter().map(Some).collect();
        let mut out: Vec<Tensor> = Vec::with_capacity(self.outputs.len());
        for (k, &v) in self.outputs.iter().enumerate() {
            let t = match values.get_mut(v).and_then(Option::take) {
                Some(t) => t,
                None => {
                    // The same value listed twice: copy the first.
                    let first = self.outputs[..k]
                        .iter()
                        .position(|&w| w == v)
                        .ok_or_else(|| internal("output value missing"))?;
                    let mut t = ops::zeros(be, out[first].shape(), DType::F32)?;
                    ops::copy(be, &out[first], &mut t)?;
                    t
                }
            };
            out.push(t);
        }
        Ok(out)
    }
}

/// The dropout streams of one step, one per node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Streams {
    seed: u64,
    step: u64,
}

impl Streams {
    /// The stream of node `t`.
    pub(crate) fn at(self, t: usize) -> Stream {
        Stream {
            seed: mix(self.seed, t as u64 + 1),
            offset: self.step.wrapping_mul(1 << 32),
        }
    }
}

/// The value-gradient store and the parameter-edge store, allocated together
/// so that both or neither replace the old ones.
type GradStores = (Vec<Option<Tensor>>, Vec<Option<Tensor>>);

/// SplitMix64 finaliser of `a ^ b`: decorrelated stream keys from one seed.
fn mix(a: u64, b: u64) -> u64 {
    let mut z = (a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
