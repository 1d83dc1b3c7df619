//! The static network: built once from a [`NetworkDef`], shared by any number
//! of [`crate::Context`]s.
//!
//! Building flattens the definition into leaf layers in topological order
//! (`graph`), infers every shape once, binds parameters (sharing included) and
//! draws their initial values. Every mistake in a definition is an
//! [`Error::Definition`] found here, naming the layer's path, rather than a
//! failure in the middle of a training step. The network holds no
//! per-invocation state and no pointers (layers, values and parameters are
//! identified by index), so it is `Send + Sync` and one instance can serve
//! several threads, each with its own context.

use crate::def::{InputDef, NetworkDef};
use crate::descriptor::{Descriptor, ParamDesc};
use crate::fuse;
use crate::graph::{self, Source};
use crate::layers::{self, fmt_shape, Layer, ParamSpec, TimeRule};
use crate::parameter::{self, Parameter};
use std::sync::atomic::{AtomicU64, Ordering};
use verjus_core::{Backend, Error, Result, Shape};

/// One leaf layer as it runs.
#[derive(Debug)]
pub(crate) struct Node {
    pub layer: Box<dyn Layer>,
    /// Value ids of the inputs (network inputs first, then node outputs).
    pub inputs: Vec<usize>,
    /// Indices into the parameter list.
    pub params: Vec<usize>,
    /// Whether some output depends on this node.
    pub live: bool,
}

/// A built network. See the module docs.
///
/// Values are numbered: network input `i` is value `i`; the output of the
/// node at topological position `t` is value `n_inputs + t`.
#[derive(Debug)]
pub struct Network {
    pub(crate) id: u64,
    pub(crate) seed: u64,
    def: NetworkDef,
    descriptors: Vec<Descriptor>,
    pub(crate) parameters: Vec<Parameter>,
    /// Per parameter: whether a live node uses it, so that backward gives it a
    /// gradient. The Trainer updates only these (see [`Network::build`]).
    pub(crate) trained: Vec<bool>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) n_inputs: usize,
    /// Unit shape per value (of one frame, for a sequence).
    pub(crate) value_units: Vec<Vec<usize>>,
    /// Per value: whether it is a sequence (stored time-major, `[T*B] + unit`).
    pub(crate) value_seq: Vec<bool>,
    /// Per network input: the vocabulary of the Embeddings reading it
    /// (the smallest, when several do), for checking token ids.
    pub(crate) vocab: Vec<Option<(usize, String)>>,
    /// `(name, value id)` per output.
    pub(crate) outputs: Vec<(String, usize)>,
}

