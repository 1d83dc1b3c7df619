//! Graph nodes: what an op leaves behind for the backward pass.
//!
//! A node belongs to the one [`Var`] its op produced (ops with several outputs,
//! such as split, make one node per output). It holds the op's backward
//! closure, which owns whatever the op saved, and one edge per input: to the
//! node that made the input, to the input itself when it is a leaf, or nothing
//! when the input needs no gradient.

use super::grad_mode::is_grad_enabled;
use super::var::Var;
use crate::{Backend, BackendRef, Result, Shape, Tensor};
use std::sync::Arc;

/// Computes the inputs' gradients from the output's gradient `dy`: one entry
/// per input, `None` where `needs` is false (or the input gets no gradient).
pub(crate) type BackwardFn =
    Box<dyn Fn(&dyn Backend, Tensor, &[bool]) -> Result<Vec<Option<Tensor>>> + Send + Sync>;

/// The op that made a [`Var`].
pub(crate) struct Node {
    pub(crate) name: &'static str,
    pub(crate) backend: BackendRef,
    pub(crate) edges: Vec<Option<Edge>>,
    pub(crate) backward: BackwardFn,
}

/// Where the gradient of one input goes, and the shape it must have.
pub(crate) struct Edge {
    pub(crate) target: EdgeTarget,
    pub(crate) shape: Shape,
}

/// The producer of an input: another op's node, or a leaf's gradient slot.
pub(crate) enum EdgeTarget {
    Node(Arc<Node>),
    Leaf(Var),
}

impl Node {
    /// The nodes this node's inputs came from.
    pub(crate) fn producers(&self) -> impl Iterator<Item = &Arc<Node>> {
        self.edges.iter().flatten().filter_map(|e| match &e.target {
            EdgeTarget::Node(n) => Some(n),
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
            EdgeTarget::Node(n) => Some(n),
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
    /// Wraps an op's output. When [`recording`], the result requires a gradient
    /// and owns a node with `backward`; otherwise `backward` (and what it saved)
    /// is dropped and the result is a constant.
    pub(crate) fn from_op(
        name: &'static str,
        value: Arc<Tensor>,
        backend: &BackendRef,
        inputs: &[&Var],
        backward: BackwardFn,
    ) -> Var {
        let backend = backend.clone();
        if !recording(inputs) {
            return Var::from_parts(value, backend, false, None);
        }
        let edges = inputs
            .iter()
            .map(|v| {
                v.requires_grad().then(|| Edge {
                    target: match v.grad_fn() {
                        Some(node) => EdgeTarget::Node(node.clone()),
                        None => EdgeTarget::Leaf((*v).clone()),
                    },
                    shape: v.shape(),
                })
            })
            .collect();
        let node = Node {
            name,
            backend: backend.clone(),
            edges,
            backward,
        };
        Var::from_parts(value, backend, true, Some(Arc::new(node)))
    }
}
