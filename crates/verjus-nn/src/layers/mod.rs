//! Leaf layers: shape inference at build time, and the forward and backward
//! computations through `verjus_core::ops` at run time.
//!
//! A layer object is static (it holds only its settings and unit shapes); all
//! per-invocation data (activations, gradients, scratch buffers, the dropout
//! stream) reaches it through [`Forward`] and [`Backward`], which the network
//! fills from a [`crate::Context`]. Because layers compute only through the
//! validated op set, they run unchanged on every backend.
//!
//! Backward *overwrites* its destinations: where a value or a parameter
//! receives several contributions, the network gives each contributor its own
//! buffer and sums them (see `gradplan`).

mod activation;
mod add;
mod concat;
mod conv2d;
mod dropout;
mod embedding;
pub(crate) mod frames;
mod linear;
mod lstm;
pub(crate) mod pool;
mod reshape;
mod softmax;
mod time_reduce;
pub(crate) mod weight_param;

#[cfg(test)]
mod seq_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod weight_tests;

use crate::def::LayerConfig;
use crate::descriptor::Init;
use crate::parameter::Parameter;
use std::fmt;
use verjus_core::{Backend, DType, Error, Result, Tensor};

/// A per-context buffer a layer asks for, filled with `fill` once at allocation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Scratch {
    pub unit: Vec<usize>,
    /// `[batch] + unit` when false; `unit` with its first axis multiplied by the
    /// batch size when true (a matrix with one row per example and position).
    pub merge_batch: bool,
    pub fill: f32,
}

impl Scratch {
    /// `[batch] + unit`.
    pub fn batched(unit: Vec<usize>, fill: f32) -> Self {
        Scratch {
            unit,
            merge_batch: false,
            fill,
        }
    }

    /// The shape at batch size `batch`.
    pub fn dims(&self, batch: usize) -> Vec<usize> {
        match (self.merge_batch, self.unit.split_first()) {
            (true, Some((&rows, rest))) => {
                let mut dims = vec![batch.saturating_mul(rows)];
                dims.extend_from_slice(rest);
                dims
            }
            _ => batched(batch, &self.unit),
        }
    }
}

/// A parameter a layer declares: role (`weight`), shape and initialiser.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ParamSpec {
    pub role: String,
    pub shape: Vec<usize>,
    pub init: Init,
}

/// A per-context buffer whose shape the layer gives: one that depends on the
/// call's time length and batch size (an LSTM's per-layer outputs, its
/// reserve, index lists), or a fixed one (a derived weight).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FrameScratch {
    pub dims: Vec<usize>,
    pub dtype: DType,
}

impl FrameScratch {
    pub fn f32(dims: Vec<usize>) -> Self {
        FrameScratch {
            dims,
            dtype: DType::F32,
        }
    }

    pub fn i32(dims: Vec<usize>) -> Self {
        FrameScratch {
            dims,
            dtype: DType::I32,
        }
    }
}

/// How a layer treats the time axis of sequence values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimeRule {
    /// Applies to every frame alike: a sequence in, a sequence out (the
    /// value's frames are its rows, so the layer never sees the time axis).
    PerFrame,
    /// Needs a sequence and gives one (LSTM).
    Sequence,
    /// Needs a sequence and gives one value per example (time reductions).
    Reduce,
}

/// The time rule of a layer type.
pub(crate) fn time_rule(config: &LayerConfig) -> TimeRule {
    match config {
        LayerConfig::LSTM { .. } => TimeRule::Sequence,
        LayerConfig::LastFrame | LayerConfig::MeanOverTime | LayerConfig::MaxOverTime => {
            TimeRule::Reduce
        }
        _ => TimeRule::PerFrame,
    }
}

/// The time axis of one call: the padded length, the batch size and each
/// example's length (int32 `[B]` on the device, and on the host).
///
/// A sequence value is stored time-major with time and batch merged into its
/// first axis: frame `t` of example `b` is row `t * batch + b`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seq<'a> {
    pub time: usize,
    pub batch: usize,
    pub lengths: &'a Tensor,
    pub host: &'a [i32],
    /// Whether recurrent layers start from the state the last call ended in.
    pub carry: bool,
}

/// The result of building a layer from its config and input unit shapes.
pub(crate) struct Built {
    pub layer: Box<dyn Layer>,
    pub output: Vec<usize>,
    pub params: Vec<ParamSpec>,
}

/// Read access to a layer's inputs among the network's values.
#[derive(Clone, Copy)]
pub(crate) struct Inputs<'a> {
    pub ids: &'a [usize],
    pub values: &'a [Tensor],
}

