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
//! - `collective.rs`: data-parallel collectives through a Python communicator
//!   (mpi4py);
//! - `constants.rs`: run-folder file names and caps shared with Python;
//! - `config.rs`: optimizer and schedule settings checked when made;
//! - `device.rs`: device names, and host transfers around a computation;
//! - `convert.rs`: numpy arrays in (read in place when they can be) and out;
//! - `data.rs`: Fashion-MNIST from disk; `linalg.rs`: `gemm`;
//! - `text_data.rs`: `CharVocab`, `TextBatcher` and the fortunes texts;
//! - `rf/`: the RF frontend's `Dim`, `Tensor` and `rf_*` ops (re-exported by
//!   `verjus.rf`).
//!
//! Every Python-visible function, class, method and property has its
//! docstring here (`///`), with the types of its parameters (`:param TYPE
//! name:`) and result (`:rtype:`): `scripts/gen_stub.py` writes the type stub
//! `python/verjus/_verjus.pyi` from them, and a test checks that it is current.

mod autocast;
mod collective;
mod config;
mod constants;
mod convert;
mod data;
mod dataset;
mod device;
mod error;
mod linalg;
mod memory;
mod network;
mod rf;
mod runner;
mod safetensors;
mod sequences;
mod shared;
mod stepper;
mod text_data;
mod trainer;

use pyo3::prelude::*;
use verjus::Device;

/// The names of the devices this build can compute on: ``"cpu"`` always
/// first, then ``"cuda:0"``, ``"cuda:1"``, ... for each CUDA device whose
/// backend starts.
///
/// :rtype: list[str]
#[pyfunction]
fn devices() -> Vec<String> {
    let cuda = (0..verjus::cuda::device_count())
        .map(Device::Cuda)
        .take_while(|d| verjus::backend(*d).is_ok());
    std::iter::once(Device::Cpu)
        .chain(cuda)
        .map(|d| d.to_string())
        .collect()
}

/// Whether a CUDA GPU and the libraries the CUDA backend needs are usable.
///
/// :rtype: bool
#[pyfunction]
fn cuda_is_available() -> bool {
    verjus::cuda::is_available()
}

/// The number of CUDA devices (0 where CUDA is unavailable).
///
/// :rtype: int
#[pyfunction]
fn cuda_device_count() -> usize {
    verjus::cuda::device_count()
}

/// Why CUDA is unavailable (None where it is available).
///
/// :rtype: str | None
#[pyfunction]
fn cuda_unavailable_reason() -> Option<String> {
    verjus::cuda::unavailable_reason()
}

/// The bytes of CUDA device ``ordinal``'s allocator.
///
/// :param int ordinal: the device
/// :return: ``(in_use, peak_in_use, reserved)``
/// :rtype: tuple[int, int, int]
#[pyfunction]
#[pyo3(signature = (ordinal = 0))]
fn cuda_memory_stats(ordinal: usize) -> PyResult<(usize, usize, usize)> {
    let be = verjus::cuda::cuda_backend(ordinal).map_err(error::to_py_err)?;
    let s = be.memory_stats();
    Ok((s.in_use, s.peak_in_use, s.reserved))
}

/// Starts a new high-water mark of CUDA device ``ordinal``'s allocator.
///
/// :param int ordinal: the device
#[pyfunction]
#[pyo3(signature = (ordinal = 0))]
fn cuda_reset_peak_memory(ordinal: usize) -> PyResult<()> {
    let be = verjus::cuda::cuda_backend(ordinal).map_err(error::to_py_err)?;
    be.reset_peak_memory();
    Ok(())
}

/// The native module of verjus (crates/verjus-py).
///
/// The Python package wraps these classes; user code imports ``verjus``, not
/// this module. Every call that computes releases the GIL. Errors:
/// ``ValueError`` for bad shapes, dtypes, values and definitions (the message
/// names the layer and the expected and actual shapes), ``OSError`` for file
/// problems (the message names the file), ``RuntimeError`` for device
/// failures, ``NotImplementedError`` for an op a backend lacks. No Rust panic
/// reaches Python.
#[pymodule]
fn _verjus(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // numpy's C API is imported on the first array made. Made later, with a
    // Ctrl-C pending, that import fails, and the numpy crate panics on it: so
    // it is imported here, with the module.
    numpy::PyArray1::<f32>::zeros(m.py(), 0, false);
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    constants::register(m)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_is_available, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_device_count, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_unavailable_reason, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_reset_peak_memory, m)?)?;
    m.add_function(wrap_pyfunction!(linalg::gemm, m)?)?;
    m.add_function(wrap_pyfunction!(config::check_solver_config, m)?)?;
    m.add_function(wrap_pyfunction!(config::check_schedule, m)?)?;
    m.add_function(wrap_pyfunction!(data::fashion_mnist, m)?)?;
    m.add_class::<network::Network>()?;
    m.add_class::<dataset::Dataset>()?;
    m.add_class::<trainer::Trainer>()?;
    m.add_class::<runner::Runner>()?;
    m.add_class::<stepper::Stepper>()?;
    rf::register(m)?;
    autocast::register(m)?;
    safetensors::register(m)?;
    memory::register(m)?;
    text_data::register(m)?;
    Ok(())
}