/// Distinguishes networks so that a context cannot be used with another one.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Network {
    /// Builds `def`: resolves names, orders the layers, infers shapes, binds
    /// shared parameters, and initialises every parameter on `be` from `seed`
    /// (PyTorch's default distributions, drawn from the Philox stream).
    pub fn build(def: NetworkDef, be: &dyn Backend, seed: u64) -> Result<Network> {
        let flat = graph::flatten(&def)?;
        let n_in = def.inputs.len();
        let mut value_units = Vec::with_capacity(n_in + flat.leaves.len());
        let mut value_seq = Vec::with_capacity(n_in + flat.leaves.len());
        for input in &def.inputs {
            Shape::new(input.shape.clone())
                .map_err(|e| Error::definition(&input.name, format!("bad input shape: {e}")))?;
            value_units.push(input.shape.clone());
            value_seq.push(input.sequence);
        }
        let mut vocab: Vec<Option<(usize, String)>> = vec![None; n_in];
        let mut position = vec![0; flat.leaves.len()];
        for (t, &l) in flat.order.iter().enumerate() {
            position[l] = t;
        }
        let value_of = |s: Source| match s {
            Source::Input(i) => i,
            Source::Leaf(l) => n_in + position[l],
        };

        // Shape inference, in topological order.
        let mut built = Vec::with_capacity(flat.order.len());
        for &l in &flat.order {
            let leaf = &flat.leaves[l];
            let ins: Vec<usize> = leaf.inputs.iter().map(|&s| value_of(s)).collect();
            let shapes: Vec<Vec<usize>> = ins.iter().map(|&v| value_units[v].clone()).collect();
            let config = &leaf.def.config;
            check_dtypes(&leaf.path, config, &ins, &def)?;
            if let crate::def::LayerConfig::Embedding { vocab: v, .. } = *config {
                let slot = &mut vocab[ins[0]];
                if slot.as_ref().is_none_or(|(known, _)| v < *known) {
                    *slot = Some((v, leaf.path.clone()));
                }
            }
            let seq = time_of(&leaf.path, config, &ins, &value_seq, &def)?;
            let b = layers::build(&leaf.path, config, &shapes)?;
            let b = layers::weight_param::wrap(&leaf.path, leaf.def, b)?;
            Shape::new(b.output.clone()).map_err(|e| {
                Error::definition(&leaf.path, format!("output shape is too large: {e}"))
            })?;
            value_units.push(b.output.clone());
            value_seq.push(seq);
            built.push((ins, shapes, b));
        }

        // Parameters in definition order; sharers take their owner's.
        let mut param_ids: Vec<Vec<usize>> = vec![Vec::new(); flat.leaves.len()];
        let mut specs: Vec<(String, ParamSpec)> = Vec::new();
        for (l, leaf) in flat.leaves.iter().enumerate() {
            if leaf.share.is_none() {
                for spec in &built[position[l]].2.params {
                    Shape::new(spec.shape.clone()).map_err(|e| {
                        Error::definition(&leaf.path, format!("{} is too large: {e}", spec.role))
                    })?;
                    param_ids[l].push(specs.len());
                    specs.push((format!("{}.{}", leaf.path, spec.role), spec.clone()));
                }
            }
        }
        for (l, leaf) in flat.leaves.iter().enumerate() {
            if let Some(owner) = leaf.share {
                check_shared(
                    &leaf.path,
                    &built[position[l]].2.params,
                    &flat.leaves[owner].path,
                    &built[position[owner]].2.params,
                )?;
                param_ids[l] = param_ids[owner].clone();
            }
        }

        // Liveness: everything an output depends on.
        let outputs: Vec<(String, usize)> = flat
            .outputs
            .iter()
            .map(|(name, l)| (name.clone(), n_in + position[*l]))
            .collect();
        let mut live = vec![false; flat.order.len()];
        let mut stack: Vec<usize> = outputs.iter().map(|&(_, v)| v - n_in).collect();
        while let Some(t) = stack.pop() {
            if !std::mem::replace(&mut live[t], true) {
                stack.extend(built[t].0.iter().filter(|&&v| v >= n_in).map(|&v| v - n_in));
            }
        }

        let mut offset = 0u64;
        let mut parameters = Vec::with_capacity(specs.len());
        for (name, spec) in &specs {
            let shape = Shape::new(spec.shape.clone())?;
            let value = parameter::initialise(be, &shape, spec.init, seed, &mut offset)?;
            parameters.push(Parameter {
                name: name.clone(),
                value,
            });
        }

        let name_of = |v: usize| -> String {
            if v < n_in {
                def.inputs[v].name.clone()
            } else {
                flat.leaves[flat.order[v - n_in]].path.clone()
            }
        };
        let mut descriptors = Vec::with_capacity(built.len());
        let mut nodes = Vec::with_capacity(built.len());
        for (t, (ins, shapes, b)) in built.into_iter().enumerate() {
            let l = flat.order[t];
            let leaf = &flat.leaves[l];
            let params = param_ids[l].clone();
            descriptors.push(Descriptor {
                path: leaf.path.clone(),
                kind: leaf.def.config.kind(),
                inputs: ins.iter().map(|&v| name_of(v)).collect(),
                input_shapes: shapes,
                output_shape: b.output,
                params: params
                    .iter()
                    .zip(&b.params)
                    .map(|(&index, spec)| ParamDesc {
                        name: specs[index].0.clone(),
                        shape: spec.shape.clone(),
                        init: spec.init,
                        index,
                    })
                    .collect(),
                shares: leaf.share.map(|o| flat.leaves[o].path.clone()),
                live: live[t],
                sequence: value_seq[n_in + t],
            });
            nodes.push(Node {
                layer: b.layer,
                inputs: ins,
                params,
                live: live[t],
            });
        }
        let output_values: Vec<usize> = outputs.iter().map(|&(_, v)| v).collect();
        fuse::relu_into_max_pool(&mut nodes, &flat, n_in, &value_units, &output_values)?;
        let mut trained = vec![false; parameters.len()];
        for node in nodes.iter().filter(|n| n.live) {
            node.params.iter().for_each(|&p| trained[p] = true);
        }
        Ok(Network {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            seed,
            def,
            descriptors,
            parameters,
            trained,
            nodes,
            n_inputs: n_in,
            value_units,
            value_seq,
            vocab,
            outputs,
        })
    }

    /// The seed the parameters were drawn from; it also keys the dropout
    /// streams of this network's contexts.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The definition this network was built from.
    pub fn def(&self) -> &NetworkDef {
        &self.def
    }

    /// One descriptor per leaf layer, in execution (topological) order.
    pub fn descriptors(&self) -> &[Descriptor] {
        &self.descriptors
    }

    /// The named inputs and their unit shapes.
    pub fn inputs(&self) -> &[InputDef] {
        &self.def.inputs
    }

    /// Whether some input is a sequence (has a time axis).
    pub fn takes_sequences(&self) -> bool {
        self.def.inputs.iter().any(|i| i.sequence)
    }

    /// Whether output `i` is a sequence: [`crate::Context::output`] is then
    /// time-major `[T * batch] + unit` (frame `t` of example `b` in row
    /// `t * batch + b`).
    pub fn output_is_sequence(&self, i: usize) -> bool {
        self.outputs.get(i).is_some_and(|&(_, v)| self.value_seq[v])
    }

    /// The element type of value `v` (int32 only for token-id inputs).
    pub(crate) fn value_dtype(&self, v: usize) -> verjus_core::DType {
        self.def
            .inputs
            .get(v)
            .map_or(verjus_core::DType::F32, |i| i.dtype.dtype())
    }

    /// Name and unit shape of each output.
    pub fn output_shapes(&self) -> Vec<(String, Vec<usize>)> {
        self.outputs
            .iter()
            .map(|(name, v)| (name.clone(), self.value_units[*v].clone()))
            .collect()
    }

    /// The learnable parameters, in definition order (a shared parameter once).
    pub fn parameters(&self) -> &[Parameter] {
        &self.parameters
    }

    /// The parameters, for solvers and weight loading. Keep the shapes.
    pub fn parameters_mut(&mut self) -> &mut [Parameter] {
        &mut self.parameters
    }

    /// Total number of learnable scalars.
    pub fn parameter_count(&self) -> usize {
        self.parameters.iter().map(|p| p.value.numel()).sum()
    }
}

