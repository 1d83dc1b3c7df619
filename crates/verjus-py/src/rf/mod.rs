//! The RF frontend's handles: `Dim` and `Tensor` (`dim.rs`, `tensor.rs`,
//! the operators in `operators.rs`), `RfOptimizer` (`optim.rs`) and the ops
//! as `rf_*` functions (`ops.rs`), which `python/verjus/rf/` re-exports
//! under RETURNN's names.
//!
//! Everything here only converts arguments and calls `verjus::rf`, where
//! the dim logic lives; ops compute with the GIL released, except tiny ops
//! on the CPU (see [`compute`]).

mod dim;
mod operators;
mod ops;
mod optim;
mod tensor;

pub(crate) use dim::PyDim;
pub(crate) use tensor::PyTensor;

use pyo3::prelude::*;
use std::sync::OnceLock;
use verjus::rf::RfTensor;
use verjus::{BackendRef, Device};

/// Input elements below which an op on CPU tensors keeps the GIL. Releasing
/// and re-taking it costs about 0.15 us (measured: `rf.relu` on 256 elements
/// took 0.62 us with the release, of which the op itself 0.22 us), more than
/// such an op computes, and it holds other Python threads up far less than
/// the interpreter's 5 ms switch interval.
const KEEP_GIL_BELOW: usize = 4096;

/// Runs the op `f` on `inputs`: with the GIL released, unless every input
/// is a CPU tensor of fewer than [`KEEP_GIL_BELOW`] elements.
pub(crate) fn compute<T: Send>(
    py: Python<'_>,
    inputs: &[&RfTensor],
    f: impl FnOnce() -> T + Send,
) -> T {
    let tiny = inputs
        .iter()
        .all(|t| t.backend().device() == Device::Cpu && t.var().value().numel() < KEEP_GIL_BELOW);
    if tiny {
        f()
    } else {
        py.detach(f)
    }
}

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
