//! `verjus._verjus.Trainer`: training and evaluation of a shared network.
//!
//! A trainer is made from a Python `Network` and trains that network (see
//! `shared`). Settings arrive as JSON (a `SolverConfig` and a `Loss`), so the
//! Python side and checkpoints speak the same data as Rust. Every step runs with
//! the GIL released; `train_epoch` takes the GIL back between steps to call the
//! progress callback and to notice Ctrl-C.

use crate::collective::PyCollective;
use crate::convert;
use crate::dataset::Dataset;
use crate::device;
use crate::error::{json_err, to_py_err};
use crate::network::Network;
use crate::sequences::Signature;
use crate::shared::{self, Model, Shared};
use crate::text_data::CharVocab;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use verjus::nn::solver::{Solver, SolverConfig};
use verjus::nn::{Loss, Metrics, Trainer as NnTrainer};
use verjus::{BackendRef, DType, Tensor};

/// Trains one network with one solver and one loss on one device.
///
/// ``Trainer(network, ...)`` trains ``network`` itself (the two share it).
/// ``solver_json`` is a ``SolverConfig``: ``{"rule": {"Adam": {...}} | {"Sgd":
/// {...}}, "schedule": "Constant" | {"Step": {...}} | {"Cosine": {...}},
/// "clip_norm": float | null}`` with the fields of the Rust ``Sgd`` / ``Adam``
/// / ``LrSchedule``; of ``Sgd`` and ``Adam`` only ``lr`` is required, the
/// others default to PyTorch's (``momentum``, ``dampening``, ``weight_decay``
/// 0, ``nesterov`` / ``decoupled`` false, ``beta1`` 0.9, ``beta2`` 0.999,
/// ``eps`` 1e-8), and an unknown field is an error. ``loss_json`` is a
/// ``Loss``: ``{"type": "SoftmaxCrossEntropy", "label_smoothing": 0.0}``,
/// ``{"type": "Nll"}`` or ``{"type": "Mse"}``. Bad settings are a
/// ``ValueError`` naming the field.
///
/// :param Network network: the network to train
/// :param str solver_json: the solver's configuration
/// :param str loss_json: the loss
/// :param str | None device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``; None trains
///   the network where it lives, another device moves the network there first
///   (like ``Network.to``). A device that is not there is a ``RuntimeError``
///   naming what is missing, and the network stays where it was.
#[pyclass(frozen, module = "verjus._verjus")]
pub(crate) struct Trainer {
    model: Shared,
    id: u64,
    network: Py<Network>,
}

impl Trainer {
    /// Runs `f` on this trainer with the GIL released and the write lock held.
    fn with_trainer<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut NnTrainer) -> PyResult<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut model = shared::write(&self.model)?;
            f(model.trainer_mut(self.id)?)
        })
    }
}

#[pymethods]
impl Trainer {
    #[new]
    #[pyo3(signature = (network, solver_json, loss_json, device = None))]
    fn new(
        py: Python<'_>,
        network: Bound<'_, Network>,
        solver_json: &str,
        loss_json: &str,
        device: Option<&str>,
    ) -> PyResult<Self> {
        let config: SolverConfig =
            serde_json::from_str(solver_json).map_err(|e| json_err("solver_json", e))?;
        let solver = Solver::from_config(config).map_err(to_py_err)?;
        let loss: Loss = serde_json::from_str(loss_json).map_err(|e| json_err("loss_json", e))?;
        loss.validate().map_err(to_py_err)?;
        let target = device.map(device::backend).transpose()?;
        let model = Shared::clone(&network.get().model);
        let id = shared::next_trainer_id();
        py.detach(|| {
            let mut guard = shared::write(&model)?;
            NnTrainer::check_network(guard.network()?.0).map_err(to_py_err)?;
            let be = match target {
                Some(be) => {
                    guard.move_to(BackendRef::clone(&be)).map_err(to_py_err)?;
                    be
                }
                None => BackendRef::clone(guard.network()?.1),
            };
            guard.hand_to(id, |net| NnTrainer::new(net, solver, loss, be))
        })?;
        Ok(Trainer {
            model,
            id,
            network: network.unbind(),
        })
    }

