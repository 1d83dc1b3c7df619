//! Devices named from Python, and the host transfers around a computation.
//!
//! Python names a device with a string (`"cpu"`, `"cuda"`, `"cuda:N"`). A bad
//! name is a `ValueError`; a device that cannot be used here (no GPU, a CUDA
//! library missing) is a `RuntimeError` carrying the backend's message, which
//! names what is missing. Arrays arrive and leave as host memory, so a network
//! on a GPU gets its inputs uploaded and its outputs downloaded here, once per
//! call, with the GIL released.

use crate::error::to_py_err;
use pyo3::PyResult;
use verjus::{ops, BackendRef, Device, Result, Tensor};

/// The backend of the device named `name`.
pub(crate) fn backend(name: &str) -> PyResult<BackendRef> {
    let device: Device = name.parse().map_err(to_py_err)?;
    verjus::backend(device).map_err(to_py_err)
}

/// Runs `f` on `inputs` brought to `be`'s device (uploaded unless they are
/// there already) and brings its outputs back to the host.
pub(crate) fn on_device(
    be: &BackendRef,
    inputs: &[&Tensor],
    f: impl FnOnce(&[&Tensor]) -> Result<Vec<Tensor>>,
) -> Result<Vec<Tensor>> {
    let uploaded = inputs
        .iter()
        .filter(|t| t.device() != be.device())
        .map(|t| ops::upload(&**be, t))
        .collect::<Result<Vec<_>>>()?;
    let mut next = uploaded.iter();
    let refs: Vec<&Tensor> = inputs
        .iter()
        .map(|t| {
            if t.device() == be.device() {
                Some(*t)
            } else {
                next.next()
            }
        })
        .collect::<Option<_>>()
        .ok_or_else(|| verjus::Error::invalid("upload", "an input went missing"))?;
    f(&refs)?.into_iter().map(|t| to_host(be, t)).collect()
}

/// `t` on the host: itself, or downloaded from `be`'s device.
pub(crate) fn to_host(be: &BackendRef, t: Tensor) -> Result<Tensor> {
    if t.device() == Device::Cpu {
        Ok(t)
    } else {
        ops::download(&**be, &t)
    }
}
