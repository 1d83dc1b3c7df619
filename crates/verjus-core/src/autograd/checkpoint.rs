//! Gradient checkpoint scopes: values made inside one are not kept for the
//! backward pass but recomputed there.
//!
//! # Design
//!
//! Every op records itself through [`Var::record`](super::record) with a
//! *forward*: a closure from the op's input values to its outputs and the
//! backward closure that goes with them (which owns whatever the op saves).
//! Outside a scope the forward runs once and its backward is the node's, as
//! it always was. Inside a [`checkpoint_scope`] the op runs the forward too,
//! but then drops that backward (and everything it saved) and keeps a
//! [`Replay`] instead: the forward and the op's *sources*, one per input,
//! either the input's value ([`Source::Kept`], for a value made outside the
//! scope: a parameter, an activation the scope reads) or a reference to the
//! replay that made it ([`Source::Replayed`], for a value made inside). The
//! outputs carry their replay, so an op *after* the scope that reads one (the
//! matmul reading a noisy weight) does the same: it keeps a reference, not the
//! value. When the user drops the handles, a value made in a scope is freed;
//! only the replays (closures, a few numbers, the kept outside values) stay.
//!
//! The backward of such a node re-runs the forward on its sources' values,
//! each replayed value computed again by re-running its own replay (a replay
//! keeps weak references to its last outputs, so values that are still alive
//! in the same pass are reused rather than recomputed), and calls the fresh
//! backward. Random ops take their Philox `(seed, offset)` as arguments of
//! the forward, so a replay draws exactly the numbers of the first run, and
//! every op is deterministic on the same inputs: the gradients are bitwise
//! those of the run without the scope. Scopes nest (an inner one changes
//! nothing); the flag is per thread, like grad mode.
//!
//! The cost: ops in a scope, and ops after it that read a value made in it,
//! run their forward again in backward. Replays resolve recursively, so a
//! scope is meant for a few ops (a parametrized weight, a block of a layer),
//! not an unrolled loop of thousands. A recomputation cannot miss a value by
//! construction (sources keep outside values; inside values are replayed);
//! if a forward fails when re-run (memory, a device error), the error names
//! the op and the scope.

use super::node::MultiBackwardFn;
use crate::{Backend, BackendRef, Error, Result, Tensor};
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError, Weak};

thread_local! {
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// An op's forward: from its input values, its outputs and their backward.
pub(crate) type ForwardFn = Arc<
    dyn Fn(&dyn Backend, &[Arc<Tensor>]) -> Result<(Vec<Arc<Tensor>>, MultiBackwardFn)>
        + Send
        + Sync,
>;

/// Leaves the scope (this thread's) when dropped.
#[must_use = "the checkpoint scope ends when the guard is dropped"]
#[derive(Debug)]
pub struct CheckpointScope {
    /// The scope is a thread-local count, so the guard must stay on its thread.
    _not_send: PhantomData<*const ()>,
}

/// Enters a gradient checkpoint scope on this thread until the guard drops:
/// values made by ops in it are recomputed in backward instead of kept (see
/// the module doc).
pub fn checkpoint_scope() -> CheckpointScope {
    DEPTH.with(|d| d.set(d.get() + 1));
    CheckpointScope {
        _not_send: PhantomData,
    }
}

impl Drop for CheckpointScope {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Whether this thread is inside a [`checkpoint_scope`].
pub fn in_checkpoint_scope() -> bool {
    DEPTH.with(Cell::get) > 0
}

/// Where an input of a replayed op comes from.
pub(crate) enum Source {
    /// A value made outside any scope, kept.
    Kept(Arc<Tensor>),
    /// Output `.1` of an op recorded in a scope, recomputed when needed.
    Replayed(Arc<Replay>, usize),
}

/// An op recorded without its saved tensors: enough to run it again.
pub(crate) struct Replay {
    name: &'static str,
    backend: BackendRef,
    forward: ForwardFn,
    sources: Vec<Source>,
    /// The outputs of the last run, while someone still holds them.
    last: Mutex<Vec<Weak<Tensor>>>,
}

impl Replay {
    pub(crate) fn new(
        name: &'static str,
        backend: BackendRef,
        forward: ForwardFn,
        sources: Vec<Source>,
        outputs: &[Arc<Tensor>],
    ) -> Replay {
        Replay {
            name,
            backend,
            forward,
            sources,
            last: Mutex::new(outputs.iter().map(Arc::downgrade).collect()),
        }
    }

    /// The values of the sources, replaying those made in a scope.
    fn inputs(&self) -> Result<Vec<Arc<Tensor>>> {
        self.sources
            .iter()
            .map(|s| match s {
                Source::Kept(v) => Ok(v.clone()),
                Source::Replayed(r, i) => r.output(*i),
            })
            .collect()
    }

    /// Runs the forward again on the sources' values.
    fn rerun(&self) -> Result<(Vec<Arc<Tensor>>, MultiBackwardFn)> {
        let inputs = self.inputs()?;
        (self.forward)(&*self.backend, &inputs).map_err(|e| {
            Error::Autograd(format!(
                "recomputing {} (recorded in a gradient checkpoint scope) in backward: {e}",
                self.name
            ))
        })
    }

    /// Output `i`: the last run's if still alive, else recomputed.
    fn output(&self, i: usize) -> Result<Arc<Tensor>> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = last.get(i).and_then(Weak::upgrade) {
            return Ok(v);
        }
        let (outputs, _) = self.rerun()?;
        *last = outputs.iter().map(Arc::downgrade).collect();
        outputs.get(i).cloned().ok_or_else(|| {
            Error::Autograd(format!(
                "{}: output {i} asked of an op with {} outputs",
                self.name,
                outputs.len()
            ))
        })
    }

    /// The backward of the op: the forward re-run, its fresh backward called.
    pub(crate) fn backward(
        &self,
        be: &dyn Backend,
        dys: Vec<Option<Tensor>>,
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let (_outputs, backward) = self.rerun()?;
        backward(be, dys, needs)
    }
}
