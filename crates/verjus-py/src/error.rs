//! verjus errors as Python exceptions.
//!
//! Bad arguments and definitions (shapes, dtypes, values, devices of operands,
//! layer settings) raise `ValueError`; file problems raise `OSError`; an op a
//! backend lacks raises `NotImplementedError`; device and autograd failures
//! raise `RuntimeError`. The message is verjus' own, which names the op, the
//! layer or file, and the expected and actual shapes. Wrong Python types are
//! `TypeError`s raised where the arguments are converted (`convert`).

use pyo3::exceptions::{PyNotImplementedError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::PyErr;
use verjus::Error;

/// The Python exception for a verjus error.
pub(crate) fn to_py_err(err: Error) -> PyErr {
    let msg = err.to_string();
    match err {
        Error::ShapeMismatch { .. }
        | Error::DTypeMismatch { .. }
        | Error::InvalidArgument { .. }
        | Error::ShapeTooLarge { .. }
        | Error::WrongDevice { .. }
        | Error::Definition { .. } => PyValueError::new_err(msg),
        Error::File { .. } => PyOSError::new_err(msg),
        Error::Unsupported { .. } => PyNotImplementedError::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}

/// A `ValueError` for a JSON setting that does not parse; `what` names it.
pub(crate) fn json_err(what: &str, err: serde_json::Error) -> PyErr {
    PyValueError::new_err(format!("{what}: {err}"))
}
