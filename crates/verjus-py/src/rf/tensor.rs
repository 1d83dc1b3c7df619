//! `Tensor`: a handle to a [`verjus::rf::RfTensor`]: dims, dtype, values.

use super::operators::binary;
use super::{backend, PyDim};
use crate::convert::to_numpy;
use crate::error::to_py_err;
use numpy::{Element as NpElement, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::types::PyTuple;
use verjus::core::Element;
use verjus::ops::{BinaryOp, UnaryOp};
use verjus::rf::{fmt_dims, RfDType, RfTensor};
use verjus::{DType, Tensor};

/// A tensor whose axes are named by dims (see ``verjus.rf``): ops line
/// operands up by dims, never by position, and the operators ``+ - * / **``,
/// unary ``-`` and the comparisons combine with another Tensor (by dims) or a
/// number. A one-element tensor has a truth value; a larger one raises
/// ValueError (reduce it first).
///
/// ``Tensor(source)`` is another handle to the same tensor, for subclasses
/// such as ``rf.Parameter``; ``convert_to_tensor`` makes tensors from values.
///
/// :param Tensor source: the tensor to refer to
#[pyclass(name = "Tensor", module = "verjus.rf", frozen, subclass)]
#[derive(Clone)]
pub(crate) struct PyTensor(pub(crate) RfTensor);

pub(crate) fn dims_of(dims: &[PyRef<'_, PyDim>]) -> Vec<verjus::rf::Dim> {
    dims.iter().map(|d| d.0.clone()).collect()
}

/// `array` (of exactly `T`) copied into a tensor in row-major order, whatever
/// its strides: numpy's own `as_slice` would also take a Fortran-order array,
/// whose memory order is not the tensor's.
fn host<T: Element + NpElement + Copy>(array: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let ro: PyReadonlyArrayDyn<'_, T> = array.extract().map_err(|_| {
        PyTypeError::new_err(format!("convert_to_tensor: expected a {} array", T::DTYPE))
    })?;
    let view = ro.as_array();
    let data = match view.as_slice() {
        Some(row_major) => row_major.to_vec(),
        None => view.iter().copied().collect(),
    };
    Tensor::from_vec(ro.shape(), data).map_err(to_py_err)
}

/// A tensor from a numpy array of ``dtype``'s storage type (bool as
/// float32), as ``verjus.rf.convert_to_tensor`` prepares it.
///
/// :param npt.NDArray[Any] array: the values, any memory layout
/// :param Sequence[Dim] dims: one dim per axis, in order
/// :param str dtype: ``"float32"``, ``"int32"``, ``"int64"`` or ``"bool"``
/// :param bool requires_grad: make it a leaf that gradients flow to
/// :param Dim | None sparse_dim: the class dim that integer values index
/// :param Dim | None feature_dim: the feature dim
/// :return: the tensor, on the default device
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (array, dims, dtype, requires_grad, sparse_dim, feature_dim))]
pub(crate) fn rf_from_numpy(
    array: &Bound<'_, PyAny>,
    dims: Vec<PyRef<'_, PyDim>>,
    dtype: &str,
    requires_grad: bool,
    sparse_dim: Option<PyRef<'_, PyDim>>,
    feature_dim: Option<PyRef<'_, PyDim>>,
) -> PyResult<PyTensor> {
    let dtype = RfDType::parse(dtype).map_err(to_py_err)?;
    let value = match dtype {
        RfDType::Float32 | RfDType::Bool => host::<f32>(array)?,
        RfDType::Int32 => host::<i32>(array)?,
        RfDType::Int64 => host::<i64>(array)?,
    };
    RfTensor::from_tensor(
        value,
        dims_of(&dims),
        Some(dtype),
        backend()?,
        requires_grad,
    )
    .and_then(|t| t.with_sparse_dim(sparse_dim.map(|d| d.0.clone())))
    .and_then(|t| t.with_feature_dim(feature_dim.map(|d| d.0.clone())))
    .map(PyTensor)
    .map_err(to_py_err)
}

#[pymethods]
impl PyTensor {
    #[new]
    fn new(source: PyRef<'_, PyTensor>) -> PyTensor {
        PyTensor(source.0.clone())
    }

    /// Backpropagates from this one-element tensor: adds ``d self / d p`` to
    /// the ``grad`` of every leaf ``p`` it depends on (parameters).
    fn backward(&self, py: Python<'_>) -> PyResult<()> {
        let var = self.0.var().clone();
        py.detach(move || var.backward()).map_err(to_py_err)
    }

    /// The gradient accumulated by ``backward`` (leaves only), with this
    /// tensor's dims; None before any.
    ///
    /// :rtype: Tensor | None
    #[getter]
    fn grad(&self) -> PyResult<Option<PyTensor>> {
        let Some(g) = self.0.var().grad() else {
            return Ok(None);
        };
        let be = self.0.backend().clone();
        let g = verjus::core::autograd::Var::constant(
            verjus::ops::download(&*be, &g).map_err(to_py_err)?,
            be,
        )
        .map_err(to_py_err)?;
        RfTensor::new(g, self.0.dims().to_vec(), RfDType::Float32)
            .map(|t| Some(PyTensor(t)))
            .map_err(to_py_err)
    }

