//! `verjus._verjus.Stepper`: inference that carries recurrent state from
//! call to call, for sampling loops and streaming.
//!
//! A stepper holds one context of a network (`Context::set_carry_state`):
//! each call's LSTMs start from the state the previous call ended in, so a
//! sampling loop feeds one token per call without recomputing the prefix.
//! The network is shared with its Python `Network` (and a `Trainer` of it),
//! so a stepper always computes with the current weights; the state stays
//! in the context, on the network's device, between calls, and is read or
//! written only when asked (`state`, `set_state`, `reset_state`).

use crate::convert::{self, Borrowed};
use crate::device;
use crate::error::to_py_err;
use crate::network::Network;
use crate::sequences::{self, host_copy, Input, Signature};
use crate::shared::{self, Shared};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::Mutex;
use verjus::nn::{Context, Network as NnNetwork};
use verjus::{BackendRef, Device, Tensor};

/// Steps a network through sequences a few frames at a time, carrying each
/// LSTM's state from call to call (on the network's device).
///
/// :param Network network: the network (its current weights are used)
/// :param int batch: the number of sequences stepped side by side
#[pyclass(frozen, module = "verjus._verjus")]
pub(crate) struct Stepper {
    model: Shared,
    batch: usize,
    ctx: Mutex<(Context, Device)>,
}

impl Stepper {
    /// Runs `f` with the network (read lock) and this stepper's context, GIL
    /// released.
    fn with_ctx<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&NnNetwork, &BackendRef, &mut Context) -> PyResult<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let model = shared::read(&self.model)?;
            let (net, be) = model.network()?;
            let mut guard = self
                .ctx
                .lock()
                .map_err(|_| PyRuntimeError::new_err("the stepper's lock is poisoned"))?;
            let (ctx, device) = &mut *guard;
            if *device != be.device() {
                return Err(PyRuntimeError::new_err(format!(
                    "the network moved from {device} to {}: make a new stepper",
                    be.device()
                )));
            }
            f(net, be, ctx)
        })
    }
}

#[pymethods]
impl Stepper {
    #[new]
    #[pyo3(signature = (network, batch = 1))]
    fn new(py: Python<'_>, network: &Bound<'_, Network>, batch: usize) -> PyResult<Stepper> {
        let model = Shared::clone(&network.get().model);
        let ctx = py.detach(|| {
            let guard = shared::read(&model)?;
            let (net, be) = guard.network()?;
            if !net.takes_sequences() {
                return Err(PyTypeError::new_err(
                    "Stepper: the network has no sequence input (nothing to step through)",
                ));
            }
            let mut ctx = net.new_context(&**be, batch).map_err(to_py_err)?;
            ctx.set_carry_state(true);
            Ok((ctx, be.device()))
        })?;
        Ok(Stepper {
            model,
            batch,
            ctx: Mutex::new(ctx),
        })
    }

    /// The number of sequences stepped side by side.
    ///
    /// :rtype: int
    #[getter]
    fn batch(&self) -> usize {
        self.batch
    }

