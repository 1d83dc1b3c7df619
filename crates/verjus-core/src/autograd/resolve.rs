//! The input values a backward closure reads, given to it when it runs.
//!
//! A node keeps, for each input its backward reads (see
//! [`Saves`](super::record::Saves)), a [`Source`]: the value itself, or the
//! replay that makes it again when it was made in a gradient checkpoint scope.
//! So an op *after* a scope that reads a value made in it (the matmul reading
//! a noisy weight) keeps its own backward and saved tensors, and only that
//! value is recomputed, not the op. [`Inputs`] hands the values to the
//! backward on demand: a value it does not ask for (the weight, when only the
//! weight's gradient is wanted) is never recomputed.
//!
//! A [`Resolver`] lives for one backward pass. It knows how many of the pass's
//! nodes still read each replayed value, and holds a recomputed value until
//! the last of them has run, so a value is recomputed at most once per pass
//! (unless it was freed in between because nothing was left to read it), and
//! freed as soon as it is no longer needed.

use super::checkpoint::{Replay, Source};
use super::node::Node;
use crate::{Error, Result, Shape, Tensor};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// A replayed value: its replay (by address) and which output it is.
type Key = (usize, usize);

fn key(replay: &Arc<Replay>, output: usize) -> Key {
    (Arc::as_ptr(replay) as usize, output)
}

/// The replayed values of one backward pass.
#[derive(Default)]
pub(crate) struct Resolver {
    /// How many nodes still to run read each replayed value.
    uses: HashMap<Key, usize>,
    /// Recomputed values some node still to run reads.
    held: HashMap<Key, Arc<Tensor>>,
}

impl Resolver {
    /// Counts the replayed values `node`'s backward reads (it will run).
    pub(crate) fn expect(&mut self, node: &Node) {
        for source in node.inputs.iter().flatten() {
            if let Source::Replayed(r, i) = source {
                *self.uses.entry(key(r, *i)).or_default() += 1;
            }
        }
    }

    /// `node` has run (or will not): drops what only it still needed.
    pub(crate) fn done(&mut self, node: &Node) {
        for source in node.inputs.iter().flatten() {
            if let Source::Replayed(r, i) = source {
                let k = key(r, *i);
                if let Some(n) = self.uses.get_mut(&k) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.uses.remove(&k);
                        self.held.remove(&k);
                    }
                }
            }
        }
    }

    /// The value of `source`: kept, still alive, or recomputed (its own
    /// replayed sources resolved the same way).
    pub(crate) fn value(&mut self, source: &Source) -> Result<Arc<Tensor>> {
        let (replay, output) = match source {
            Source::Kept(v) => return Ok(v.tensor().clone()),
            Source::Replayed(r, i) => (r, *i),
        };
        let k = key(replay, output);
        if let Some(v) = self.held.get(&k) {
            return Ok(v.clone());
        }
        if let Some(v) = replay.alive(output) {
            if self.uses.contains_key(&k) {
                self.held.insert(k, v.clone());
            }
            return Ok(v);
        }
        let inputs = replay
            .sources()
            .iter()
            .map(|s| self.value(s))
            .collect::<Result<Vec<_>>>()?;
        let (outputs, _) = replay.run(&inputs)?;
        replay.remember(&outputs);
        for (i, v) in outputs.iter().enumerate() {
            if self.uses.contains_key(&key(replay, i)) {
                self.held.insert(key(replay, i), v.clone());
            }
        }
        outputs.get(output).cloned().ok_or_else(|| {
            Error::Autograd(format!(
                "{}: output {output} asked of an op with {} outputs",
                replay.name(),
                outputs.len()
            ))
        })
    }
}

/// The inputs of the node whose backward runs: their values, resolved on
/// demand, and the shapes of those that need a gradient.
pub(crate) struct Inputs<'a> {
    node: &'a Node,
    resolver: &'a RefCell<Resolver>,
}

impl<'a> Inputs<'a> {
    pub(crate) fn new(node: &'a Node, resolver: &'a RefCell<Resolver>) -> Inputs<'a> {
        Inputs { node, resolver }
    }

    /// The value of input `i`, which the op declared its backward reads.
    pub(crate) fn get(&self, i: usize) -> Result<Arc<Tensor>> {
        let source = self
            .node
            .inputs
            .get(i)
            .and_then(Option::as_ref)
            .ok_or_else(|| {
                Error::Autograd(format!(
                    "{}: the backward reads input {i}, which the op did not declare it reads",
                    self.node.name
                ))
            })?;
        self.resolver.borrow_mut().value(source)
    }

    /// The shape of input `i`, which needs a gradient (without its value).
    pub(crate) fn shape(&self, i: usize) -> Result<&'a Shape> {
        let edge = self.node.edges.get(i).and_then(Option::as_ref);
        edge.map(|e| &e.shape).ok_or_else(|| {
            Error::Autograd(format!(
                "{}: the shape of input {i}, which needs no gradient, asked in backward",
                self.node.name
            ))
        })
    }
}
