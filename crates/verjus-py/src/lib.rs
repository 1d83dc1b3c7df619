//! verjus-py: the native Python module `verjus._verjus`.
//!
//! The Python package `verjus` (in `python/verjus/`) re-exports what this module
//! defines. The bindings stay thin: they convert between numpy arrays and verjus
//! tensors, release the GIL around every computation, and turn every verjus
//! [`Error`](verjus::Error) into a Python exception (see `error.rs`); nothing here
//! panics on user input.
//!
//! - `network.rs`, `trainer.rs`, `dataset.rs`, `runner.rs`: the classes
//!   `Network`, `Trainer`, `Dataset`, `Runner`; a network and its trainers
//!   share one model (`shared.rs`);
//! - `convert.rs`: numpy arrays in (read in place when they can be) and out;
//! - `data.rs`: Fashion-MNIST from disk; `linalg.rs`: `gemm`;
//! - `rf/`: the RF frontend's `Dim`, `Tensor` and `rf_*` ops (re-exported by
//!   `verjus.rf`).

mod convert;
mod data;
mod dataset;
mod error;
mod linalg;
mod network;
mod rf;
mod runner;
mod shared;
mod trainer;

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
    m.add_function(wrap_pyfunction!(data::fashion_mnist, m)?)?;
    m.add_class::<network::Network>()?;
    m.add_class::<dataset::Dataset>()?;
    m.add_class::<trainer::Trainer>()?;
    m.add_class::<runner::Runner>()?;
    rf::register(m)?;
    Ok(())
}
