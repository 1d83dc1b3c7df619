//! How an op records itself: [`Var::record`] (one output) and
//! [`Var::record_many`] (several outputs, one backward).
//!
//! An op hands over its *forward*, a closure from its input values to its
//! outputs and their backward (see `checkpoint.rs`). Outside a gradient
//! checkpoint scope, and when no input was made in one, the forward runs once
//! and the node keeps its backward, with what it saved. Otherwise the node
//! keeps a [`Replay`] and re-runs the forward in backward, and outputs made
//! inside a scope carry the replay for the ops that read them.

use super::checkpoint::{in_checkpoint_scope, ForwardFn, Replay, Source};
use super::node::{recording, BackwardFn, MultiBackwardFn};
use super::var::Var;
use crate::{Backend, BackendRef, Error, Result, Tensor};
use std::sync::Arc;

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
    /// `inputs` in order.
    pub(crate) fn record(
        name: &'static str,
        backend: &BackendRef,
        inputs: &[&Var],
        forward: impl ForwardOne,
    ) -> Result<Var> {
        let forward: ForwardFn = Arc::new(move |be, xs| {
            let (y, backward) = forward(be, xs)?;
            Ok((vec![y], one_output(name, backward)))
        });
        let [y] = Var::record_many(name, backend, inputs, forward)?;
        Ok(y)
    }

    /// Runs and records an op with `N` outputs sharing one backward.
    pub(crate) fn record_many<const N: usize>(
        name: &'static str,
        backend: &BackendRef,
        inputs: &[&Var],
        forward: ForwardFn,
    ) -> Result<[Var; N]> {
        let values: Vec<Arc<Tensor>> = inputs.iter().map(|v| v.value()).collect();
        let (outputs, backward) = forward(&**backend, &values)?;
        let count = outputs.len();
        let outputs: [Arc<Tensor>; N] = outputs.try_into().map_err(|_| {
            Error::Autograd(format!("{name}: the forward gave {count} outputs, not {N}"))
        })?;
        let in_scope = in_checkpoint_scope();
        let reads_replayed = inputs.iter().any(|v| v.replay().is_some());
        let replays = in_scope || (reads_replayed && recording(inputs));
        if !replays {
            return Ok(Var::from_op_many(name, outputs, backend, inputs, backward));
        }
        drop(backward);
        let sources = inputs
            .iter()
            .zip(values)
            .map(|(v, value)| match v.replay() {
                Some((r, i)) => Source::Replayed(r.clone(), i),
                None => Source::Kept(value),
            })
            .collect();
        let replay = Arc::new(Replay::new(
            name,
            backend.clone(),
            forward,
            sources,
            &outputs,
        ));
        let node_replay = replay.clone();
        let backward: MultiBackwardFn =
            Box::new(move |be, dys, needs| node_replay.backward(be, dys, needs));
        let vars = Var::from_op_many(name, outputs, backend, inputs, backward);
        if !in_scope {
            return Ok(vars);
        }
        let mut output = 0;
        Ok(vars.map(|v| {
            let v = v.with_replay(replay.clone(), output);
            output += 1;
            v
        }))
    }
}

/// A one-output backward as a [`MultiBackwardFn`].
pub(crate) fn one_output(name: &'static str, backward: BackwardFn) -> MultiBackwardFn {
    Box::new(move |be, dys, needs| {
        let Some(Some(dy)) = dys.into_iter().next() else {
            return Err(Error::Autograd(format!(
                "{name}: backward called without the output's gradient"
            )));
        };
        backward(be, dy, needs)
    })
}