    /// The next frames of every sequence: one array per input (token ids
    /// ``[batch, T]``, frames ``[batch, T, ...]``) and optionally how many of
    /// the ``T`` frames each sequence has (the state of a sequence then stays
    /// at its last real frame). Each LSTM starts from the state the previous
    /// call ended in. Sequence outputs come back batch-major.
    ///
    /// :param Sequence[npt.ArrayLike] inputs: one array per network input
    /// :param npt.ArrayLike | None lengths: real frames per sequence
    /// :return: one float32 array per output
    /// :rtype: list[npt.NDArray[np.float32]]
    #[pyo3(signature = (inputs, lengths = None))]
    fn step<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyAny>,
        lengths: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let sig = self.with_ctx(py, |net, _, _| Ok(Signature::of(net)))?;
        let arrays = sig.convert("step", inputs)?;
        let lengths = sequences::lengths("step", lengths)?;
        let views = arrays
            .iter()
            .map(Input::view)
            .collect::<PyResult<Vec<_>>>()?;
        let lengths = lengths.as_ref().map(Borrowed::view).transpose()?;
        let batch = self.batch;
        let outputs = self.with_ctx(py, |net, be, ctx| {
            let refs: Vec<&Tensor> = views.iter().map(|v| &**v).collect();
            if let Some(t) = refs.iter().find(|t| t.dims().first() != Some(&batch)) {
                return Err(PyTypeError::new_err(format!(
                    "step: this stepper steps {batch} sequence(s), got an input of shape {}",
                    t.shape()
                )));
            }
            let outputs = device::on_device(be, &refs, |inputs| {
                net.compute_output_with_lengths(&**be, ctx, inputs, lengths.as_deref())?;
                (0..sig.sequence_outputs.len())
                    .map(|i| host_copy(be, ctx.output(i)))
                    .collect()
            })
            .map_err(to_py_err)?;
            sig.batch_major(outputs, batch)
        })?;
        let list = PyList::empty(py);
        for t in outputs {
            list.append(convert::to_numpy(py, t)?)?;
        }
        Ok(list)
    }

    /// The carried state: ``{name: [batch, hidden] array}`` per LSTM layer
    /// (``rnn.h_l0``, ``rnn.c_l0``, ...), copies of the state the last call
    /// ended in (zeros before the first).
    ///
    /// :rtype: dict[str, npt.NDArray[np.float32]]
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let named = self.with_ctx(py, |net, be, ctx| {
            let state = net.state(ctx).map_err(to_py_err)?;
            state
                .into_iter()
                .map(|(name, t)| Ok((name, host_copy(be, t).map_err(to_py_err)?)))
                .collect::<PyResult<Vec<_>>>()
        })?;
        let dict = PyDict::new(py);
        for (name, t) in named {
            dict.set_item(name, convert::to_numpy(py, t)?)?;
        }
        Ok(dict)
    }

    /// Sets the carried state by name (``state``'s names and shapes); the
    /// next call starts from it. Names not given keep their values. An
    /// unknown name or a wrong shape is a ``ValueError``, and then nothing
    /// changed.
    ///
    /// :param Mapping[str, npt.ArrayLike] values: state name to value
    fn set_state(&self, py: Python<'_>, values: &Bound<'_, PyAny>) -> PyResult<()> {
        let items = values.call_method0("items").map_err(|_| {
            PyTypeError::new_err(format!(
                "set_state takes a mapping of state names to arrays, got {}",
                values.get_type()
            ))
        })?;
        let mut named = Vec::new();
        for item in items.try_iter()? {
            let (name, value): (String, Bound<'_, PyAny>) = item?.extract()?;
            let t = convert::floats(&format!("state {name:?}"), &value)?.to_tensor()?;
            named.push((name, t));
        }
        self.with_ctx(py, |net, be, ctx| {
            // Every name and shape first, so that an error changes nothing.
            let known = net.state(ctx).map_err(to_py_err)?;
            for (name, t) in &named {
                match known.iter().find(|(n, _)| n == name) {
                    Some((_, cur)) if cur.shape() != t.shape() => {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "set_state: state {name:?} is {} ([batch, hidden]), got {}",
                            cur.shape(),
                            t.shape()
                        )))
                    }
                    Some(_) => {}
                    None => {
                        let names: Vec<&str> = known.iter().map(|(n, _)| n.as_str()).collect();
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "set_state: no state {name:?} (this network has {names:?})"
                        )));
                    }
                }
            }
            for (name, t) in &named {
                let refs = [t];
                device::on_device(be, &refs, |on| {
                    net.set_state(&**be, ctx, name, on[0])?;
                    Ok(Vec::new())
                })
                .map_err(to_py_err)?;
            }
            Ok(())
        })
    }

    /// Sets the whole state to zeros: the next call starts new sequences.
    fn reset_state(&self, py: Python<'_>) -> PyResult<()> {
        self.with_ctx(py, |net, be, ctx| {
            net.reset_state(&**be, ctx).map_err(to_py_err)
        })
    }

    fn __repr__(&self) -> String {
        format!("Stepper(batch={})", self.batch)
    }
}