    /// A trainer continuing the checkpoint ``folder`` on ``device`` (bit for
    /// bit on the CPU), with a new ``network``. Every file is checked first.
    ///
    /// :param str folder: the checkpoint folder
    /// :param str device: where to train
    /// :rtype: Trainer
    #[staticmethod]
    #[pyo3(signature = (folder, device = "cpu"))]
    fn resume(py: Python<'_>, folder: PathBuf, device: &str) -> PyResult<Trainer> {
        let be = device::backend(device)?;
        let trainer = py.detach(|| NnTrainer::resume(&folder, be));
        let id = shared::next_trainer_id();
        let model: Shared = Arc::new(RwLock::new(Model::Training {
            trainer: Box::new(trainer.map_err(to_py_err)?),
            owner: id,
        }));
        let network = Py::new(
            py,
            Network {
                model: Shared::clone(&model),
            },
        )?;
        Ok(Trainer { model, id, network })
    }

    /// Trains data-parallel with the ranks of ``communicator`` (an object with
    /// ``rank``, ``world``, ``all_reduce``, ``broadcast`` and ``barrier``, such
    /// as ``verjus.distributed.MpiCommunicator``), starting from rank 0's
    /// parameters. Every rank must call it, and from then on make the same
    /// training and evaluation calls in the same order.
    ///
    /// :param object communicator: the ranks' communicator
    fn set_communicator(&self, py: Python<'_>, communicator: &Bound<'_, PyAny>) -> PyResult<()> {
        let collective = Arc::new(PyCollective::new(communicator)?);
        self.with_trainer(py, |t| {
            t.set_collective(collective);
            t.broadcast_parameters().map_err(to_py_err)
        })
    }

    /// A data-parallel step on a rank that holds no rows of the global batch
    /// (see ``set_communicator``): it takes the other ranks' update.
    ///
    /// :return: the global batch's mean loss
    /// :rtype: float
    fn train_no_rows(&self, py: Python<'_>) -> PyResult<f32> {
        self.with_trainer(py, |t| t.train_no_rows().map_err(to_py_err))
    }

    /// Saves network, weights, solver state, loss, step and dropout stream
    /// position as the folder ``folder``, replacing it atomically; other files
    /// in it are kept. A character model's ``vocab`` is saved with them
    /// (``vocab.json``, listed in the checkpoint's manifest: read it back with
    /// ``CharVocab.from_run``).
    ///
    /// :param str folder: the checkpoint folder
    /// :param CharVocab | None vocab: the vocabulary of a character model
    #[pyo3(signature = (folder, vocab = None))]
    fn save_checkpoint(
        &self,
        py: Python<'_>,
        folder: PathBuf,
        vocab: Option<PyRef<'_, CharVocab>>,
    ) -> PyResult<()> {
        let vocab = vocab.as_ref().map(|v| &v.inner);
        self.with_trainer(py, |t| {
            t.save_checkpoint_with(&folder, vocab).map_err(to_py_err)
        })
    }

    /// The network this trainer trains (the same object it was made with).
    ///
    /// :rtype: Network
    #[getter]
    fn network(&self, py: Python<'_>) -> Py<Network> {
        self.network.clone_ref(py)
    }

    /// Mixed precision from here on: Linear and Conv2d products read their
    /// operands rounded to ``dtype`` and accumulate in float32; everything
    /// else, the parameters and the gradients stay float32.
    ///
    /// :param str | None dtype: ``"bfloat16"``, ``"float16"`` or None (float32)
    #[pyo3(signature = (dtype))]
    fn set_precision(&self, py: Python<'_>, dtype: Option<&str>) -> PyResult<()> {
        let dtype = dtype
            .map(str::parse::<DType>)
            .transpose()
            .map_err(to_py_err)?;
        self.with_trainer(py, |t| t.set_precision(dtype).map_err(to_py_err))
    }

    /// Steps skipped because their float16-scaled gradients overflowed
    /// (``"16-mixed"``'s dynamic loss scaling; 0 otherwise).
    ///
    /// :rtype: int
    #[getter]
    fn skipped_steps(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_trainer(py, |t| Ok(t.skipped_steps()))
    }

    /// The loss scale of ``"16-mixed"`` (1.0 otherwise).
    ///
    /// :rtype: float
    #[getter]
    fn loss_scale(&self, py: Python<'_>) -> PyResult<f32> {
        self.with_trainer(py, |t| Ok(t.loss_scale()))
    }

    /// The device this trainer and its network compute on.
    ///
    /// :rtype: str
    #[getter]
    fn device(&self, py: Python<'_>) -> PyResult<String> {
        self.with_trainer(py, |t| Ok(t.backend().device().to_string()))
    }

    /// Solver steps taken so far.
    ///
    /// :rtype: int
    #[getter]
    fn step(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_trainer(py, |t| Ok(t.solver().state().step()))
    }

