//! The Trainer: one call per minibatch runs forward, loss, backward and the
//! solver step; another evaluates a dataset in inference mode.
//!
//! It owns the network, the solver and the loss, and keeps, per batch size, the
//! [`Context`] and the buffers a step needs (the loss gradient, argmax
//! predictions, evaluation chunks). A training loop therefore allocates no
//! tensors per step once each batch size has been seen (typically two: the full
//! batch and an epoch's short last one). On a device backend the inputs are
//! uploaded each step, which allocates: the op set has no upload into an
//! existing buffer yet.
//!
//! The loss runs on the device and returns the mean loss and the gradient of the
//! *summed* loss; the network's parameter gradients are therefore sums over the
//! batch, and the [`Solver`] divides by the actual batch size. Evaluation
//! switches the context to inference mode (no dropout) and counts correct
//! predictions from `ops::argmax` on the device, reading back only the indices.
//!
//! The network's first output is the one the loss sees.
//!
//! The trainer, not a context, owns the position of the dropout stream: each
//! step sets its context to the trainer's position before the forward pass
//! and reads it back after, so the masks depend only on the network's seed and
//! the number of training steps so far, whatever the batch sizes were. A
//! checkpoint stores that position, and a resumed run draws the same masks as
//! an uninterrupted one.
//!
//! Data-parallel training attaches a [`Collective`] ([`Trainer::set_collective`]):
//! each rank steps on its rows of the same global batch, and the trainer sums
//! the loss, the normaliser (examples or real frames) and the parameter
//! gradients over the ranks before the solver step, so every rank applies the
//! global batch's update and the replicas stay identical. Whether the step
//! goes on (a finite loss everywhere) comes from the same sum, so all ranks
//! take the same path. Each rank draws its own dropout masks.

use crate::context::{refit, Context};
use crate::data::Dataset;
use crate::loss::Loss;
use crate::loss_scale::LossScaler;
use crate::network::Network;
use crate::parameter::Parameter;
use crate::solver::{ParamMut, Solver};
use crate::tally::Tally;
use crate::weights;
use std::collections::hash_map::{Entry, HashMap};
use std::sync::Arc;
use verjus_core::{
    ops, scoped, Backend, BackendRef, Collective, CollectiveRef, DType, Device, Element, Error,
    ReduceOp, Result, Shape, Solo, Tensor,
};

impl ParamMut for Parameter {
    fn name(&self) -> &str {
        &self.name
    }
    fn value(&self) -> &Tensor {
        &self.value
    }
    fn value_mut(&mut self) -> &mut Tensor {
        &mut self.value
    }
}

/// Mean loss and accuracy of [`Trainer::evaluate`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Metrics {
    /// The loss averaged over all examples.
    pub loss: f32,
    /// The fraction of examples whose argmax over output 0 equals the label;
    /// `None` when the targets are not integer class labels.
    pub accuracy: Option<f32>,
}

/// What a step or an evaluation chunk of one batch size reuses.
struct Buffers {
    ctx: Context,
    /// Gradient of the summed loss wrt output 0.
    loss_grad: Option<Tensor>,
    /// `loss_grad` times float16's loss scale.
    scaled_loss_grad: Option<Tensor>,
    /// Argmax of output 0, `[batch]` int64.
    pred: Option<Tensor>,
    /// Rows of the evaluation set, on the host.
    chunk_x: Option<Tensor>,
    chunk_y: Option<Tensor>,
    /// Inputs and targets copied to the backend's device.
    x: Option<Tensor>,
    y: Option<Tensor>,
}

/// Trains and evaluates one network. See the module docs.
pub struct Trainer {
    net: Network,
    solver: Solver,
    loss: Loss,
    be: BackendRef,
    buffers: HashMap<usize, Buffers>,
    /// Training forward passes so far: the dropout stream's position.
    dropout_step: u64,
    /// The ranks this one trains with ([`Solo`] when alone).
    collective: CollectiveRef,
    /// Mixed precision of the contexts ([`Trainer::set_precision`]).
    precision: Option<DType>,
    /// The loss scale of float16 mixed precision.
    scaler: Option<LossScaler>,
}

