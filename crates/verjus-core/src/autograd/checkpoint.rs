//! Gradient checkpoint scopes: values made inside one are not kept for the
//! backward pass but recomputed there.
//!
//! # Design
//!
//! Every op records itself through [`Var::record`](super::record) with a
//! *forward*: a closure from the op's input values to its outputs and the
//! backward closure that goes with them. A backward closure owns only what
//! the op made itself and needs again (an LSTM's reserve, a softmax's
//! output); the op's *input* values are handed to it when it runs
//! ([`Inputs`](super::resolve::Inputs)), and the op declares which of them it
//! reads ([`Saves`](super::record::Saves)). The node keeps, per input read, a
//! [`Source`]: the value ([`Source::Kept`]) or the [`Replay`] that made it
//! ([`Source::Replayed`]).
//!
//! Outside a scope an op runs its forward once and its node keeps the
//! backward, as always. Inside a [`checkpoint_scope`] the op runs the forward
//! too, and its outputs carry a [`Replay`]: the forward and the op's sources
//! (one per input: the value for one made outside any scope, a parameter or
//! an activation the scope reads; the replay for one made inside). When the
//! user drops the handles, a value made in a scope is freed; only the replays
//! (closures, a few numbers, the kept outside values) stay. The op's node
//! keeps its backward when the op saves no tensor of its own (`add`,
//! `matmul`, `dropout`: the closure then holds a few numbers, and it reads
//! its inputs from their sources); otherwise it drops the backward and what
//! it saved, and in backward re-runs the forward on its sources' values and
//! calls the fresh backward.
//!
//! An op *after* the scope that reads a value made in it (the matmul reading
//! a noisy weight, an LSTM reading a dropped-out recurrent weight) is an
//! ordinary op: it keeps its backward and its own saved tensors, and only the
//! replayed input is recomputed, when its backward asks for it. So the cost
//! of a scope is the scope's own ops run once more in backward, never the ops
//! around it. Within a backward pass a recomputed value is held until the
//! last node reading it has run, then freed (see `resolve.rs`), so it is
//! recomputed once per pass.
//!
//! Random ops take their Philox `(seed, offset)` as arguments of the forward,
//! so a replay draws exactly the numbers of the first run, and every op is
//! deterministic on the same inputs: the gradients are bitwise those of the
//! run without the scope. Scopes nest (an inner one changes nothing); the
//! flag is per thread, like grad mode.
//!
//! Replays resolve recursively, so a scope is meant for a few ops (a
//! parametrized weight, a block of a layer), not an unrolled loop of
//! thousands. A recomputation cannot miss a value by construction (sources
//! keep outside values; inside values are replayed); if a forward fails when
//! re-run (memory, a device error), the error names the op and the scope.

use super::node::MultiBackwardFn;
use super::saved::Saved;
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

/// Where an input value of an op comes from in backward.
pub(crate) enum Source {
    /// The value, kept (made outside any scope).
    Kept(Saved),
    /// Output `.1` of an op recorded in a scope, recomputed when needed.
    Replayed(Arc<Replay>, usize),
}

/// An op recorded in a scope, without its saved tensors: enough to run it again.
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
        let replay = Replay {
            name,
            backend,
            forward,
            sources,
            last: Mutex::new(Vec::new()),
        };
        replay.remember(outputs);
        replay
    }

    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// Where each input of the op comes from.
    pub(crate) fn sources(&self) -> &[Source] {
        &self.sources
    }

    /// Output `i` of the last run, if someone still holds it.
    pub(crate) fn alive(&self, i: usize) -> Option<Arc<Tensor>> {
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        last.get(i).and_then(Weak::upgrade)
    }

    /// Notes `outputs` as the last run's.
    pub(crate) fn remember(&self, outputs: &[Arc<Tensor>]) {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        *last = outputs.iter().map(Arc::downgrade).collect();
    }

    /// Runs the forward again on the sources' values `inputs`.
    pub(crate) fn run(
        &self,
        inputs: &[Arc<Tensor>],
    ) -> Result<(Vec<Arc<Tensor>>, MultiBackwardFn)> {
        (self.forward)(&*self.backend, inputs).map_err(|e| {
            Error::Autograd(format!(
                "recomputing {} (recorded in a gradient checkpoint scope) in backward: {e}",
                self.name
            ))
        })
    }
}
