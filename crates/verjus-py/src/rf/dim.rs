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

    /// A dim is its own copy (as in RETURNN: a deep copy of a module keeps
    /// its dims, so the copy's parameters have the same dims).
    ///
    /// :rtype: Dim
    fn __copy__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// See ``__copy__``.
    ///
    /// :param dict memo: unused
    /// :rtype: Dim
    fn __deepcopy__<'py>(slf: PyRef<'py, Self>, memo: &Bound<'py, PyAny>) -> PyRef<'py, Self> {
        let _ = memo;
        slf
    }

    /// ``self + other`` (an int or a Dim): a dim whose size (each entry's
    /// length, for a dynamic dim) is the sum; the same formula on the same
    /// dim gives the same dim, and ``(dim + 1) - 1`` is ``dim``.
    fn __add__(&self, other: DimOperand<'_>) -> PyResult<PyDim> {
        self.add(other, false)
    }

    /// ``other + self``: the same size as ``self + other``, another dim (as in RETURNN).
    fn __radd__(&self, other: DimOperand<'_>) -> PyResult<PyDim> {
        self.add(other, true)
    }

    /// ``self - n``, each entry's length less ``n`` (at least 0).
    fn __sub__(&self, n: i64) -> PyResult<PyDim> {
        self.sub_right(n)
    }

    /// ``self - n``, the right end shortened (RETURNN's ``sub_right``).
    ///
    /// :param int n: the amount
    /// :rtype: Dim
    fn sub_right(&self, n: i64) -> PyResult<PyDim> {
        dim_result(self.0.add(-n, false))
    }

    /// ``self - n``, the left end shortened (RETURNN's ``sub_left``).
    ///
    /// :param int n: the amount
    /// :rtype: Dim
    fn sub_left(&self, n: i64) -> PyResult<PyDim> {
        dim_result(self.0.add(-n, true))
    }

    /// ``self * n`` (``n >= 1``).
    fn __mul__(&self, n: i64) -> PyResult<PyDim> {
        dim_result(self.0.mul(n, false))
    }

    /// ``n * self`` (``n >= 1``): the size of ``self * n``, another dim.
    fn __rmul__(&self, n: i64) -> PyResult<PyDim> {
        dim_result(self.0.mul(n, true))
    }

    /// ``self // n``: each entry's length divided by ``n``, rounded down;
    /// ``(dim * n) // n`` is ``dim``.
    fn __floordiv__(&self, n: i64) -> PyResult<PyDim> {
        dim_result(self.0.floordiv(n))
    }

    /// ``self / n``: the size must be a multiple of ``n`` (``div_right``).
    fn __truediv__(&self, n: i64) -> PyResult<PyDim> {
        self.div_right(n)
    }

    /// ``self / n``, the size a multiple of ``n`` (e.g. the half of a feature dim).
    ///
    /// :param int n: the divisor, >= 1
    /// :rtype: Dim
    fn div_left(&self, n: i64) -> PyResult<PyDim> {
        dim_result(self.0.div(n, true))
    }

    /// ``self / n``, the size a multiple of ``n``.
    ///
    /// :param int n: the divisor, >= 1
    /// :rtype: Dim
    fn div_right(&self, n: i64) -> PyResult<PyDim> {
        dim_result(self.0.div(n, false))
    }

    /// ``ceil(self / n)``: each entry's length divided by ``n``, rounded up
    /// (the out dim of a stride-``n`` conv with "same" padding).
    ///
    /// :param int n: the divisor, >= 1
    /// :rtype: Dim
    fn ceildiv_right(&self, n: i64) -> PyResult<PyDim> {
        dim_result(self.0.ceildiv(n, false))
    }

    /// ``ceil(self / n)``, the left form (another dim of the same size as
    /// ``ceildiv_right``).
    ///
    /// :param int n: the divisor, >= 1
    /// :rtype: Dim
    fn ceildiv_left(&self, n: i64) -> PyResult<PyDim> {
        dim_result(self.0.ceildiv(n, true))
    }
}

/// The other operand of ``dim + other``: a Dim or an int (anything else
/// fails to extract, and Python gets NotImplemented).
#[derive(FromPyObject)]
enum DimOperand<'py> {
    Dim(PyRef<'py, PyDim>),
    Int(i64),
}

impl PyDim {
    /// ``self + other``, or ``other + self`` when ``left``.
    fn add(&self, other: DimOperand<'_>, left: bool) -> PyResult<PyDim> {
        dim_result(match other {
            DimOperand::Dim(d) => self.0.add_dim(&d.0, left),
            DimOperand::Int(n) => self.0.add(n, left),
        })
    }
}

fn dim_result(r: verjus::Result<Dim>) -> PyResult<PyDim> {
    r.map(PyDim).map_err(to_py_err)
}