impl Trainer {
    /// A trainer for `net`, whose parameters must live on `be`'s device: build
    /// it there ([`Network::build`] with `be`) or move it first
    /// ([`Network::to_device`]). [`Trainer::to_device`] moves a trainer later.
    pub fn new(net: Network, solver: Solver, loss: Loss, be: BackendRef) -> Self {
        Trainer {
            net,
            solver,
            loss,
            be,
            buffers: HashMap::new(),
            dropout_step: 0,
            collective: Arc::new(Solo),
            precision: None,
            scaler: None,
        }
    }

    /// Trains data-parallel with the ranks of `collective` (see the module
    /// docs): from here on every step, [`Trainer::train_no_rows`] and
    /// [`Trainer::evaluate`] are collective calls that all ranks make in the
    /// same order. Call [`Trainer::broadcast_parameters`] before the first step.
    pub fn set_collective(&mut self, collective: CollectiveRef) {
        self.buffers.clear(); // their dropout streams are keyed by the rank
        self.collective = collective;
    }

    /// Mixed precision for the steps and evaluations from here on (see
    /// [`Context::set_precision`]): `Some(BF16)` is Lightning's
    /// `"bf16-mixed"`, `Some(F16)` its `"16-mixed"`, `None` float32. Float16
    /// trains with dynamic loss scaling (`loss_scale.rs`; a step whose scaled
    /// gradients overflow is skipped: [`Trainer::skipped_steps`]).
    pub fn set_precision(&mut self, precision: Option<DType>) -> Result<()> {
        for bufs in self.buffers.values_mut() {
            bufs.ctx.set_precision(precision)?;
        }
        if precision != Some(DType::F16) {
            self.scaler = None;
        } else if self.scaler.is_none() {
            self.scaler = Some(LossScaler::new());
        }
        self.precision = precision;
        Ok(())
    }

    /// Steps skipped because their float16-scaled gradients overflowed (0
    /// unless the precision is float16).
    pub fn skipped_steps(&self) -> u64 {
        self.scaler.as_ref().map_or(0, LossScaler::skipped)
    }

    /// The current loss scale of float16 mixed precision (1 otherwise).
    pub fn loss_scale(&self) -> f32 {
        self.scaler.as_ref().map_or(1.0, LossScaler::scale)
    }

    /// The mixed precision ([`Trainer::set_precision`]).
    pub fn precision(&self) -> Option<DType> {
        self.precision
    }

    /// The ranks this trainer trains with.
    pub fn collective(&self) -> &CollectiveRef {
        &self.collective
    }

    /// Gives every rank rank 0's parameters, so that replicas built or loaded
    /// apart start equal.
    pub fn broadcast_parameters(&mut self) -> Result<()> {
        let be = BackendRef::clone(&self.be);
        let mut values: Vec<&mut Tensor> = self
            .net
            .parameters
            .iter_mut()
            .map(|p| &mut p.value)
            .collect();
        self.collective.broadcast(&*be, &mut values, 0)
    }

    /// Checks that `net` has one input and one output: a trainer feeds one
    /// `x` and scores one output. A network with more would otherwise fail in
    /// the middle of a step, with a message about gradient counts.
    pub fn check_network(net: &Network) -> Result<()> {
        if net.inputs().len() == 1 && net.outputs.len() == 1 {
            return Ok(()); // every step asks: nothing allocated
        }
        let inputs: Vec<&str> = net.inputs().iter().map(|i| i.name.as_str()).collect();
        let outputs: Vec<&str> = net.outputs.iter().map(|(n, _)| n.as_str()).collect();
        Err(Error::invalid(
            "Trainer",
            format!(
                "a trainer trains a network with one input and one output; \
                 this one has inputs {inputs:?} and outputs {outputs:?}"
            ),
        ))
    }

    /// The loss.
    pub fn loss(&self) -> Loss {
        self.loss
    }

    /// The dropout stream's position: training forward passes so far.
    pub fn dropout_step(&self) -> u64 {
        self.dropout_step
    }

