//! `RfOptimizer`: a handle to [`verjus::rf::Optimizer`], made from the same
//! `SolverConfig` JSON a `Trainer` takes (the `verjus.optim` classes write
//! it, and bind to RF parameters through this class).

use super::PyTensor;
use crate::collective::PyCollective;
use crate::convert::{floats, to_numpy};
use crate::error::{json_err, to_py_err};
use pyo3::prelude::*;
use std::sync::Arc;
use verjus::core::optim::SolverConfig;
use verjus::rf::replicas::{Averaging, Replicas};
use verjus::rf::{Optimizer, RfTensor, SlotState};

/// One parameter's state as Python sees it: its steps and its buffers.
type SavedSlot<'py> = (u64, Vec<Bound<'py, PyAny>>);

/// An optimizer over a fixed list of RF parameters, with the settings of
/// ``solver_json`` (a ``SolverConfig``: rule, schedule, clipping), which are
/// checked. The ``verjus.optim`` classes make it; use them.
///
/// :param list[Tensor] params: the parameters to update
/// :param str solver_json: the settings, as the ``verjus.optim`` classes write them
#[pyclass(name = "RfOptimizer", module = "verjus.rf")]
pub(crate) struct PyOptimizer(Optimizer);

#[pymethods]
impl PyOptimizer {
    /// An optimizer for ``params`` with the settings of ``solver_json`` (a
    /// ``SolverConfig``: rule, schedule, clipping), which are checked.
    #[new]
    #[pyo3(signature = (params, solver_json))]
    fn new(params: Vec<PyRef<'_, PyTensor>>, solver_json: &str) -> PyResult<PyOptimizer> {
        let config: SolverConfig =
            serde_json::from_str(solver_json).map_err(|e| json_err("solver_json", e))?;
        let params: Vec<RfTensor> = params.iter().map(|p| p.value()).collect::<PyResult<_>>()?;
        Optimizer::new(params, config)
            .map(PyOptimizer)
            .map_err(to_py_err)
    }

    /// One update of every parameter that has a gradient.
    ///
    /// :rtype: None
    fn step(&mut self, py: Python<'_>) -> PyResult<()> {
        let opt = &mut self.0;
        py.detach(move || opt.step()).map_err(to_py_err)
    }

    /// Trains data-parallel with the ranks of ``communicator`` (see
    /// ``verjus.distributed``): the parameters become rank 0's now, and each
    /// ``step`` (a call every rank makes) first averages the gradients over
    /// the ranks or, with ``param_sync_step`` N, averages the parameters after
    /// every N-th step.
    ///
    /// :param object communicator: the ranks' communicator
    /// :param int | None param_sync_step: average parameters every this many
    ///   steps instead of gradients before each
    /// :rtype: None
    #[pyo3(signature = (communicator, param_sync_step = None))]
    fn replicate(
        &mut self,
        py: Python<'_>,
        communicator: &Bound<'_, PyAny>,
        param_sync_step: Option<u64>,
    ) -> PyResult<()> {
        let replicas = Replicas {
            collective: Arc::new(PyCollective::new(communicator)?),
            averaging: match param_sync_step {
                Some(every) => Averaging::Values { every },
                None => Averaging::Grads,
            },
        };
        let opt = &mut self.0;
        py.detach(move || opt.replicate(replicas))
            .map_err(to_py_err)
    }

    /// Replaces every parameter by its mean over the ranks (parameter
    /// averaging's sync at an epoch's end); nothing when not replicated.
    ///
    /// :rtype: None
    fn average_parameters(&self, py: Python<'_>) -> PyResult<()> {
        let opt = &self.0;
        py.detach(move || opt.average_parameters())
            .map_err(to_py_err)
    }

    /// Clears every parameter's gradient.
    ///
    /// :rtype: None
    fn zero_grad(&mut self) {
        self.0.zero_grad();
    }

    /// The number of steps taken.
    ///
    /// :rtype: int
    #[getter]
    fn steps(&self) -> u64 {
        self.0.steps()
    }

    /// The base learning rate; set it between steps (checked, as when made).
    ///
    /// :rtype: float
    #[getter]
    fn lr(&self) -> f32 {
        self.0.lr()
    }

    #[setter]
    fn set_lr(&mut self, lr: f32) -> PyResult<()> {
        self.0.set_lr(lr).map_err(to_py_err)
    }

    /// The names of each parameter's state buffers, in order.
    ///
    /// :rtype: list[str]
    #[getter]
    fn slot_names(&self) -> Vec<&'static str> {
        self.0.slot_names().to_vec()
    }

    /// The state: the steps taken, and per parameter its steps and buffers
    /// (float32 arrays in ``slot_names`` order).
    ///
    /// :rtype: tuple[int, list[tuple[int, list[np.ndarray]]]]
    fn state<'py>(&self, py: Python<'py>) -> PyResult<(u64, Vec<SavedSlot<'py>>)> {
        let (step, slots) = self.0.state().map_err(to_py_err)?;
        let slots = slots
            .into_iter()
            .map(|s| {
                let arrays = s
                    .buffers
                    .into_iter()
                    .map(|b| to_numpy(py, b))
                    .collect::<PyResult<_>>()?;
                Ok((s.steps, arrays))
            })
            .collect::<PyResult<_>>()?;
        Ok((step, slots))
    }

    /// Restores what ``state`` gave (for the same parameters in the same
    /// order); a bad state is a ValueError and changes nothing.
    ///
    /// :param int step: the steps taken
    /// :param list[tuple[int, list[np.ndarray]]] slots: per parameter, its steps and buffers
    fn load_state(&mut self, step: u64, slots: Vec<SavedSlot<'_>>) -> PyResult<()> {
        let state = slots
            .iter()
            .enumerate()
            .map(|(i, (steps, arrays))| {
                let buffers = arrays
                    .iter()
                    .map(|a| floats(&format!("load_state: parameter {i}"), a)?.to_tensor())
                    .collect::<PyResult<_>>()?;
                Ok(SlotState {
                    steps: *steps,
                    buffers,
                })
            })
            .collect::<PyResult<_>>()?;
        self.0.load_state(step, state).map_err(to_py_err)
    }

    /// The global L2 norm of the gradients (computed on the device).
    ///
    /// :rtype: float
    fn grad_norm(&mut self, py: Python<'_>) -> PyResult<f32> {
        let opt = &mut self.0;
        py.detach(move || opt.grad_norm()).map_err(to_py_err)
    }

    /// Multiplies every gradient by ``factor``.
    ///
    /// :param float factor: the factor
    fn scale_grads(&mut self, factor: f32) -> PyResult<()> {
        self.0.scale_grads(factor).map_err(to_py_err)
    }

    /// Clips every gradient to ``[-max_value, max_value]`` elementwise
    /// (``torch.nn.utils.clip_grad_value_``).
    ///
    /// :param float max_value: the limit, finite and > 0
    fn clip_grad_values(&mut self, max_value: f32) -> PyResult<()> {
        self.0.clip_grad_values(max_value).map_err(to_py_err)
    }
}
