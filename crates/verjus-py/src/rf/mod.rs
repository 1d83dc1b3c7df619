//! The RF frontend's handles: `Dim` and `Tensor` (`dim.rs`, `tensor.rs`,
//! the operators in `operators.rs`), `RfOptimizer` (`optim.rs`) and the ops
//! as `rf_*` functions (`ops.rs`), which `python/verjus/rf/` re-exports
//! under RETURNN's names.
//!
//! Everything here only converts arguments and calls `verjus::rf`, where
//! the dim logic lives; ops compute with the GIL released.

mod dim;
mod operators;
mod ops;
mod optim;
mod tensor;

pub(crate) use dim::PyDim;
pub(crate) use tensor::PyTensor;

use pyo3::prelude::*;
use std::sync::OnceLock;
use verjus::{BackendRef, Device};

/// The backend RF tensors made from Python live on (the CPU).
pub(crate) fn backend() -> PyResult<BackendRef> {
    static CPU: OnceLock<BackendRef> = OnceLock::new();
    if let Some(be) = CPU.get() {
        return Ok(be.clone());
    }
    let be = verjus::backend(Device::Cpu).map_err(crate::error::to_py_err)?;
    Ok(CPU.get_or_init(|| be).clone())
}

/// Adds the RF classes, `rf_batch_dim` and the `rf_*` functions to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDim>()?;
    m.add_class::<PyTensor>()?;
    m.add_class::<optim::PyOptimizer>()?;
    m.add("rf_batch_dim", PyDim(verjus::rf::batch_dim()))?;
    ops::register(m)
}