    /// Moves the dropout stream (when restoring a checkpoint).
    pub fn set_dropout_step(&mut self, step: u64) {
        self.dropout_step = step;
    }

    /// The network.
    pub fn network(&self) -> &Network {
        &self.net
    }

    /// The network, mutably: for loading weights in place
    /// ([`Network::load_parameters`], which keeps every shape). The solver's
    /// state stays, keyed by parameter name.
    pub fn network_mut(&mut self) -> &mut Network {
        &mut self.net
    }

    /// The network, giving up the trainer (its solver state and buffers).
    pub fn into_network(self) -> Network {
        self.net
    }

    /// The backend this trainer computes on.
    pub fn backend(&self) -> &BackendRef {
        &self.be
    }

    /// Switches to `be` after the network and state moved (`transfer`).
    pub(crate) fn set_backend(&mut self, be: BackendRef) {
        self.buffers.clear();
        self.be = be;
    }

    /// Replaces the network (e.g. rebuilt from an edited definition) and returns
    /// the old one. The solver's state carries over by parameter name.
    pub fn set_network(&mut self, net: Network) -> Network {
        self.buffers.clear();
        std::mem::replace(&mut self.net, net)
    }

    /// The solver (learning rate, state).
    pub fn solver(&self) -> &Solver {
        &self.solver
    }

    /// The solver, mutably (to change hyperparameters or restore state).
    pub fn solver_mut(&mut self) -> &mut Solver {
        &mut self.solver
    }

    /// One training step on the batch `x` (inputs, `[batch, ...]`) with targets
    /// `y` (`[batch]` labels or `[batch, ...]` values): forward in training mode,
    /// loss and its gradient, backward, solver step normalised by this batch's
    /// size. Returns the mean loss and the network's output.
    ///
    /// A non-finite loss is an error, raised before the parameters change.
    pub fn train_minibatch(&mut self, x: &Tensor, y: &Tensor) -> Result<(f32, &Tensor)> {
        let be = BackendRef::clone(&self.be);
        let (loss, batch) = scoped(&*be, || self.step(x, None, y))?;
        let bufs = self.buffers.get(&batch).ok_or_else(|| {
            Error::invalid("train_minibatch", "the step kept no buffers for its batch")
        })?;
        Ok((loss, bufs.ctx.output(0)))
    }

    /// One training step on a batch of sequences: `x` padded and batch-major
    /// (`[batch, T, ...]`), `lengths` int32 `[batch]` (each in `1..=T` where
    /// the loss reads frames). For a network whose output is a sequence, `y`
    /// holds integer targets `[batch, T]` and the loss is per frame
    /// ([`Loss::compute_frames`]: the mean over real frames, the solver
    /// normalising by their number); otherwise `y` is per example, as for
    /// [`Trainer::train_minibatch`]. Returns the mean loss and the output
    /// (time-major `[T * batch, ...]` for a sequence).
    pub fn train_sequences(
        &mut self,
        x: &Tensor,
        lengths: &Tensor,
        y: &Tensor,
    ) -> Result<(f32, &Tensor)> {
        let be = BackendRef::clone(&self.be);
        let (loss, batch) = scoped(&*be, || self.step(x, Some(lengths), y))?;
        let bufs = self.buffers.get(&batch).ok_or_else(|| {
            Error::invalid("train_minibatch", "the step kept no buffers for its batch")
        })?;
        Ok((loss, bufs.ctx.output(0)))
    }

