//! `verjus._verjus.Runner`: hot-swap serving from Python.
//!
//! A thin handle on an `Arc` of the Rust [`verjus::nn::Runner`]: `infer`
//! converts its arrays with the GIL held, then releases the GIL and runs on the
//! network served now with no lock of ours around the computation (the Rust
//! runner clones its `Arc` under a lock held only for the clone), so Python
//! threads infer in parallel. A runner serves on one device (inputs are
//! uploaded and outputs downloaded around each call). The runner owns what it serves: `swap(network)`
//! swaps in a *copy* of the Python network, so training that network later
//! does not change what is served.
//!
//! `watch` starts the Rust watcher; its callback takes the GIL to call the
//! Python `on_event`. Stopping waits for the watcher thread with the GIL
//! released (it may be waiting for the GIL to report), and dropping the runner
//! only signals the thread, never waits, since the GIL is held then.

use crate::convert::{self, Borrowed};
use crate::device;
use crate::error::to_py_err;
use crate::network::Network;
use crate::sequences::{self, Input, Signature};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use verjus::nn::{Runner as NnRunner, WatchEvent, Watcher};
use verjus::Tensor;

/// Serves inference from a network that can be swapped at run time, on one
/// device.
///
/// :param Network network: the network, of which the runner serves a copy
/// :param str device: where to serve
#[pyclass(frozen, module = "verjus._verjus")]
pub(crate) struct Runner {
    runner: Arc<NnRunner>,
    watcher: Mutex<Option<Watcher>>,
}

impl Runner {
    fn serving(runner: NnRunner) -> Runner {
        Runner {
            runner: Arc::new(runner),
            watcher: Mutex::new(None),
        }
    }

    /// Takes the watcher out (stopping it is up to the caller).
    fn take_watcher(&self) -> Option<Watcher> {
        self.watcher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(w) = self.take_watcher() {
            w.detach();
        }
    }
}

#[pymethods]
impl Runner {
    #[new]
    #[pyo3(signature = (network, device = "cpu"))]
    fn new(py: Python<'_>, network: &Bound<'_, Network>, device: &str) -> PyResult<Runner> {
        let be = device::backend(device)?;
        let net = network.get().copy(py, &be)?;
        Ok(Runner::serving(NnRunner::new(net, be).map_err(to_py_err)?))
    }

    /// Serves the network of a checkpoint (or network) folder on ``device``.
    ///
    /// :param str folder: the folder
    /// :param str device: where to serve
    /// :rtype: Runner
    #[staticmethod]
    #[pyo3(signature = (folder, device = "cpu"))]
    fn from_checkpoint(py: Python<'_>, folder: PathBuf, device: &str) -> PyResult<Runner> {
        let be = device::backend(device)?;
        let runner = py
            .detach(|| NnRunner::from_checkpoint(&folder, be))
            .map_err(to_py_err)?;
        Ok(Runner::serving(runner))
    }

    /// The device the served networks live and compute on.
    ///
    /// :rtype: str
    #[getter]
    fn device(&self) -> String {
        self.runner.backend().device().to_string()
    }

    /// The generation served now: 0 for the first network, +1 per swap.
    ///
    /// :rtype: int
    #[getter]
    fn generation(&self) -> u64 {
        self.runner.generation()
    }

