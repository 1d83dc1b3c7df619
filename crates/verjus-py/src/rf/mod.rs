//! The RF frontend's handles: `Dim` and `Tensor` (`dim.rs`, `tensor.rs`,
//! the operators in `operators.rs`), `RfOptimizer` (`optim.rs`), the ops
//! as `rf_*` functions (`ops.rs`; slice, split, conv, pool in
//! `window_ops.rs`), which `python/verjus/rf/` re-exports under RETURNN's
//! names, and the default device that tensors are created on.
//!
//! Everything here only converts arguments and calls `verjus::rf`, where
//! the dim logic lives; ops compute with the GIL released, except tiny ops
//! on the CPU (see [`compute`]).

mod dim;
mod operators;
mod ops;
mod optim;
mod tensor;
mod window_ops;

pub(crate) use dim::PyDim;
pub(crate) use tensor::PyTensor;

use crate::error::to_py_err;
use pyo3::prelude::*;
use std::sync::{Mutex, PoisonError};
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

/// The default device's backend, once chosen (the CPU until then).
static DEFAULT: Mutex<Option<BackendRef>> = Mutex::new(None);

/// The backend RF tensors made from Python are created on (the default
/// device's); ops then run on whichever backend holds their operands.
/// Every creation goes through here, so a device that `verjus::backend`
/// can select works without changes here.
pub(crate) fn backend() -> PyResult<BackendRef> {
    let mut slot = DEFAULT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(be) = &*slot {
        return Ok(be.clone());
    }
    let be = verjus::backend(Device::Cpu).map_err(to_py_err)?;
    *slot = Some(be.clone());
    Ok(be)
}

/// Makes `device` (`"cpu"`, `"cuda"`, `"cuda:N"`) the default: a bad name is
/// a ValueError, a device that cannot be used here a RuntimeError, and the
/// default stays.
#[pyfunction]
fn rf_set_default_device(device: &str) -> PyResult<()> {
    let be = crate::device::backend(device)?;
    *DEFAULT.lock().unwrap_or_else(PoisonError::into_inner) = Some(be);
    Ok(())
}

/// The default device's name (`"cpu"`, `"cuda:0"`, ...).
#[pyfunction]
fn rf_get_default_device() -> PyResult<String> {
    Ok(backend()?.device().to_string())
}

/// Adds the RF classes, `rf_batch_dim` and the `rf_*` functions to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDim>()?;
    m.add_class::<PyTensor>()?;
    m.add_class::<optim::PyOptimizer>()?;
    m.add("rf_batch_dim", PyDim(verjus::rf::batch_dim()))?;
    m.add_function(wrap_pyfunction!(rf_set_default_device, m)?)?;
    m.add_function(wrap_pyfunction!(rf_get_default_device, m)?)?;
    window_ops::register(m)?;
    ops::register(m)
}