    /// The body of [`Trainer::train_minibatch`] and [`Trainer::train_sequences`];
    /// returns the loss and the batch size.
    fn step(&mut self, x: &Tensor, lengths: Option<&Tensor>, y: &Tensor) -> Result<(f32, usize)> {
        let op = "train_minibatch";
        Self::check_network(&self.net)?;
        let batch = batch_of(op, x, y)?;
        let be: &dyn Backend = &*self.be;
        let bufs = buffers_for(
            &mut self.buffers,
            &self.net,
            be,
            self.collective.rank(),
            batch,
            self.precision,
        )?;
        bufs.ctx.set_train(true);
        bufs.ctx.set_step(self.dropout_step);
        let x = on_device(be, x, &mut bufs.x)?;
        let y = on_device(be, y, &mut bufs.y)?;
        self.net
            .compute_output_with_lengths(be, &mut bufs.ctx, &[x], lengths)?;
        self.dropout_step = bufs.ctx.step();
        let out = bufs.ctx.output(0);
        let loss_grad = fit(be, &mut bufs.loss_grad, out.shape(), DType::F32)?;
        let scale = self.scaler.as_ref().map(LossScaler::scale);
        // Per-frame losses are normalised by the number of real frames.
        let (loss, norm) = if self.net.output_is_sequence(0) {
            let lengths = bufs.ctx.lengths();
            self.loss
                .compute_frames(be, out, y, lengths, Some(&mut *loss_grad))?
        } else {
            (self.loss.compute(be, out, y, Some(&mut *loss_grad))?, batch)
        };
        let seed: &Tensor = match scale {
            Some(s) => {
                let scaled = fit(
                    be,
                    &mut bufs.scaled_loss_grad,
                    loss_grad.shape(),
                    DType::F32,
                )?;
                ops::unary(be, ops::UnaryOp::Scale(s), loss_grad, scaled)?;
                scaled
            }
            None => loss_grad,
        };
        self.net.compute_gradients(be, &mut bufs.ctx, &[seed])?;
        // Only parameters that backward reaches: as PyTorch's optimizers skip a
        // parameter without a gradient, a layer that feeds no output is neither
        // decayed nor given solver state.
        let net = &mut self.net;
        let (mut params, grads): (Vec<&mut Parameter>, Vec<&mut Tensor>) = net
            .parameters
            .iter_mut()
            .zip(bufs.ctx.param_grads.iter_mut())
            .zip(&net.trained)
            .filter_map(|(pair, &trained)| trained.then_some(pair))
            .unzip();
        let reduced = sum_over_ranks(&*self.collective, be, grads, loss, norm)?;
        let Some((grads, loss, norm)) = reduced else {
            drop(params);
            return Err(diverged(&self.net, be, op, loss));
        };
        update(
            &mut self.solver,
            self.scaler.as_mut(),
            be,
            &mut params,
            &grads,
            norm,
        )?;
        Ok((loss, batch))
    }

    /// A data-parallel step on a rank that holds no rows of this global batch
    /// (an epoch's short last one): it adds nothing to the sums, takes the
    /// same update as the other ranks and advances its dropout stream as a
    /// step would. Returns the global batch's mean loss.
    pub fn train_no_rows(&mut self) -> Result<f32> {
        let be = BackendRef::clone(&self.be);
        scoped(&*be, || {
            let op = "train_no_rows";
            Self::check_network(&self.net)?;
            let be: &dyn Backend = &*self.be;
            self.dropout_step = self.dropout_step.wrapping_add(1);
            let net = &mut self.net;
            let mut zeros = Vec::new();
            let mut params = Vec::new();
            for (p, &trained) in net.parameters.iter_mut().zip(&net.trained) {
                if trained {
                    zeros.push(ops::zeros(be, p.value.shape(), DType::F32)?);
                    params.push(p);
                }
            }
            let reduced =
                sum_over_ranks(&*self.collective, be, zeros.iter_mut().collect(), 0.0, 0)?;
            let Some((grads, loss, norm)) = reduced else {
                drop(params);
                return Err(diverged(&self.net, be, op, 0.0));
            };
            update(
                &mut self.solver,
                self.scaler.as_mut(),
                be,
                &mut params,
                &grads,
                norm,
            )?;
            Ok(loss)
        })
    }