    /// Inference with the network served now (GIL released, no lock around
    /// the computation).
    ///
    /// :param Sequence[npt.ArrayLike] inputs: one array per network input
    /// :return: the outputs and the generation that computed them
    /// :rtype: tuple[list[npt.NDArray[np.float32]], int]
    fn infer<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyList>, u64)> {
        let arrays: Vec<Borrowed<'py, f32>> = inputs
            .try_iter()
            .map_err(|_| PyTypeError::new_err("infer takes a sequence of arrays"))?
            .enumerate()
            .map(|(i, obj)| convert::floats(&format!("input {i}"), &obj?))
            .collect::<PyResult<_>>()?;
        let views = arrays
            .iter()
            .map(Borrowed::view)
            .collect::<PyResult<Vec<_>>>()?;
        let (outputs, generation) = py.detach(|| {
            let refs: Vec<&Tensor> = views.iter().map(|v| &**v).collect();
            let mut generation = 0;
            let outputs = device::on_device(self.runner.backend(), &refs, |inputs| {
                let (outputs, g) = self.runner.infer(inputs)?;
                generation = g;
                Ok(outputs)
            })
            .map_err(to_py_err)?;
            Ok::<_, PyErr>((outputs, generation))
        })?;
        let list = PyList::empty(py);
        for t in outputs {
            list.append(convert::to_numpy(py, t)?)?;
        }
        Ok((list, generation))
    }

    /// Inference on a batch of sequences with the network served now: one
    /// array per input (token ids ``[batch, T]``, frames ``[batch, T, ...]``)
    /// and optionally each example's length; each call has its own padded
    /// length. Sequence outputs come back batch-major.
    ///
    /// :param Sequence[npt.ArrayLike] inputs: one array per network input
    /// :param npt.ArrayLike | None lengths: each example's length (int32 ``[batch]``)
    /// :return: the outputs and the generation that computed them
    /// :rtype: tuple[list[npt.NDArray[np.float32]], int]
    #[pyo3(signature = (inputs, lengths = None))]
    fn infer_sequences<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyAny>,
        lengths: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyList>, u64)> {
        // The signature of the network served now; a swap keeps the inputs'
        // kinds and the outputs' shapes (check_compatible), so it holds for
        // whichever network serves the call.
        let sig = Signature::of(&self.runner.current().network);
        let arrays = sig.convert("infer", inputs)?;
        let lengths = sequences::lengths("infer", lengths)?;
        let views = arrays
            .iter()
            .map(Input::view)
            .collect::<PyResult<Vec<_>>>()?;
        let lengths = lengths.as_ref().map(Borrowed::view).transpose()?;
        let (outputs, generation) = py.detach(|| {
            let refs: Vec<&Tensor> = views.iter().map(|v| &**v).collect();
            let batch = refs.first().and_then(|t| t.dims().first().copied());
            let mut generation = 0;
            let outputs = device::on_device(self.runner.backend(), &refs, |inputs| {
                let (outputs, g) = self.runner.infer_with_lengths(inputs, lengths.as_deref())?;
                generation = g;
                Ok(outputs)
            })
            .map_err(to_py_err)?;
            Ok::<_, PyErr>((sig.batch_major(outputs, batch.unwrap_or(0))?, generation))
        })?;
        let list = PyList::empty(py);
        for t in outputs {
            list.append(convert::to_numpy(py, t)?)?;
        }
        Ok((list, generation))
    }

    /// Swaps in a copy of ``network`` if its inputs and outputs fit (else
    /// ``ValueError`` naming the mismatch).
    ///
    /// :param Network network: the new network
    /// :return: the new generation
    /// :rtype: int
    fn swap(&self, py: Python<'_>, network: &Bound<'_, Network>) -> PyResult<u64> {
        let net = network.get().copy(py, self.runner.backend())?;
        py.detach(|| self.runner.swap(net)).map_err(to_py_err)
    }

    /// Loads a checkpoint folder and swaps it in like ``swap``.
    ///
    /// :param str folder: the folder
    /// :return: the new generation
    /// :rtype: int
    fn swap_from(&self, py: Python<'_>, folder: PathBuf) -> PyResult<u64> {
        py.detach(|| self.runner.swap_from(&folder))
            .map_err(to_py_err)
    }

    /// Polls ``folder`` and swaps in each new version. ``on_event`` gets
    /// ``{"event": "swapped", "generation": n}`` or ``{"event": "refused",
    /// "error": msg}`` (refusals go to stderr without it).
    ///
    /// :param str folder: the folder to watch
    /// :param float interval: seconds between polls
    /// :param Callable[[dict[str, Any]], object] | None on_event: hears of each
    ///   swap and refusal
    #[pyo3(signature = (folder, interval = 1.0, on_event = None))]
    fn watch(
        &self,
        py: Python<'_>,
        folder: PathBuf,
        interval: f64,
        on_event: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let interval = Duration::try_from_secs_f64(interval)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("interval: {e}")))?;
        let report = move |event: WatchEvent| {
            Python::attach(|py| {
                let Some(callback) = &on_event else {
                    if let WatchEvent::Refused { error } = &event {
                        eprintln!("verjus Runner.watch: refused: {error}");
                    }
                    return;
                };
                let result = (|| {
                    let d = PyDict::new(py);
                    match &event {
                        WatchEvent::Swapped { generation } => {
                            d.set_item("event", "swapped")?;
                            d.set_item("generation", generation)?;
                        }
                        WatchEvent::Refused { error } => {
                            d.set_item("event", "refused")?;
                            d.set_item("error", error.to_string())?;
                        }
                    }
                    callback.call1(py, (d,)).map(drop)
                })();
                if let Err(e) = result {
                    e.write_unraisable(py, None);
                }
            });
        };
        let mut slot = self
            .watcher
            .lock()
            .map_err(|_| PyRuntimeError::new_err("the watcher's lock is poisoned"))?;
        if slot.is_some() {
            return Err(PyRuntimeError::new_err(
                "this Runner already watches a folder; call stop_watching() first",
            ));
        }
        let watcher = py
            .detach(|| self.runner.watch(folder, interval, report))
            .map_err(to_py_err)?;
        *slot = Some(watcher);
        Ok(())
    }

    /// Stops watching and waits for the watcher thread; a no-op when not
    /// watching.
    fn stop_watching(&self, py: Python<'_>) {
        if let Some(w) = self.take_watcher() {
            py.detach(move || drop(w));
        }
    }
}
