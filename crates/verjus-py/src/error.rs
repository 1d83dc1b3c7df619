//! verjus errors as Python exceptions.
//!
//! Bad arguments (shapes, dtypes, values, devices of operands) raise `ValueError`;
//! an op a backend lacks raises `NotImplementedError`; device and autograd
//! failures raise `RuntimeError`. The message is verjus' own, which names the op
//! and the expected and actual shapes.

use pyo3::exceptions::{PyNotImplementedError, PyRuntimeError, PyValueError};
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
        | Error::WrongDevice { .. } => PyValueError::new_err(msg),
        Error::Unsupported { .. } => PyNotImplementedError::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}