impl<'a> Inputs<'a> {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn get(&self, k: usize) -> Result<&'a Tensor> {
        self.ids
            .get(k)
            .and_then(|&v| self.values.get(v))
            .ok_or_else(|| internal("input index out of range"))
    }
}

/// Read access to a layer's parameters.
#[derive(Clone, Copy)]
pub(crate) struct Params<'a> {
    pub ids: &'a [usize],
    pub all: &'a [Parameter],
    /// Values that stand in for some parameters (weight dropout and weight
    /// noise in training, see `weight_param`).
    pub derived: Option<Derived<'a>>,
}

/// Derived values of parameters: `slot[j]` is the index in `values` of the
/// value that parameter `j` reads as, if any.
#[derive(Clone, Copy)]
pub(crate) struct Derived<'a> {
    pub slot: &'a [Option<usize>],
    pub values: &'a [Tensor],
}

impl<'a> Params<'a> {
    /// The layer's own parameters, as stored.
    pub fn new(ids: &'a [usize], all: &'a [Parameter]) -> Self {
        Params {
            ids,
            all,
            derived: None,
        }
    }

    /// Parameter `j` as the layer computes with it (its derived value where
    /// it has one).
    pub fn get(&self, j: usize) -> Result<&'a Tensor> {
        if let Some(d) = self.derived {
            if let Some(&Some(s)) = d.slot.get(j) {
                return d
                    .values
                    .get(s)
                    .ok_or_else(|| internal("derived parameter missing"));
            }
        }
        self.ids
            .get(j)
            .and_then(|&p| self.all.get(p))
            .map(|p| &p.value)
            .ok_or_else(|| internal("parameter index out of range"))
    }
}

/// Where a layer's parameter gradient goes: the parameter's gradient itself,
/// or (for a shared parameter) this user's own buffer that the network sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ParamDst {
    Grad(usize),
    Edge(usize),
}

/// Write access to a layer's parameter-gradient destinations, one at a time.
pub(crate) struct ParamGrads<'a> {
    pub dst: &'a [ParamDst],
    pub grads: &'a mut [Tensor],
    pub edges: &'a mut [Option<Tensor>],
}

impl ParamGrads<'_> {
    pub fn get(&mut self, j: usize) -> Result<&mut Tensor> {
        match self.dst.get(j) {
            Some(ParamDst::Grad(p)) => self.grads.get_mut(*p),
            Some(ParamDst::Edge(e)) => self.edges.get_mut(*e).and_then(Option::as_mut),
            None => None,
        }
        .ok_or_else(|| internal("parameter gradient missing"))
    }

    /// The destinations of `N` different parameters at once.
    pub fn several<const N: usize>(&mut self, js: [usize; N]) -> Result<[&mut Tensor; N]> {
        let missing = || internal("parameter gradient missing");
        let ParamGrads { dst, grads, edges } = self;
        let mut grads: Vec<Option<&mut Tensor>> = grads.iter_mut().map(Some).collect();
        let mut edges: Vec<Option<&mut Tensor>> = edges.iter_mut().map(Option::as_mut).collect();
        let mut out = Vec::with_capacity(N);
        for j in js {
            let t = match dst.get(j) {
                Some(ParamDst::Grad(p)) => grads.get_mut(*p).and_then(Option::take),
                Some(ParamDst::Edge(e)) => edges.get_mut(*e).and_then(Option::take),
                None => None,
            };
            out.push(t.ok_or_else(missing)?);
        }
        out.try_into().map_err(|_| missing())
    }

    /// The destinations of two different parameters `j` and `k` at once.
    pub fn pair(&mut self, j: usize, k: usize) -> Result<(&mut Tensor, &mut Tensor)> {
        let missing = || internal("parameter gradient missing");
        let (dj, dk) = match (self.dst.get(j), self.dst.get(k)) {
            (Some(a), Some(b)) if j != k => (*a, *b),
            _ => return Err(missing()),
        };
        match (dj, dk) {
            (ParamDst::Grad(p), ParamDst::Grad(q)) => {
                let [a, b] = self.grads.get_disjoint_mut([p, q]).map_err(|_| missing())?;
                Ok((a, b))
            }
            (ParamDst::Edge(e), ParamDst::Edge(f)) => {
                match self.edges.get_disjoint_mut([e, f]).map_err(|_| missing())? {
                    [Some(a), Some(b)] => Ok((a, b)),
                    _ => Err(missing()),
                }
            }
            (ParamDst::Grad(p), ParamDst::Edge(e)) => {
                let a = self.grads.get_mut(p);
                let b = self.edges.get_mut(e).and_then(Option::as_mut);
                a.zip(b).ok_or_else(missing)
            }
            (ParamDst::Edge(e), ParamDst::Grad(p)) => {
                let a = self.edges.get_mut(e).and_then(Option::as_mut);
                let b = self.grads.get_mut(p);
                a.zip(b).ok_or_else(missing)
            }
        }
    }
}