/// Token ids (int32 inputs) feed Embeddings only, and Embeddings read only them.
fn check_dtypes(
    path: &str,
    config: &crate::def::LayerConfig,
    ins: &[usize],
    def: &NetworkDef,
) -> Result<()> {
    let embedding = matches!(config, crate::def::LayerConfig::Embedding { .. });
    for &v in ins {
        let int = def
            .inputs
            .get(v)
            .is_some_and(|i| i.dtype == crate::def::InputDType::I32);
        if int != embedding {
            let name = def
                .inputs
                .get(v)
                .map_or("a layer output", |i| i.name.as_str());
            let (expected, actual) = if embedding {
                (
                    "int32 token ids (a network input with \"dtype\": \"int32\")",
                    "float32",
                )
            } else {
                ("float32 values", "int32 token ids")
            };
            return Err(Error::definition(
                path,
                format!(
                    "{} expects {expected}, got {actual} from {name:?}",
                    config.kind()
                ),
            ));
        }
    }
    Ok(())
}

/// Whether a layer's output is a sequence, checking that its inputs are what
/// its time rule needs.
fn time_of(
    path: &str,
    config: &crate::def::LayerConfig,
    ins: &[usize],
    value_seq: &[bool],
    def: &NetworkDef,
) -> Result<bool> {
    let seqs: Vec<bool> = ins.iter().map(|&v| value_seq[v]).collect();
    let any = seqs.iter().any(|&s| s);
    match layers::time_rule(config) {
        TimeRule::PerFrame => {
            if any && !seqs.iter().all(|&s| s) {
                return Err(Error::definition(
                    path,
                    format!(
                        "{} mixes sequence and per-example inputs (sequence: {seqs:?}); \
                         reduce the sequences over time first",
                        config.kind()
                    ),
                ));
            }
            Ok(any)
        }
        TimeRule::Sequence | TimeRule::Reduce if !any => Err(Error::definition(
            path,
            format!(
                "{} expects a sequence input [T, B, ...] (from a network input with a null \
                 time axis, e.g. {{\"shape\": [null, F]}}), got a per-example value{}",
                config.kind(),
                if def.inputs.iter().any(|i| i.sequence) {
                    " (a time reduction came before it)"
                } else {
                    ""
                }
            ),
        )),
        TimeRule::Sequence => Ok(true),
        TimeRule::Reduce => Ok(false),
    }
}

/// A sharer's parameters must be the owner's in role and shape.
fn check_shared(path: &str, mine: &[ParamSpec], owner: &str, theirs: &[ParamSpec]) -> Result<()> {
    let describe = |specs: &[ParamSpec]| -> String {
        let parts: Vec<String> = specs
            .iter()
            .map(|s| format!("{} {}", s.role, fmt_shape(&s.shape)))
            .collect();
        format!("({})", parts.join(", "))
    };
    let same = mine.len() == theirs.len()
        && mine
            .iter()
            .zip(theirs)
            .all(|(a, b)| a.role == b.role && a.shape == b.shape);
    if !same {
        return Err(Error::definition(
            path,
            format!(
                "cannot share the parameters of {owner:?}: it has {}, this layer needs {}",
                describe(theirs),
                describe(mine)
            ),
        ));
    }
    Ok(())
}
