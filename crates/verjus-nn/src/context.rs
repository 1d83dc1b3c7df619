//! One invocation's state: the dynamic half of Juice's new layer architecture.
//!
//! A [`Context`] holds everything that depends on the batch: the activation of
//! every value, gradient buffers, parameter gradients, layer scratch, the
//! training flag and the dropout stream, all on one device. The network stays
//! immutable, so many contexts (threads, batch sizes) can use one network.
//!
//! Buffers are allocated when the context is made; when the batch size or
//! the time length (both taken from each call's inputs) changes, host buffers
//! are resized within their capacity, so they grow to the largest call and
//! are reused for smaller ones: once that has run, a training step allocates
//! no tensors (on a device backend they are replaced when the size changes).
//! Gradient buffers are allocated on the first backward pass, so an
//! inference-only context never holds them.
//!
//! Dropout draws element `i` of layer `t` at step `s` from the Philox stream
//! with key `mix(seed, t)` and block offset `s * 2^32`: every training forward
//! advances `s` (a fresh mask), backward reuses forward's `s` (the same mask),
//! and one draw (at most 2^34 elements, the largest tensor) never reaches the
//! next step's blocks.

use crate::gradplan::GradPlan;
use crate::layers::{batched, internal, Stream};
use crate::network::Network;
use crate::seqcheck;
use verjus_core::ops;
use verjus_core::{Backend, DType, Device, Error, HostData, Result, Shape, Storage, Tensor};

/// Per-invocation state. See the module docs.
#[derive(Debug)]
pub struct Context {
    pub(crate) net_id: u64,
    device: Device,
    batch: usize,
    /// The padded time length of the last call (0 for a network without sequences).
    time: usize,
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
    /// Each example's length (int32 `[batch]`, on the device and on the host).
    pub(crate) lengths: Tensor,
    pub(crate) lengths_host: Vec<i32>,
    /// Whether recurrent layers start from the state the last call ended in.
    pub(crate) carry: bool,
    /// Mixed precision: the reduced float products round their operands to.
    precision: Option<DType>,
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
        let time = usize::from(self.takes_sequences());
        let mut ctx = Context {
            net_id: self.id,
            device: be.device(),
            batch,
            time,
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
            lengths: ops::zeros(be, &Shape::new([batch])?, DType::I32)?,
            lengths_host: vec![time as i32; batch],
            carry: false,
            precision: None,
        };
        ops::fill(be, &mut ctx.lengths, time as f64)?;
        ctx.values = ctx.alloc_values(self, be)?;
        ctx.scratch = ctx.alloc_scratch(self, be)?;
        Ok(ctx)
    }
}

