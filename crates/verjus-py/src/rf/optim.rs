//! `RfOptimizer`: a handle to [`verjus::rf::Optimizer`], made from the same
//! `SolverConfig` JSON a `Trainer` takes (the `verjus.optim` classes write
//! it, and bind to RF parameters through this class).

use super::PyTensor;
use crate::error::{json_err, to_py_err};
use pyo3::prelude::*;
use verjus::core::optim::SolverConfig;
use verjus::rf::{Optimizer, RfTensor};

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

    /// Clears every parameter's gradient.
    ///
    /// :rtype: None
    fn zero_grad(&self) {
        self.0.zero_grad();
    }

    /// The number of steps taken.
    ///
    /// :rtype: int
    #[getter]
    fn steps(&self) -> u64 {
        self.0.steps()
    }
}
