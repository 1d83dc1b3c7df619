//! verjus-py: the native Python module `verjus._verjus`.
//!
//! The Python package `verjus` (in `python/verjus/`) re-exports what this module
//! defines. The bindings stay thin: they convert between numpy arrays and verjus
//! tensors, release the GIL around every computation, and turn every verjus
//! [`Error`](verjus::Error) into a Python exception (see [`error`]); nothing here
//! panics on user input.

mod error;
mod linalg;

use pyo3::prelude::*;
use verjus::Device;

/// The names of the devices this build can compute on: `"cpu"` always, then
/// `"cuda:0"`, `"cuda:1"`, ... for each CUDA device whose backend starts.
#[pyfunction]
fn devices() -> Vec<String> {
    let cuda = (0..)
        .map(Device::Cuda)
        .take_while(|d| verjus::backend(*d).is_ok());
    std::iter::once(Device::Cpu)
        .chain(cuda)
        .map(|d| d.to_string())
        .collect()
}

/// The module `verjus._verjus`.
#[pymodule]
fn _verjus(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(linalg::gemm, m)?)?;
    Ok(())
}
