//! Graph nodes: what an op leaves behind for the backward pass.
//!
//! A node belongs to the [`Var`]s its op produced. Most ops have one output;
//! an op whose outputs share one backward (the LSTM: `y`, `h_n`, `c_n`) makes
//! one node for all of them, and each output `Var` names its index in the node
//! ([`Var::output`]), so the engine collects one gradient slot per output and
//! calls the backward once with all of them (`None` for an output no gradient
//! reached). Ops whose outputs have independent backwards (split) make one
//! node per output instead. A node holds the op's backward closure, which owns
//! whatever tensors the op made and saved, the [`Source`]s of the input values
//! the backward reads (handed to it as [`Inputs`] when it runs; see
//! `checkpoint.rs` for why they are not captured), and one edge per input: to
//! the output of the node that made the input, to the input itself when it is
//! a leaf, or nothing when the input needs no gradient.

use super::checkpoint::{Replay, Source};
use super::grad_mode::is_grad_enabled;
use super::resolve::Inputs;
use super::var::Var;
use crate::{Backend, BackendRef, Result, Shape, Tensor};
use std::sync::Arc;

/// Computes the inputs' gradients from the output's gradient `dy` and the
/// input values it reads (`inputs`): one entry per input, `None` where `needs`
/// is false (or the input gets no gradient).
pub(crate) type BackwardFn = Box<
    dyn Fn(&dyn Backend, Tensor, &Inputs<'_>, &[bool]) -> Result<Vec<Option<Tensor>>> + Send + Sync,
>;

/// [`BackwardFn`] of an op with several outputs: it gets one gradient per
/// output, `None` for an output that no gradient reached (at least one is
/// `Some`).
pub(crate) type MultiBackwardFn = Box<
    dyn Fn(&dyn Backend, Vec<Option<Tensor>>, &Inputs<'_>, &[bool]) -> Result<Vec<Option<Tensor>>>
        + Send
        + Sync,
>;

/// How a node computes its inputs' gradients.
pub(crate) enum Backward {
    /// The op's backward, kept.
    Kept(MultiBackwardFn),
    /// The op ran in a gradient checkpoint scope and its backward (with what
    /// it saved) was dropped: re-run the forward, then call the fresh backward.
    Replay(Arc<Replay>),
}

/// The op that made one or several [`Var`]s.
pub(crate) struct Node {
    pub(crate) name: &'static str,
    pub(crate) backend: BackendRef,
    pub(crate) edges: Vec<Option<Edge>>,
    /// How many outputs the op has (each output `Var` knows its index).
    pub(crate) outputs: usize,
    /// Where the input values the backward reads come from, by input (`None`
    /// for one it does not read; empty when it reads none).
    pub(crate) inputs: Vec<Option<Source>>,
    pub(crate) backward: Backward,
}

/// Where the gradient of one input goes, and the shape it must have.
pub(crate) struct Edge {
    pub(crate) target: EdgeTarget,
    pub(crate) shape: Shape,
}

/// The producer of an input: an output (by index) of another op's node, or a
/// leaf's gradient slot.
pub(crate) enum EdgeTarget {
    Node(Arc<Node>, usize),
    Leaf(Var),
}

impl Node {
    /// The nodes this node's inputs came from.
    pub(crate) fn producers(&self) -> impl Iterator<Item = &Arc<Node>> {
        self.edges.iter().flatten().filter_map(|e| match &e.target {
            EdgeTarget::Node(n, _) => Some(n),
            EdgeTarget::Leaf(_) => None,
        })
    }
}

impl Drop for Node {
    /// Frees a long chain (an unrolled RNN) iteratively: the default drop would
    /// recurse once per node and overflow the stack.
    fn drop(&mut self) {
        let mut stack = take_producers(&mut self.edges);
        while let Some(node) = stack.pop() {
            if let Ok(mut node) = Arc::try_unwrap(node) {
                stack.extend(take_producers(&mut node.edges));
            }
        }
    }
}

fn take_producers(edges: &mut Vec<Option<Edge>>) -> Vec<Arc<Node>> {
    std::mem::take(edges)
        .into_iter()
        .flatten()
        .filter_map(|e| match e.target {
            EdgeTarget::Node(n, _) => Some(n),
            EdgeTarget::Leaf(_) => None,
        })
        .collect()
}

/// Whether input `i` needs a gradient (`needs` as a [`BackwardFn`] gets it).
pub(crate) fn need(needs: &[bool], i: usize) -> bool {
    needs.get(i).copied().unwrap_or(false)
}

/// Whether an op on `inputs` records a node: grad mode is on and some input
/// requires a gradient.
pub(crate) fn recording(inputs: &[&Var]) -> bool {
    is_grad_enabled() && inputs.iter().any(|v| v.requires_grad())
}

impl Var {
    /// Wraps the outputs of an op with several outputs and one backward:
    /// when [`recording`], they share one node (whose input values come from
    /// `sources()`) and each output `Var` is its index in it; otherwise they
    /// are constants.
    pub(crate) fn from_op_many<const N: usize>(
        name: &'static str,
        values: [Arc<Tensor>; N],
        backend: &BackendRef,
        inputs: &[&Var],
        backward: Backward,
        sources: impl FnOnce() -> Vec<Option<Source>>,
    ) -> [Var; N] {
        let vars = Var::from_op_outputs(name, values.into(), backend, inputs, backward, sources);
        match vars.try_into() {
            Ok(vars) => vars,
            Err(_) => unreachable!("one Var per value"),
        }
    }

    /// [`Var::from_op_many`] for a number of outputs known only at run time.
    pub(crate) fn from_op_outputs(
        name: &'static str,
        values: Vec<Arc<Tensor>>,
        backend: &BackendRef,
        inputs: &[&Var],
        backward: Backward,
        sources: impl FnOnce() -> Vec<Option<Source>>,
    ) -> Vec<Var> {
        if !recording(inputs) {
            return values
                .into_iter()
                .map(|v| Var::from_parts(v, backend.clone(), false, None))
                .collect();
        }
        let edges = inputs
            .iter()
            .map(|v| {
                v.requires_grad().then(|| Edge {
                    target: match v.grad_fn() {
                        Some(node) => EdgeTarget::Node(node.clone(), v.output()),
                        None => EdgeTarget::Leaf((*v).clone()),
                    },
                    shape: v.shape(),
                })
            })
            .collect();
        let node = Arc::new(Node {
            name,
            backend: backend.clone(),
            edges,
            outputs: values.len(),
            inputs: sources(),
            backward,
        });
        values
            .into_iter()
            .enumerate()
            .map(|(output, v)| {
                Var::from_parts(v, backend.clone(), true, Some((node.clone(), output)))
            })
            .collect()
    }
}