    /// The mean loss over one batch of sequences (as for
    /// [`Trainer::train_sequences`]) in inference mode (no dropout, nothing
    /// updated): per real frame for a sequence output, returned with the
    /// number of real frames; per example otherwise, with the batch size.
    /// Average several batches weighted by that count.
    pub fn evaluate_sequences(
        &mut self,
        x: &Tensor,
        lengths: &Tensor,
        y: &Tensor,
    ) -> Result<(f32, usize)> {
        let be = BackendRef::clone(&self.be);
        scoped(&*be, || {
            Self::check_network(&self.net)?;
            let batch = batch_of("evaluate_sequences", x, y)?;
            let be: &dyn Backend = &*self.be;
            let bufs = buffers_for(
                &mut self.buffers,
                &self.net,
                be,
                self.collective.rank(),
                batch,
                self.precision,
            )?;
            bufs.ctx.set_train(false);
            let x = on_device(be, x, &mut bufs.x)?;
            self.net
                .compute_output_with_lengths(be, &mut bufs.ctx, &[x], Some(lengths))?;
            let out = bufs.ctx.output(0);
            if self.net.output_is_sequence(0) {
                self.loss
                    .compute_frames(be, out, y, bufs.ctx.lengths(), None)
            } else {
                let y = on_device(be, y, &mut bufs.y)?;
                Ok((self.loss.compute(be, out, y, None)?, batch))
            }
        })
    }

    /// Checks `data`'s labels against the classes of the network's first output
    /// when the loss takes labels, so that a bad label is named by its
    /// example's index before an epoch starts rather than by its row in some
    /// shuffled minibatch.
    pub fn check_dataset(&self, data: &Dataset) -> Result<()> {
        if self.loss == Loss::Mse {
            return Ok(());
        }
        let classes = self
            .net
            .output_shapes()
            .first()
            .and_then(|(_, unit)| unit.last().copied());
        classes.map_or(Ok(()), |classes| data.check_labels(classes))
    }

    /// Mean loss and (for integer labels) accuracy over all of `x` / `y`, in
    /// inference mode, `batch_size` examples at a time. `x` and `y` may be host
    /// or device tensors. Data-parallel, each rank evaluates its share of the
    /// rows and every rank returns the metrics of all of them.
    pub fn evaluate(&mut self, x: &Tensor, y: &Tensor, batch_size: usize) -> Result<Metrics> {
        let be = BackendRef::clone(&self.be);
        scoped(&*be, || self.evaluate_here(x, y, batch_size))
    }

    /// The body of [`Trainer::evaluate`].
    fn evaluate_here(&mut self, x: &Tensor, y: &Tensor, batch_size: usize) -> Result<Metrics> {
        let op = "evaluate";
        Self::check_network(&self.net)?;
        let n = batch_of(op, x, y)?;
        if batch_size == 0 {
            return Err(Error::invalid(op, "batch_size must be > 0"));
        }
        let be: &dyn Backend = &*self.be;
        // Chunks are cut on the host.
        let (x_host, y_host);
        let x = if x.device() == Device::Cpu {
            x
        } else {
            x_host = ops::download(be, x)?;
            &x_host
        };
        let y = if y.device() == Device::Cpu {
            y
        } else {
            y_host = ops::download(be, y)?;
            &y_host
        };
        let classify = y.dtype().is_int();
        // Each rank evaluates its contiguous share; the sums are then global.
        let (rank, world) = (self.collective.rank(), self.collective.world());
        let (first, end) = (n * rank / world, n * (rank + 1) / world);
        let (mut loss_sum, mut correct) = (0.0f64, 0usize);
        for start in (first..end).step_by(batch_size) {
            let b = batch_size.min(end - start);
            let bufs = buffers_for(
                &mut self.buffers,
                &self.net,
                be,
                self.collective.rank(),
                b,
                self.precision,
            )?;
            bufs.ctx.set_train(false);
            let xc = rows(x, start, b, &mut bufs.chunk_x)?;
            let yc = rows(y, start, b, &mut bufs.chunk_y)?;
            let x_dev = on_device(be, xc, &mut bufs.x)?;
            self.net.compute_output(be, &mut bufs.ctx, &[x_dev])?;
            let out = bufs.ctx.output(0);
            let y_dev = on_device(be, yc, &mut bufs.y)?;
            loss_sum += f64::from(self.loss.compute(be, out, y_dev, None)?) * b as f64;
            if classify {
                correct += count_correct(be, out, yc, &mut bufs.pred)?;
            }
        }
        let mut sums = [loss_sum, correct as f64];
        self.collective
            .all_reduce_scalars(&mut sums, ReduceOp::Sum)?;
        Ok(Metrics {
            loss: (sums[0] / n as f64) as f32,
            accuracy: classify.then(|| (sums[1] / n as f64) as f32),
        })
    }
}

