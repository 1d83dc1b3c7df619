//! `Dim`: a handle to a [`verjus::rf::Dim`]; equal and hashed by identity.

use super::PyTensor;
use crate::error::to_py_err;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use verjus::rf::Dim;

/// The name of an axis; equal only to itself (hashed by identity), so
/// ``Dim(7, name="f") != Dim(7, name="f")``.
///
/// ``Dim(7, name="feat")`` is static, ``Dim(lengths, name="time")`` dynamic
/// (``lengths`` an int Tensor over e.g. ``[batch_dim]``: the axis holds the
/// longest sequence, and reductions, softmax and matmul mask the padding),
/// ``Dim(None)`` of unknown size (like the batch: set by the tensors that
/// carry it, which must agree).
///
/// :param int | Tensor | None dimension: the static size, the per-sequence
///   lengths, or None
/// :param str | None name: the name, for messages (default ``"unnamed"``)
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
    ///
    /// :rtype: str
    #[getter]
    fn name(&self) -> &str {
        self.0.name()
    }

    /// The static size, or None for a dynamic or unknown dim.
    ///
    /// :rtype: int | None
    #[getter]
    fn dimension(&self) -> Option<usize> {
        self.0.static_size()
    }

    /// The axis size of tensors with this dim: the static size or the
    /// longest sequence; None when unknown.
    ///
    /// :rtype: int | None
    #[getter]
    fn size(&self) -> Option<usize> {
        self.0.size()
    }

    /// The per-sequence lengths of a dynamic dim (RETURNN's name).
    ///
    /// :rtype: Tensor | None
    #[getter]
    fn dyn_size_ext(&self) -> Option<PyTensor> {
        self.0.lengths().cloned().map(PyTensor)
    }

    /// Whether the dim has per-sequence lengths.
    ///
    /// :rtype: bool
    fn is_dynamic(&self) -> bool {
        self.0.is_dynamic()
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.0)
    }
}