    /// The learning rate the next step will use (after the schedule).
    ///
    /// :rtype: float
    #[getter]
    fn lr(&self, py: Python<'_>) -> PyResult<f32> {
        self.with_trainer(py, |t| Ok(t.solver().lr()))
    }

    /// The solver's configuration (not its state) as JSON.
    ///
    /// :rtype: str
    fn solver_json(&self, py: Python<'_>) -> PyResult<String> {
        let config = self.with_trainer(py, |t| Ok(t.solver().config()))?;
        serde_json::to_string(&config).map_err(|e| json_err("solver_json", e))
    }

    /// One step: forward (training mode), loss, backward, update normalised by
    /// this batch's size. With ``return_output`` false the output is neither
    /// copied nor downloaded, and None takes its place.
    ///
    /// :param npt.ArrayLike x: the inputs ``[batch, ...]``
    /// :param npt.ArrayLike y: class labels ``[batch]`` or targets
    /// :param bool return_output: whether to return a copy of output 0
    /// :return: the mean loss and a copy of output 0 (or None)
    /// :rtype: tuple[float, npt.NDArray[np.float32] | None]
    #[pyo3(signature = (x, y, return_output = true))]
    fn train_minibatch<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: &Bound<'py, PyAny>,
        return_output: bool,
    ) -> PyResult<(f32, Option<Bound<'py, PyAny>>)> {
        let x = convert::floats("train_minibatch: x", x)?;
        let y = convert::targets("train_minibatch: y", y)?;
        let (x, y) = (x.view()?, y.view()?);
        let (loss, out) = self.with_trainer(py, |t| {
            let be = BackendRef::clone(t.backend());
            let (loss, out) = t.train_minibatch(&x, &y).map_err(to_py_err)?;
            let out = return_output.then(|| copy_out(&be, out)).transpose()?;
            Ok((loss, out))
        })?;
        Ok((loss, out.map(|t| convert::to_numpy(py, t)).transpose()?))
    }

    /// One step on a batch of sequences: inputs padded batch-major (token
    /// ids ``[batch, T]`` or frames ``[batch, T, ...]``), each example's
    /// length (int32 ``[batch]``) and targets: per frame ``[batch, T]`` class
    /// ids when the output is a sequence (the loss is the mean over real
    /// frames), else per example. Returns the mean loss.
    ///
    /// :param npt.ArrayLike x: the padded inputs
    /// :param npt.ArrayLike lengths: each example's length
    /// :param npt.ArrayLike y: the targets
    /// :rtype: float
    fn train_sequences(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        lengths: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
    ) -> PyResult<f32> {
        let sig = self.with_trainer(py, |t| Ok(Signature::of(t.network())))?;
        let x = sig.convert("train_sequences", PyList::new(py, [x])?.as_any())?;
        let lengths = convert::ids("train_sequences: lengths", lengths)?;
        let y = convert::targets("train_sequences: y", y)?;
        let (xv, lv, yv) = (x[0].view()?, lengths.view()?, y.view()?);
        self.with_trainer(py, |t| {
            let (loss, _) = t.train_sequences(&xv, &lv, &yv).map_err(to_py_err)?;
            Ok(loss)
        })
    }

    /// The mean loss over one batch of sequences (as ``train_sequences``
    /// takes them) in inference mode, and what it is a mean over: real
    /// frames for a sequence output, else examples.
    ///
    /// :param npt.ArrayLike x: the padded inputs
    /// :param npt.ArrayLike lengths: each example's length
    /// :param npt.ArrayLike y: the targets
    /// :rtype: tuple[float, int]
    fn evaluate_sequences(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        lengths: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
    ) -> PyResult<(f32, usize)> {
        let sig = self.with_trainer(py, |t| Ok(Signature::of(t.network())))?;
        let x = sig.convert("evaluate_sequences", PyList::new(py, [x])?.as_any())?;
        let lengths = convert::ids("evaluate_sequences: lengths", lengths)?;
        let y = convert::targets("evaluate_sequences: y", y)?;
        let (xv, lv, yv) = (x[0].view()?, lengths.view()?, y.view()?);
        self.with_trainer(py, |t| {
            t.evaluate_sequences(&xv, &lv, &yv).map_err(to_py_err)
        })
    }

    /// Mean loss and accuracy (None unless ``y`` holds class labels) in
    /// inference mode.
    ///
    /// :param npt.ArrayLike x: the inputs ``[N, ...]``
    /// :param npt.ArrayLike y: class labels ``[N]`` or targets
    /// :param int batch_size: examples per forward pass
    /// :rtype: tuple[float, float | None]
    #[pyo3(signature = (x, y, batch_size = 1000))]
    fn evaluate(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
        batch_size: usize,
    ) -> PyResult<(f32, Option<f32>)> {
        let x = convert::floats("evaluate: x", x)?;
        let y = convert::targets("evaluate: y", y)?;
        let (x, y) = (x.view()?, y.view()?);
        let m = self.with_trainer(py, |t| t.evaluate(&x, &y, batch_size).map_err(to_py_err))?;
        Ok(metrics(m))
    }

    /// Checks ``data``'s labels against the network's classes (for the losses
    /// that take labels), naming the first bad one by its example's index.
    ///
    /// :param Dataset data: the dataset
    fn check_dataset(&self, py: Python<'_>, data: &Bound<'_, Dataset>) -> PyResult<()> {
        let data = &data.get().inner;
        self.with_trainer(py, |t| t.check_dataset(data).map_err(to_py_err))
    }

    /// ``evaluate`` over a ``Dataset``.
    ///
    /// :param Dataset data: the dataset
    /// :param int batch_size: examples per forward pass
    /// :rtype: tuple[float, float | None]
    #[pyo3(signature = (data, batch_size = 1000))]
    fn evaluate_dataset(
        &self,
        py: Python<'_>,
        data: &Bound<'_, Dataset>,
        batch_size: usize,
    ) -> PyResult<(f32, Option<f32>)> {
        let data = &data.get().inner;
        let m = self.with_trainer(py, |t| {
            t.evaluate(data.examples(), data.labels(), batch_size)
                .map_err(to_py_err)
        })?;
        Ok(metrics(m))
    }

    /// One pass over ``data`` in minibatches (shuffled by ``shuffle_seed`` when
    /// given, the last batch may be short). Data-parallel (see
    /// ``set_communicator``), each rank steps on its rows of every batch
    /// (``rank, rank + world, ...``); losses and counts are the whole
    /// batch's. After each step, with the GIL
    /// held, calls ``on_step(examples_in_step, loss)``; an exception it raises
    /// stops the epoch and propagates.
    ///
    /// :param Dataset data: the dataset
    /// :param int batch_size: examples per step
    /// :param int | None shuffle_seed: the seed of the order, or None for the
    ///   dataset's order
    /// :param Callable[[int, float], object] | None on_step: the progress
    ///   callback
    /// :return: the mean training loss over the epoch's examples
    /// :rtype: float
    #[pyo3(signature = (data, batch_size, shuffle_seed = None, on_step = None))]
    fn train_epoch(
        &self,
        py: Python<'_>,
        data: &Bound<'_, Dataset>,
        batch_size: usize,
        shuffle_seed: Option<u64>,
        on_step: Option<Bound<'_, PyAny>>,
    ) -> PyResult<f32> {
        let data = &data.get().inner;
        if data.is_empty() {
            return Err(PyValueError::new_err("train_epoch: the dataset is empty"));
        }
        let (rank, world) =
            self.with_trainer(py, |t| Ok((t.collective().rank(), t.collective().world())))?;
        let mut batches = data
            .batches(batch_size, shuffle_seed)
            .and_then(|b| b.shard(rank, world))
            .map_err(to_py_err)?;
        // Losses and counts are the global batch's (every rank's rows).
        let (mut loss_sum, mut seen) = (0.0f64, 0usize);
        loop {
            let step = self.with_trainer(py, |t| {
                let Some(batch) = batches.next() else {
                    return Ok(None);
                };
                let batch = batch.map_err(to_py_err)?;
                let loss = if batch.x.dims().first() == Some(&0) {
                    t.train_no_rows()
                } else {
                    t.train_minibatch(&batch.x, &batch.y).map(|(loss, _)| loss)
                };
                loss.map(Some).map_err(to_py_err)
            })?;
            let Some(loss) = step else { break };
            let n = batch_size.min(data.len() - seen);
            loss_sum += f64::from(loss) * n as f64;
            seen += n;
            if let Some(callback) = &on_step {
                callback.call1((n, loss))?;
            }
            py.check_signals()?;
        }
        Ok((loss_sum / seen.max(1) as f64) as f32)
    }
}

/// A host copy of the trainer's output `out` (downloaded from a device).
fn copy_out(be: &BackendRef, out: &Tensor) -> PyResult<Tensor> {
    if out.device() == verjus::Device::Cpu {
        out.try_clone_host().map_err(to_py_err)
    } else {
        verjus::ops::download(&**be, out).map_err(to_py_err)
    }
}

fn metrics(m: Metrics) -> (f32, Option<f32>) {
    (m.loss, m.accuracy)
}