    /// Clears the accumulated gradient.
    fn zero_grad(&self) {
        self.0.var().zero_grad();
    }

    /// Replaces the values of a leaf (a parameter); graphs recorded before
    /// keep the old values.
    ///
    /// :param npt.NDArray[np.float32] array: the new values, the same shape
    fn assign(&self, py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<()> {
        let value = host::<f32>(array)?;
        let var = self.0.var().clone();
        py.detach(move || var.set_value(value)).map_err(to_py_err)
    }

    /// The dims, in raw-axis order.
    ///
    /// :rtype: tuple[Dim, ...]
    #[getter]
    fn dims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.dims().iter().map(|d| PyDim(d.clone())))
    }

    /// The dtype: ``"float32"``, ``"int32"``, ``"int64"`` or ``"bool"``.
    ///
    /// :rtype: str
    #[getter]
    fn dtype(&self) -> &'static str {
        self.0.dtype().name()
    }

    /// The class dim that integer values index, if any.
    ///
    /// :rtype: Dim | None
    #[getter]
    fn sparse_dim(&self) -> Option<PyDim> {
        self.0.sparse_dim().cloned().map(PyDim)
    }

    /// The feature dim, if set.
    ///
    /// :rtype: Dim | None
    #[getter]
    fn feature_dim(&self) -> Option<PyDim> {
        self.0.feature_dim().cloned().map(PyDim)
    }

    /// The raw sizes, in dims order.
    ///
    /// :rtype: list[int]
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.0.sizes()
    }

    /// Whether gradients flow to this tensor.
    ///
    /// :rtype: bool
    #[getter]
    fn requires_grad(&self) -> bool {
        self.0.var().requires_grad()
    }

    /// The values as a numpy array, axes in dims order (a bool tensor as a
    /// bool array).
    ///
    /// :rtype: npt.NDArray[Any]
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.0.clone();
        let host = py.detach(move || t.to_host()).map_err(to_py_err)?;
        let array = to_numpy(py, host)?;
        if self.0.dtype() == RfDType::Bool {
            return array.call_method1("astype", ("bool",));
        }
        Ok(array)
    }

    /// The values as a numpy array (RETURNN's name; see ``numpy``).
    ///
    /// :rtype: npt.NDArray[Any]
    #[getter]
    fn raw_tensor<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.numpy(py)
    }

    /// The same values with the axes in the order of ``dims``.
    ///
    /// :param Sequence[Dim] dims: all of this tensor's dims, in the new order
    /// :rtype: Tensor
    fn copy_transpose(&self, py: Python<'_>, dims: Vec<PyRef<'_, PyDim>>) -> PyResult<PyTensor> {
        let (t, dims) = (self.0.clone(), dims_of(&dims));
        py.detach(move || t.copy_transpose(&dims))
            .map(PyTensor)
            .map_err(to_py_err)
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.0)
    }

    /// The truth value of a one-element tensor, as in numpy and PyTorch. A
    /// tensor of several values has none: `if x > 1:` must not be always true.
    fn __bool__(&self, py: Python<'_>) -> PyResult<bool> {
        let count: usize = self.0.sizes().iter().product();
        if count != 1 {
            return Err(PyValueError::new_err(format!(
                "the truth value of a tensor of {count} values {} is ambiguous; \
                 reduce it first (rf.reduce_max, rf.reduce_min)",
                fmt_dims(self.0.dims())
            )));
        }
        let t = self.0.clone();
        let host = py.detach(move || t.to_host()).map_err(to_py_err)?;
        let truth = match host.dtype() {
            DType::I32 => host.as_slice::<i32>().map(|v| v[0] != 0),
            DType::I64 => host.as_slice::<i64>().map(|v| v[0] != 0),
            _ => host.as_slice::<f32>().map(|v| v[0] != 0.0),
        };
        truth.map_err(to_py_err)
    }

    fn __add__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &self.0, BinaryOp::Add, other, false)
    }

    fn __radd__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &self.0, BinaryOp::Add, other, true)
    }

    fn __sub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &self.0, BinaryOp::Sub, other, false)
    }

    fn __rsub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &self.0, BinaryOp::Sub, other, true)
    }

    fn __mul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &self.0, BinaryOp::Mul, other, false)
    }

    fn __rmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &self.0, BinaryOp::Mul, other, true)
    }

    fn __truediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &self.0, BinaryOp::Div, other, false)
    }

    fn __rtruediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &self.0, BinaryOp::Div, other, true)
    }

    fn __pow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        _modulo: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        binary(py, &self.0, BinaryOp::Pow, other, false)
    }

    fn __rpow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        _modulo: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        binary(py, &self.0, BinaryOp::Pow, other, true)
    }

    fn __neg__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = self.0.clone();
        py.detach(move || verjus::rf::activation(&t, UnaryOp::Neg))
            .map(PyTensor)
            .map_err(to_py_err)
    }

    fn __richcmp__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        let op = match op {
            CompareOp::Lt => BinaryOp::Lt,
            CompareOp::Le => BinaryOp::Le,
            CompareOp::Eq => BinaryOp::Eq,
            CompareOp::Ne => BinaryOp::Ne,
            CompareOp::Gt => BinaryOp::Gt,
            CompareOp::Ge => BinaryOp::Ge,
        };
        binary(py, &self.0, op, other, false)
    }
}