/// The dropout stream of one layer for one step.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stream {
    pub seed: u64,
    pub offset: u64,
}

/// Everything a forward computation reads and writes.
pub(crate) struct Forward<'a> {
    pub x: Inputs<'a>,
    pub y: &'a mut Tensor,
    pub params: Params<'a>,
    pub scratch: &'a mut [Tensor],
    pub train: bool,
    pub stream: Stream,
    /// The time axis, when the network has sequence inputs.
    pub seq: Option<Seq<'a>>,
    /// Mixed precision: the reduced float that products round their
    /// operands to (see [`Context::set_precision`](crate::Context::set_precision)).
    pub precision: Option<DType>,
}

/// Everything a backward computation reads and writes. `dx[k]` is `None` when
/// input `k` needs no gradient.
pub(crate) struct Backward<'a> {
    pub x: Inputs<'a>,
    pub y: &'a Tensor,
    pub dy: &'a Tensor,
    pub dx: &'a mut [Option<Tensor>],
    pub params: Params<'a>,
    pub dparams: ParamGrads<'a>,
    pub scratch: &'a mut [Tensor],
    pub train: bool,
    pub stream: Stream,
    /// The time axis, when the network has sequence inputs.
    pub seq: Option<Seq<'a>>,
    /// As [`Forward::precision`].
    pub precision: Option<DType>,
}

/// A product's operand under a [`Forward::precision`]: the tensor itself, or
/// its values rounded to the reduced float (in a fresh float32 tensor).
pub(crate) enum Operand<'t> {
    Plain(&'t Tensor),
    Rounded(Tensor),
}

impl<'t> Operand<'t> {
    /// `t` as a product of `precision`'s operands reads it.
    pub(crate) fn of(be: &dyn Backend, t: &'t Tensor, precision: Option<DType>) -> Result<Self> {
        Ok(match precision {
            Some(dtype) => Operand::Rounded(verjus_core::ops::rounded(be, t, dtype)?),
            None => Operand::Plain(t),
        })
    }
}

impl std::ops::Deref for Operand<'_> {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        match self {
            Operand::Plain(t) => t,
            Operand::Rounded(t) => t,
        }
    }
}

/// A leaf layer's run-time behaviour.
pub(crate) trait Layer: Send + Sync + fmt::Debug {
    /// `y = f(x; params)`.
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()>;
    /// Input gradients (where wanted) and parameter gradients from `dy`.
    fn backward(&self, be: &dyn Backend, io: Backward<'_>) -> Result<()>;
    /// Scratch buffers per context; `needs_dx[k]` tells whether input `k` gets a gradient.
    fn scratch(&self, needs_dx: &[bool]) -> Vec<Scratch> {
        let _ = needs_dx;
        Vec::new()
    }
    /// The recurrent state a call ends in (`(name, scratch index)`, `[B, H]`
    /// each), which the next call starts from when the context carries state.
    fn state(&self) -> Vec<(String, usize)> {
        Vec::new()
    }
    /// Scratch buffers whose shapes the layer gives itself, from the call's
    /// time length and batch size (layers that see the time axis) or fixed
    /// (derived weights, `weight_param`), after those of [`Layer::scratch`].
    fn frame_scratch(
        &self,
        be: &dyn Backend,
        time: usize,
        batch: usize,
        needs_dx: &[bool],
    ) -> Result<Vec<FrameScratch>> {
        let _ = (be, time, batch, needs_dx);
        Ok(Vec::new())
    }
}

/// The call's time axis, or an error naming the layer that needs one.
pub(crate) fn need_seq<'a>(seq: Option<Seq<'a>>, kind: &str) -> Result<Seq<'a>> {
    seq.ok_or_else(|| internal(&format!("{kind} ran without a time axis")))
}

/// An error for a broken internal invariant (never a user's mistake).
pub(crate) fn internal(msg: &str) -> Error {
    Error::invalid("verjus-nn (internal)", msg.to_string())
}

/// The scratch buffer `i`, or an internal error.
pub(crate) fn scratch_at(scratch: &mut [Tensor], i: usize) -> Result<&mut Tensor> {
    scratch
        .get_mut(i)
        .ok_or_else(|| internal("scratch buffer missing"))
}

