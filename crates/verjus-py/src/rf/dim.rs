//! `Dim`: a handle to a [`verjus::rf::Dim`]; equal and hashed by identity.

use super::PyTensor;
use crate::error::to_py_err;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use verjus::rf::Dim;

/// The name of an axis. `Dim(7, name="feat")` is static, `Dim(lengths,
/// name="time")` dynamic (per-sequence lengths, an int Tensor), `Dim(None)`
/// of unknown size (like the batch). Two dims are equal only when they are
/// the same dim.
#[pyclass(name = "Dim", module = "verjus.rf", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct PyDim(pub(crate) Dim);

#[pymethods]
impl PyDim {
    #[new]
    #[pyo3(signature = (dimension, *, name = None))]
    fn new(dimension: Option<&Bound<'_, PyAny>>, name: Option<&str>) -> PyResult<PyDim> {
        let name = name.unwrap_or("unnamed");
        let Some(dimension) = dimension else {
            return Ok(PyDim(Dim::new_unknown(name)));
        };
        if let Ok(t) = dimension.cast::<PyTensor>() {
            let lengths = t.get().0.clone();
            return Dim::new_dynamic(lengths, name)
                .map(PyDim)
                .map_err(to_py_err);
        }
        match dimension.extract::<usize>() {
            Ok(n) => Ok(PyDim(Dim::new_static(n, name))),
            Err(_) => Err(PyTypeError::new_err(format!(
                "Dim: dimension must be an int >= 0, an int Tensor of lengths or None, got {}",
                dimension.get_type()
            ))),
        }
    }

    /// The name.
    #[getter]
    fn name(&self) -> &str {
        self.0.name()
    }

    /// The static size, or None for a dynamic or unknown dim.
    #[getter]
    fn dimension(&self) -> Option<usize> {
        self.0.static_size()
    }

    /// The axis size of tensors with this dim: the static size or the
    /// longest sequence; None when unknown.
    #[getter]
    fn size(&self) -> Option<usize> {
        self.0.size()
    }

    /// The per-sequence lengths of a dynamic dim (RETURNN's name).
    #[getter]
    fn dyn_size_ext(&self) -> Option<PyTensor> {
        self.0.lengths().cloned().map(PyTensor)
    }

    /// Whether the dim has per-sequence lengths.
    fn is_dynamic(&self) -> bool {
        self.0.is_dynamic()
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.0)
    }
}