/// Sums `grads`, the loss and its normaliser over the ranks, in one
/// collective (see [`Tally`]); returns the gradients and the global mean loss
/// and normaliser, or None when some rank's loss was not finite (nothing has
/// changed then). This rank's `loss` is the mean over `norm` rows or frames.
fn sum_over_ranks<'g>(
    collective: &dyn Collective,
    be: &dyn Backend,
    mut grads: Vec<&'g mut Tensor>,
    loss: f32,
    norm: usize,
) -> Result<Option<(Vec<&'g Tensor>, f32, usize)>> {
    let mut tally = Tally::new(loss, norm)?;
    let mut summed: Vec<&mut Tensor> = grads.iter_mut().map(|g| &mut **g).collect();
    summed.push(tally.tensor());
    collective.all_reduce(be, &mut summed, ReduceOp::Sum)?;
    drop(summed);
    Ok(tally
        .agreed(loss, collective.world())?
        .map(|(loss, norm)| (grads.into_iter().map(|g| &*g).collect(), loss, norm)))
}

/// The solver's update from the gradients summed over `norm` examples (over
/// ranks), with float16's loss scale divided out; none when the scaler finds
/// the scaled gradients overflowed (every rank decides alike: the sums agree).
fn update(
    solver: &mut Solver,
    scaler: Option<&mut LossScaler>,
    be: &dyn Backend,
    params: &mut [&mut Parameter],
    grads: &[&Tensor],
    norm: usize,
) -> Result<()> {
    let divisor = match scaler {
        None => norm,
        Some(scaler) => {
            let scale = scaler.scale(); // what these gradients were scaled by
            if !scaler.admit(be, grads)? {
                return Ok(());
            }
            // An integer power of two in [1, 2^24]: the product is exact.
            norm * scale as usize
        }
    };
    solver.step(be, params, grads, divisor)?;
    Ok(())
}

/// The error of a step whose loss is not finite on this or another rank.
fn diverged(net: &Network, be: &dyn Backend, op: &str, loss: f32) -> Error {
    if loss.is_finite() {
        return Error::invalid(
            op,
            format!(
                "the loss is not finite on another rank (here {loss}); training has \
                 diverged (this step changed nothing)"
            ),
        );
    }
    // Only on this error path: are the parameters themselves gone?
    let why = match net.named_parameters_host(be) {
        Ok(params) => match weights::first_non_finite(&params) {
            Some((name, ..)) => format!(
                "{name} already holds non-finite values: an earlier update diverged \
                 (lower the learning rate, or clip gradients)"
            ),
            None => "the parameters are finite: check this batch's inputs".to_string(),
        },
        Err(e) => return e,
    };
    Error::invalid(
        op,
        format!("the loss is {loss}; training has diverged ({why}; this step changed nothing)"),
    )
}

/// The batch size of `x` and `y`, which must agree and be non-zero.
fn batch_of(op: &str, x: &Tensor, y: &Tensor) -> Result<usize> {
    let n = match x.dims().first() {
        Some(&n) if n > 0 => n,
        _ => return Err(Error::shape(op, "inputs", "[batch > 0, ...]", x.shape())),
    };
    if y.dims().first() != Some(&n) {
        return Err(Error::shape(
            op,
            "targets",
            format!("[{n}, ...]"),
            y.shape(),
        ));
    }
    Ok(n)
}

/// The buffers of batch size `batch`, made on first use, with the dropout
/// streams of data-parallel rank `rank` and the trainer's mixed `precision`.
fn buffers_for<'a>(
    map: &'a mut HashMap<usize, Buffers>,
    net: &Network,
    be: &dyn Backend,
    rank: usize,
    batch: usize,
    precision: Option<DType>,
) -> Result<&'a mut Buffers> {
    Ok(match map.entry(batch) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => e.insert(Buffers {
            ctx: {
                let mut ctx = net.new_context(be, batch)?;
                ctx.set_stream(rank as u64);
                ctx.set_precision(precision)?;
                ctx
            },
            loss_grad: None,
            scaled_loss_grad: None,
            pred: None,
            chunk_x: None,
            chunk_y: None,
            x: None,
            y: None,
        }),
    })
}