/// Fails unless the layer has exactly `n` inputs.
pub(crate) fn expect_inputs(path: &str, kind: &str, shapes: &[Vec<usize>], n: usize) -> Result<()> {
    if shapes.len() != n {
        return Err(Error::definition(
            path,
            format!("{kind} takes {n} input(s), got {}", shapes.len()),
        ));
    }
    Ok(())
}

/// A unit axis from a possibly negative index, or a definition error.
pub(crate) fn unit_axis(path: &str, axis: isize, shape: &[usize]) -> Result<usize> {
    let rank = shape.len() as isize;
    let a = if axis < 0 { axis + rank } else { axis };
    if a < 0 || a >= rank {
        return Err(Error::definition(
            path,
            format!(
                "axis {axis} is out of range for input shape {} of rank {rank}",
                fmt_shape(shape)
            ),
        ));
    }
    Ok(a as usize)
}

/// `[a, b, c]`.
pub(crate) fn fmt_shape(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// Builds the layer for `config` given its inputs' unit shapes.
pub(crate) fn build(path: &str, config: &LayerConfig, inputs: &[Vec<usize>]) -> Result<Built> {
    use activation::Activation;
    use verjus_core::ops::UnaryOp;
    match config {
        LayerConfig::Linear {
            in_features,
            out_features,
            bias,
        } => linear::build(path, inputs, *in_features, *out_features, *bias),
        LayerConfig::Conv2d {
            out_channels,
            kernel,
            stride,
            padding,
            dilation,
            bias,
        } => conv2d::build(
            path,
            inputs,
            conv2d::Settings {
                out_channels: *out_channels,
                kernel: kernel.get(),
                stride: stride.get(),
                padding: padding.get(),
                dilation: dilation.get(),
                bias: *bias,
            },
        ),
        LayerConfig::MaxPool2d {
            kernel,
            stride,
            padding,
        } => pool::build(
            path,
            inputs,
            verjus_core::ops::PoolKind::Max,
            *kernel,
            *stride,
            *padding,
            false,
        ),
        LayerConfig::AvgPool2d {
            kernel,
            stride,
            padding,
        } => pool::build(
            path,
            inputs,
            verjus_core::ops::PoolKind::Avg,
            *kernel,
            *stride,
            *padding,
            false,
        ),
        LayerConfig::ReLU => Activation::build(path, "ReLU", inputs, UnaryOp::Relu),
        LayerConfig::Sigmoid => Activation::build(path, "Sigmoid", inputs, UnaryOp::Sigmoid),
        LayerConfig::Tanh => Activation::build(path, "Tanh", inputs, UnaryOp::Tanh),
        LayerConfig::GELU => Activation::build(path, "GELU", inputs, UnaryOp::Gelu),
        LayerConfig::Softmax { axis } => softmax::build(path, inputs, *axis, false),
        LayerConfig::LogSoftmax { axis } => softmax::build(path, inputs, *axis, true),
        LayerConfig::Dropout { p } => dropout::build(path, inputs, *p),
        LayerConfig::Flatten => {
            expect_inputs(path, "Flatten", inputs, 1)?;
            let numel = inputs[0].iter().product();
            reshape::build(path, inputs, vec![numel])
        }
        LayerConfig::Reshape { shape } => reshape::build(path, inputs, shape.clone()),
        LayerConfig::Add => add::build(path, inputs),
        LayerConfig::Concat { axis } => concat::build(path, inputs, *axis),
        LayerConfig::Embedding { vocab, dim } => embedding::build(path, inputs, *vocab, *dim),
        LayerConfig::LSTM {
            hidden,
            num_layers,
            dropout,
            bidirectional,
            bias,
        } => lstm::build(
            path,
            inputs,
            lstm::Settings {
                hidden: *hidden,
                layers: *num_layers,
                dropout: *dropout,
                bidirectional: *bidirectional,
                bias: *bias,
            },
        ),
        LayerConfig::LastFrame => time_reduce::build(path, inputs, time_reduce::Kind::Last),
        LayerConfig::MeanOverTime => time_reduce::build(path, inputs, time_reduce::Kind::Mean),
        LayerConfig::MaxOverTime => time_reduce::build(path, inputs, time_reduce::Kind::Max),
        LayerConfig::Sequential { .. } | LayerConfig::Graph { .. } => Err(Error::definition(
            path,
            "containers are flattened before layers are built",
        )),
    }
}

/// `[batch] + unit`.
pub(crate) fn batched(batch: usize, unit: &[usize]) -> Vec<usize> {
    let mut dims = Vec::with_capacity(unit.len() + 1);
    dims.push(batch);
    dims.extend_from_slice(unit);
    dims
}
