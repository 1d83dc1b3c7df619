//! `RfOptimizer`: a handle to [`verjus::rf::Optimizer`] (the Python classes
//! `rf.SGD`, `rf.Adam`, `rf.AdamW` wrap it).

use super::PyTensor;
use crate::error::to_py_err;
use pyo3::prelude::*;
use verjus::rf::{Optimizer, RfTensor, Rule};

/// An optimizer over a fixed list of RF parameters.
#[pyclass(name = "RfOptimizer", module = "verjus.rf")]
pub(crate) struct PyOptimizer(Optimizer);

fn tensors(params: Vec<PyRef<'_, PyTensor>>) -> Vec<RfTensor> {
    params.iter().map(|p| p.0.clone()).collect()
}

#[pymethods]
impl PyOptimizer {
    /// SGD with optional (Nesterov) momentum and weight decay.
    ///
    /// :param list[Tensor] params: the parameters to update
    /// :param float lr: the learning rate
    /// :param float momentum: the momentum factor
    /// :param bool nesterov: Nesterov momentum
    /// :param float weight_decay: L2 weight decay
    /// :rtype: RfOptimizer
    #[staticmethod]
    #[pyo3(signature = (params, *, lr, momentum = 0.0, nesterov = false, weight_decay = 0.0))]
    fn sgd(
        params: Vec<PyRef<'_, PyTensor>>,
        lr: f32,
        momentum: f32,
        nesterov: bool,
        weight_decay: f32,
    ) -> PyResult<PyOptimizer> {
        let rule = Rule::Sgd {
            lr,
            momentum,
            nesterov,
            weight_decay,
        };
        Optimizer::new(tensors(params), rule)
            .map(PyOptimizer)
            .map_err(to_py_err)
    }

    /// Adam (L2 weight decay) or, with ``decoupled``, AdamW.
    ///
    /// :param list[Tensor] params: the parameters to update
    /// :param float lr: the learning rate
    /// :param tuple[float, float] betas: the moments' decay rates
    /// :param float eps: added to the denominator
    /// :param float weight_decay: the weight decay
    /// :param bool decoupled: decoupled weight decay (AdamW)
    /// :rtype: RfOptimizer
    #[staticmethod]
    #[pyo3(signature = (params, *, lr, betas, eps, weight_decay, decoupled))]
    fn adam(
        params: Vec<PyRef<'_, PyTensor>>,
        lr: f32,
        betas: (f32, f32),
        eps: f32,
        weight_decay: f32,
        decoupled: bool,
    ) -> PyResult<PyOptimizer> {
        let rule = Rule::Adam {
            lr,
            betas,
            eps,
            weight_decay,
            decoupled,
        };
        Optimizer::new(tensors(params), rule)
            .map(PyOptimizer)
            .map_err(to_py_err)
    }

    /// One update of every parameter that has a gradient.
    fn step(&mut self, py: Python<'_>) -> PyResult<()> {
        let opt = &mut self.0;
        py.detach(move || opt.step()).map_err(to_py_err)
    }

    /// Clears every parameter's gradient.
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