/// `t` itself when it lives on `be`'s device, else its upload kept in `slot`.
fn on_device<'a>(
    be: &dyn Backend,
    t: &'a Tensor,
    slot: &'a mut Option<Tensor>,
) -> Result<&'a Tensor> {
    if t.device() == be.device() {
        return Ok(t);
    }
    Ok(slot.insert(ops::upload(be, t)?))
}

/// The tensor in `slot` given `shape` (resized within its capacity on the
/// host) when it has `dtype` on `be`'s device, else a new zero one there.
fn fit<'a>(
    be: &dyn Backend,
    slot: &'a mut Option<Tensor>,
    shape: &Shape,
    dtype: DType,
) -> Result<&'a mut Tensor> {
    let t = match slot.take() {
        Some(mut t) if t.dtype() == dtype && t.device() == be.device() => {
            refit(be, &mut t, shape.dims(), 0.0)?;
            t
        }
        _ => ops::zeros(be, shape, dtype)?,
    };
    Ok(slot.insert(t))
}

/// Rows `start..start + count` of the host tensor `src`: `src` itself when that
/// is all of it, else a copy in `slot`.
fn rows<'a>(
    src: &'a Tensor,
    start: usize,
    count: usize,
    slot: &'a mut Option<Tensor>,
) -> Result<&'a Tensor> {
    if start == 0 && src.dims().first() == Some(&count) {
        return Ok(src);
    }
    let mut dims = src.dims().to_vec();
    dims[0] = count;
    let shape = Shape::new(dims)?;
    let dst = match slot.take() {
        Some(t) if t.shape() == &shape && t.dtype() == src.dtype() => t,
        _ => Tensor::zeros_host(&shape, src.dtype())?,
    };
    let dst = slot.insert(dst);
    match src.dtype() {
        DType::F32 => copy_rows::<f32>(src, start, dst)?,
        DType::I64 => copy_rows::<i64>(src, start, dst)?,
        DType::I32 => copy_rows::<i32>(src, start, dst)?,
        other => {
            return Err(Error::invalid(
                "evaluate",
                format!("cannot slice {other} tensors"),
            ))
        }
    }
    Ok(dst)
}

fn copy_rows<T: Element>(src: &Tensor, start: usize, dst: &mut Tensor) -> Result<()> {
    let len = dst.numel();
    let offset = start * (len / dst.dims()[0].max(1));
    dst.as_mut_slice::<T>()?
        .copy_from_slice(&src.as_slice::<T>()?[offset..offset + len]);
    Ok(())
}

/// How many rows of `out` (`[batch, classes]`) have their argmax at the label in
/// `labels` (host, `[batch]`).
fn count_correct(
    be: &dyn Backend,
    out: &Tensor,
    labels: &Tensor,
    pred: &mut Option<Tensor>,
) -> Result<usize> {
    if out.shape().rank() != 2 {
        return Err(Error::shape(
            "evaluate",
            "output 0 (for accuracy)",
            "[batch, classes]",
            out.shape(),
        ));
    }
    let pred = fit(be, pred, &Shape::new([out.dims()[0]])?, DType::I64)?;
    ops::argmax(be, out, 1, pred)?;
    let downloaded;
    let pred = if pred.device() == Device::Cpu {
        &*pred
    } else {
        downloaded = ops::download(be, pred)?;
        &downloaded
    };
    let pred = pred.as_slice::<i64>()?;
    Ok(match labels.dtype() {
        DType::I32 => matches(
            pred,
            labels.as_slice::<i32>()?.iter().map(|&l| i64::from(l)),
        ),
        _ => matches(pred, labels.as_slice::<i64>()?.iter().copied()),
    })
}

fn matches(pred: &[i64], labels: impl Iterator<Item = i64>) -> usize {
    pred.iter().zip(labels).filter(|(p, l)| **p == *l).count()
}