impl Context {
    /// The batch size of the last call (the one the buffers hold).
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The padded time length `T` of the last call (0 for a network without
    /// sequence inputs). A sequence output is time-major `[T * batch] + unit`:
    /// frame `t` of example `b` is row `t * batch + b`.
    pub fn time(&self) -> usize {
        self.time
    }

    /// Each example's length in the last call (all `T` when it gave none).
    pub fn lengths(&self) -> &[i32] {
        &self.lengths_host
    }
    /// Training mode: dropout is active. Off by default.
    pub fn set_train(&mut self, train: bool) {
        self.train = train;
    }

    /// Carried state: when on, every (unidirectional) LSTM starts each call
    /// from the state the previous call of this context ended in (each
    /// sequence's state after its last real frame), so a sampling loop or a
    /// server steps one frame at a time without recomputing the prefix. Off
    /// by default (every call starts from zeros). The state is read and
    /// written with [`Network::state`] / [`Network::set_state`]; it resets to
    /// zeros when the batch size changes. Gradients do not flow into an
    /// earlier call (truncated backpropagation).
    pub fn set_carry_state(&mut self, on: bool) {
        self.carry = on;
    }

    /// Whether the context carries recurrent state from call to call.
    pub fn carries_state(&self) -> bool {
        self.carry
    }

    /// Whether the context is in training mode.
    pub fn is_training(&self) -> bool {
        self.train
    }

    /// Mixed precision (`Some(BF16)` or `Some(F16)`; `None`, the default, is
    /// float32): the products of Linear and Conv2d layers read their operands
    /// (input, weight, and in backward the output gradient) rounded to that
    /// dtype and accumulate in float32, as `verjus.autocast` and PyTorch's
    /// autocast multiply; every other op, the parameters and the gradients
    /// stay float32. On the CPU the rounding is the whole effect (the
    /// numerics of reduced-precision training, not its speed).
    pub fn set_precision(&mut self, precision: Option<DType>) -> Result<()> {
        if let Some(d) = precision {
            d.mixed_precision("Context::set_precision")?;
        }
        self.precision = precision;
        Ok(())
    }

    /// The mixed precision set with [`Context::set_precision`].
    pub fn precision(&self) -> Option<DType> {
        self.precision
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

    /// Gives this context the dropout streams numbered `stream` of its seed
    /// (a data-parallel rank draws its own masks); stream 0 keeps the seed's own.
    pub fn set_stream(&mut self, stream: u64) {
        if stream != 0 {
            self.seed = mix(self.seed, stream);
        }
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
    /// input gradients were requested with [`Context::set_input_grads`]. For
    /// a sequence input it is time-major, `[T * batch] + unit` (row
    /// `t * batch + b`), as the network holds the input.
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

    /// Makes the buffers fit `batch` examples of `time` frames and the current
    /// settings. Host buffers are resized within their capacity, so once the
    /// largest call has run, shorter and smaller ones allocate nothing; a
    /// change of the gradient plan allocates afresh, replacing nothing unless
    /// all allocations succeed.
    pub(crate) fn prepare(
        &mut self,
        net: &Network,
        be: &dyn Backend,
        (batch, time): (usize, usize),
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
        let resize = batch != self.batch || time != self.time;
        if !replan && !resize && (self.grads_allocated || !backward) {
            return Ok(());
        }
        if resize {
            self.forward = None;
            self.backward_done = false;
            (self.batch, self.time) = (batch, time);
            if let Err(e) = self.refit_all(net, be) {
                // Some buffers may have their new size: refit all on the next call.
                self.batch = usize::MAX;
                return Err(e);
            }
        }
        if replan {
            let old_plan = std::mem::replace(&mut self.plan, GradPlan::new(net, self.input_grads));
            let fresh = self.alloc_scratch(net, be).and_then(|s| {
                let g = if self.grads_allocated || backward {
                    Some(self.alloc_grads(net, be)?)
                } else {
                    None
                };
                Ok((s, g))
            });
            match fresh {
                Ok((s, g)) => {
                    self.scratch = s;
                    if let Some((g, e)) = g {
                        self.grads = g;
                        self.param_edges = e;
                        self.grads_allocated = true;
                    }
                    self.backward_done = false;
                }
                Err(e) => {
                    self.plan = old_plan;
                    return Err(e);
                }
            }
        }
        if backward && !self.grads_allocated {
            let (g, e) = self.alloc_grads(net, be)?;
            self.grads = g;
            self.param_edges = e;
            self.grads_allocated = true;
            self.backward_done = false;
        }
        Ok(())
    }

    /// Resizes every buffer that depends on the batch or the time length.
    fn refit_all(&mut self, net: &Network, be: &dyn Backend) -> Result<()> {
        let (batch, time) = (self.batch, self.time);
        refit(be, &mut self.lengths, &[batch], 0.0)?;
        for (v, t) in self.values.iter_mut().enumerate() {
            refit(be, t, &value_dims(net, v, batch, time), 0.0)?;
        }
        let specs = self.scratch_specs(net, be)?;
        for (bufs, spec) in self.scratch.iter_mut().zip(&specs) {
            for (t, (dims, _, fill)) in bufs.iter_mut().zip(spec) {
                refit(be, t, dims, *fill)?;
            }
        }
        if self.grads_allocated {
            for (s, g) in self.grads.iter_mut().enumerate() {
                let v = self.plan.slots[s];
                if let Some(g) = g {
                    refit(
                        be,
                        g,
                        &batched(rows(net, v, batch, time), &net.value_units[v]),
                        0.0,
                    )?;
                }
            }
        }
        Ok(())
    }

    fn alloc_values(&self, net: &Network, be: &dyn Backend) -> Result<Vec<Tensor>> {
        (0..net.value_units.len())
            .map(|v| {
                let dtype = net.value_dtype(v);
                ops::zeros(
                    be,
                    &Shape::new(value_dims(net, v, self.batch, self.time))?,
                    dtype,
                )
            })
            .collect()
    }

    /// Per node: `(dims, dtype, fill)` of each scratch buffer at this batch and time.
    fn scratch_specs(&self, net: &Network, be: &dyn Backend) -> Result<Vec<Vec<ScratchSpec>>> {
        let n_in = net.n_inputs;
        net.nodes
            .iter()
            .enumerate()
            .map(|(t, node)| {
                if !node.live {
                    return Ok(Vec::new());
                }
                let needs_dx = self.plan.needs_dx(t);
                let count = rows(net, n_in + t, self.batch, self.time);
                let mut specs: Vec<ScratchSpec> = node
                    .layer
                    .scratch(&needs_dx)
                    .iter()
                    .map(|s| (s.dims(count), DType::F32, s.fill))
                    .collect();
                for f in node
                    .layer
                    .frame_scratch(be, self.time, self.batch, &needs_dx)?
                {
                    specs.push((f.dims, f.dtype, 0.0));
                }
                Ok(specs)
            })
            .collect()
    }

    fn alloc_scratch(&self, net: &Network, be: &dyn Backend) -> Result<Vec<Vec<Tensor>>> {
        self.scratch_specs(net, be)?
            .into_iter()
            .map(|specs| {
                specs
                    .into_iter()
                    .map(|(dims, dtype, fill)| {
                        let mut buf = ops::zeros(be, &Shape::new(dims)?, dtype)?;
                        if fill != 0.0 {
                            ops::fill(be, &mut buf, f64::from(fill))?;
                        }
                        Ok(buf)
                    })
                    .collect()
            })
            .collect()
    }

    fn alloc_grads(&self, net: &Network, be: &dyn Backend) -> Result<GradStores> {
        let grads = self
            .plan
            .slots
            .iter()
            .map(|&v| {
                let dims = batched(rows(net, v, self.batch, self.time), &net.value_units[v]);
                Ok(Some(ops::zeros(be, &Shape::new(dims)?, DType::F32)?))
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
    /// Zeroes the frames at or past each example's length in the per-frame
    /// outputs, so that what inference returns there is 0 (as PyTorch's
    /// `pad_packed_sequence` gives it) rather than what the last layers made of
    /// padding (a Linear's bias, say).
    pub(crate) fn clear_output_padding(&mut self, be: &dyn Backend, net: &Network) -> Result<()> {
        for &v in &self.outputs {
            if net.value_seq[v] {
                seqcheck::zero_padding(be, &mut self.values[v], &self.lengths_host)?;
            }
        }
        Ok(())
    }

    /// Copies of the outputs of the last forward pass (the context keeps its own).
    pub(crate) fn copy_outputs(&self, be: &dyn Backend) -> Result<Vec<Tensor>> {
        self.outputs
            .iter()
            .map(|&v| {
                let value = &self.values[v];
                let mut copy = ops::output(be, value.shape(), value.dtype())?;
                ops::copy(be, value, &mut copy)?;
                Ok(copy)
            })
            .collect()
    }

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

/// A scratch buffer's dims, dtype and fill value.
type ScratchSpec = (Vec<usize>, DType, f32);

/// The rows of value `v`: `time * batch` for a sequence, else `batch`.
pub(crate) fn rows(net: &Network, v: usize, batch: usize, time: usize) -> usize {
    if net.value_seq[v] {
        time.saturating_mul(batch)
    } else {
        batch
    }
}

/// The dims of value `v`'s buffer (`[0]` for a value nothing reads).
fn value_dims(net: &Network, v: usize, batch: usize, time: usize) -> Vec<usize> {
    let n_in = net.n_inputs;
    let live = v < n_in || net.nodes.get(v - n_in).is_some_and(|n| n.live);
    if live {
        batched(rows(net, v, batch, time), &net.value_units[v])
    } else {
        vec![0]
    }
}

/// Gives `t` the shape `dims`: a host buffer is resized in place (allocating
/// only beyond its capacity), a device buffer replaced. Elements are zero
/// after a change (`fill` for scratch filled with it).
pub(crate) fn refit(be: &dyn Backend, t: &mut Tensor, dims: &[usize], fill: f32) -> Result<()> {
    if t.dims() == dims {
        return Ok(());
    }
    let shape = Shape::new(dims.to_vec())?;
    let dtype = t.dtype();
    let n = shape.numel();
    match t.storage_mut() {
        Storage::Host(HostData::F32(v)) => v.resize(n, 0.0),
        Storage::Host(HostData::I32(v)) => v.resize(n, 0),
        Storage::Host(HostData::I64(v)) => v.resize(n, 0),
        _ => {
            *t = ops::zeros(be, &shape, dtype)?;
            return if fill != 0.0 {
                ops::fill(be, t, f64::from(fill))
            } else {
                Ok(())
            };
        }
    }
    let storage = std::mem::replace(t.storage_mut(), Storage::Host(HostData::F32(Vec::new())));
    *t = Tensor::from_storage(shape, dtype, storage)?;
    ops::fill(be, t, f64::from(fill))
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
