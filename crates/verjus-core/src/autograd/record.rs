//! How an op records itself: [`Var::record`] (one output) and
//! [`Var::record_many`] (several outputs, one backward).
//!
//! An op hands over its *forward*, a closure from its input values to its
//! outputs and their backward (see `checkpoint.rs`), and declares with
//! [`Saves`] what that backward needs besides the outputs' gradients: which
//! input values it reads (handed to it when it runs) and whether it owns
//! tensors the forward made. The forward runs once, now. The node keeps the
//! backward and a [`Source`] per input read. Inside a gradient checkpoint
//! scope the outputs also carry a [`Replay`] for the ops that read them, and
//! an op that saved tensors of its own drops its backward and re-runs the
//! forward in backward instead.

use super::checkpoint::{in_checkpoint_scope, ForwardFn, Replay, Source};
use super::node::{Backward, BackwardFn, MultiBackwardFn};
use super::saved::Saved;
use super::var::Var;
use crate::{Backend, BackendRef, Error, Result, Tensor};
use std::sync::Arc;

/// Which input values an op's backward reads.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Reads {
    Nothing,
    All,
    /// These inputs (by index).
    Only(&'static [usize]),
}

impl Reads {
    fn includes(self, input: usize) -> bool {
        match self {
            Reads::Nothing => false,
            Reads::All => true,
            Reads::Only(inputs) => inputs.contains(&input),
        }
    }
}

/// What an op's backward needs besides the outputs' gradients: input values
/// (read from the node's sources when it runs) and whether it owns tensors
/// its forward made (an LSTM's reserve, a softmax's output). A backward that
/// owns none holds only a few numbers, so a node in a checkpoint scope keeps
/// it; one that does is dropped there and made again by re-running the forward.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Saves {
    inputs: Reads,
    own: bool,
}

impl Saves {
    /// Nothing: the backward needs only the outputs' gradients (and numbers).
    pub(crate) const NOTHING: Saves = Saves {
        inputs: Reads::Nothing,
        own: false,
    };

    /// Input values, and no tensor of its own.
    pub(crate) const fn inputs(inputs: Reads) -> Saves {
        Saves { inputs, own: false }
    }

    /// Tensors the forward made, and the input values `inputs`.
    pub(crate) const fn own(inputs: Reads) -> Saves {
        Saves { inputs, own: true }
    }
}

/// The forward of an op with one output.
pub(crate) trait ForwardOne:
    Fn(&dyn Backend, &[Arc<Tensor>]) -> Result<(Arc<Tensor>, BackwardFn)> + Send + Sync + 'static
{
}

impl<F> ForwardOne for F where
    F: Fn(&dyn Backend, &[Arc<Tensor>]) -> Result<(Arc<Tensor>, BackwardFn)>
        + Send
        + Sync
        + 'static
{
}

impl Var {
    /// Runs and records an op with one output; `forward` gets the values of
    /// `inputs` in order, and its backward reads what `saves` says.
    pub(crate) fn record(
        name: &'static str,
        backend: &BackendRef,
        inputs: &[&Var],
        saves: Saves,
        forward: impl ForwardOne,
    ) -> Result<Var> {
        let forward: ForwardFn = Arc::new(move |be, xs| {
            let (y, backward) = forward(be, xs)?;
            Ok((vec![y], one_output(name, backward)))
        });
        let [y] = Var::record_many(name, backend, inputs, saves, forward)?;
        Ok(y)
    }

    /// Runs and records an op with `N` outputs sharing one backward.
    pub(crate) fn record_many<const N: usize>(
        name: &'static str,
        backend: &BackendRef,
        inputs: &[&Var],
        saves: Saves,
        forward: ForwardFn,
    ) -> Result<[Var; N]> {
        let values: Vec<Arc<Tensor>> = inputs.iter().map(|v| v.value()).collect();
        let (outputs, backward) = forward(&**backend, &values)?;
        let count = outputs.len();
        let outputs: [Arc<Tensor>; N] = outputs.try_into().map_err(|_| {
            Error::Autograd(format!("{name}: the forward gave {count} outputs, not {N}"))
        })?;
        if !in_checkpoint_scope() {
            let reads = |i| saves.inputs.includes(i);
            let sources = || sources(inputs, &values, reads);
            let backward = Backward::Kept(backward);
            return Ok(Var::from_op_many(
                name, outputs, backend, inputs, backward, sources,
            ));
        }
        let replay = Arc::new(Replay::new(
            name,
            backend.clone(),
            forward,
            sources(inputs, &values, |_| true)
                .into_iter()
                .flatten()
                .collect(),
            &outputs,
        ));
        // An op that saved tensors of its own runs its forward again, on all
        // its inputs; one that did not keeps its backward.
        let reads = |i| saves.own || saves.inputs.includes(i);
        let sources = || sources(inputs, &values, reads);
        let backward = if saves.own {
            drop(backward);
            Backward::Replay(replay.clone())
        } else {
            Backward::Kept(backward)
        };
        let vars = Var::from_op_many(name, outputs, backend, inputs, backward, sources);
        let mut output = 0;
        Ok(vars.map(|v| {
            let v = v.with_replay(replay.clone(), output);
            output += 1;
            v
        }))
    }
}

/// Where the inputs `reads` selects come from in backward (`None` for the
/// others; empty when it selects none).
fn sources(
    inputs: &[&Var],
    values: &[Arc<Tensor>],
    reads: impl Fn(usize) -> bool,
) -> Vec<Option<Source>> {
    if !(0..inputs.len()).any(&reads) {
        return Vec::new();
    }
    inputs
        .iter()
        .zip(values)
        .enumerate()
        .map(|(i, (v, value))| {
            reads(i).then(|| match v.replay() {
                Some((r, output)) => Source::Replayed(r.clone(), output),
                None if v.is_leaf() && v.requires_grad() => {
                    Source::Kept(Saved::leaf(value.clone()))
                }
                None => Source::Kept(Saved::new(value.clone())),
            })
        })
        .collect()
}

/// A one-output backward as a [`MultiBackwardFn`].
pub(crate) fn one_output(name: &'static str, backward: BackwardFn) -> MultiBackwardFn {
    Box::new(move |be, dys, inputs, needs| {
        let Some(Some(dy)) = dys.into_iter().next() else {
            return Err(Error::Autograd(format!(
                "{name}: backward called without the output's gradient"
            )));
        };
        backward(be, dy, inputs, needs)
    })
}
