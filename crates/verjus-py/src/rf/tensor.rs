//! `Tensor`: a handle to a [`verjus::rf::RfTensor`]: dims, dtype, values.

use super::operators::binary;
use super::{backend, PyDim};
use crate::convert::to_numpy;
use crate::error::to_py_err;
use numpy::{Element as NpElement, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::{PyAttributeError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;
use std::borrow::Cow;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use verjus::core::{half, Element};
use verjus::ops::{BinaryOp, UnaryOp};
use verjus::rf::{fmt_dims, Dim, RfDType, RfTensor};
use verjus::{DType, Tensor};

/// A tensor whose axes are named by dims (see ``verjus.rf``): ops line
/// operands up by dims, never by position, and the operators ``+ - * / **``,
/// unary ``-`` and the comparisons combine with another Tensor (by dims) or a
/// number. A one-element tensor has a truth value; a larger one raises
/// ValueError (reduce it first).
///
/// ``Tensor(name, dims, dtype, *, sparse_dim=None, feature_dim=None,
/// raw_tensor=None)`` is RETURNN's form: without ``raw_tensor`` it is a
/// *template*, dims and dtype without values (ops refuse it until values are
/// assigned to ``raw_tensor``; ``TensorDict`` and RETURNN's ``extern_data`` are
/// made of them). ``Tensor(source)`` is another handle to ``source``'s value,
/// for subclasses such as ``rf.Parameter``. ``convert_to_tensor`` makes
/// tensors from values. RETURNN's further Tensor methods
/// (``mark_as_output``, ``copy_template``, ``get_axis_from_description``, ...)
/// are in ``verjus.rf.tensor_api``.
///
/// :param str | Tensor name: the name, or the tensor to refer to
/// :param Sequence[Dim] | None dims: the dims, in raw-axis order
/// :param str | None dtype: ``"float32"`` (default), ``"int32"``, ``"int64"``, ``"bool"``
/// :param Dim | None sparse_dim: the class dim that integer values index
/// :param Dim | None feature_dim: the feature dim, one of ``dims``
/// :param npt.ArrayLike | None raw_tensor: the values (None: a template)
/// :param Any _kwargs: RETURNN's ``feature_dim_axis=`` (an axis, or None) and
///   ``version=`` (changes nothing); other options are refused by name
#[pyclass(name = "Tensor", module = "verjus.rf", frozen, subclass)]
pub(crate) struct PyTensor(RwLock<Content>);

/// What a `Tensor` handle holds; replaced whole when values are assigned.
#[derive(Clone)]
struct Content {
    /// RETURNN's tensor name (None: an op's result, shown as "tensor").
    name: Option<String>,
    /// The values, or None for a template (shared: an op borrows them
    /// without copying the dims).
    value: Option<Arc<RfTensor>>,
    /// A template's dims, dtype, sparse and feature dim (unused while there
    /// are values, which carry their own: see [`Content::meta`]).
    template: Meta,
    /// The dim whose lengths this tensor is (`dim.dyn_size_ext`): assigning
    /// values to it binds the dim's sizes.
    size_of: Option<Dim>,
    /// The values `backward` last ran from without `retain_graph` (a second
    /// run from them is refused; new values are another pointer).
    backward_ran: Option<Weak<RfTensor>>,
}

impl Content {
    /// Dims, dtype, sparse and feature dim: the value's, or the template's.
    fn meta(&self) -> Cow<'_, Meta> {
        match &self.value {
            Some(v) => Cow::Owned(Meta::of(v)),
            None => Cow::Borrowed(&self.template),
        }
    }
}

#[derive(Clone)]
struct Meta {
    dims: Vec<Dim>,
    dtype: RfDType,
    sparse_dim: Option<Dim>,
    feature_dim: Option<Dim>,
}

impl Meta {
    /// No dims: what a tensor with values keeps as its template (no allocation).
    fn of_nothing(dtype: RfDType) -> Meta {
        Meta {
            dims: Vec::new(),
            dtype,
            sparse_dim: None,
            feature_dim: None,
        }
    }

    fn of(t: &RfTensor) -> Meta {
        Meta {
            dims: t.dims().to_vec(),
            dtype: t.dtype(),
            sparse_dim: t.sparse_dim().cloned(),
            feature_dim: t.feature_dim().cloned(),
        }
    }
}

impl From<RfTensor> for PyTensor {
    fn from(t: RfTensor) -> PyTensor {
        PyTensor(RwLock::new(Content {
            name: None,
            template: Meta::of_nothing(t.dtype()),
            value: Some(Arc::new(t)),
            size_of: None,
            backward_ran: None,
        }))
    }
}

impl PyTensor {
    /// A template: dims and dtype without values.
    fn template(name: Option<String>, meta: Meta, size_of: Option<Dim>) -> PyTensor {
        PyTensor(RwLock::new(Content {
            name,
            value: None,
            template: meta,
            size_of,
            backward_ran: None,
        }))
    }

    /// `dim`'s lengths as a handle whose assignment binds them (or a template of them).
    pub(crate) fn size_of(dim: &Dim) -> Option<PyTensor> {
        let t = match dim.lengths() {
            Some(l) => PyTensor::from(l),
            None => {
                let (dims, dtype) = dim.lengths_template()?;
                let meta = Meta {
                    dims,
                    dtype,
                    sparse_dim: None,
                    feature_dim: None,
                };
                PyTensor::template(Some(dim.name().to_owned()), meta, None)
            }
        };
        t.write().size_of = Some(dim.clone());
        Some(t)
    }

    /// The name, ``"tensor"`` for an op's result.
    pub(crate) fn tensor_name(&self) -> String {
        self.read().name.clone().unwrap_or_else(|| "tensor".into())
    }

    fn read(&self) -> RwLockReadGuard<'_, Content> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Content> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value; a template is a ValueError naming it.
    pub(crate) fn value(&self) -> PyResult<RfTensor> {
        self.shared().map(|t| (*t).clone())
    }

    /// The value without a copy of its dims (the operators' path).
    pub(crate) fn shared(&self) -> PyResult<Arc<RfTensor>> {
        let c = self.read();
        c.value.clone().ok_or_else(|| {
            PyValueError::new_err(format!(
                "Tensor {:?} {} is a template without values; assign its raw_tensor first",
                c.name.as_deref().unwrap_or("tensor"),
                fmt_dims(&c.template.dims)
            ))
        })
    }

    /// Makes this tensor the lengths of `dim` (see [`Content::size_of`]),
    /// binding the dim to its values or declaring their dims and dtype.
    pub(crate) fn bind_as_size_of(&self, dim: &Dim) -> PyResult<()> {
        let mut c = self.write();
        match &c.value {
            Some(v) => dim.set_lengths(Some((**v).clone())).map_err(to_py_err)?,
            None => {
                dim.set_lengths(None).map_err(to_py_err)?;
                dim.set_lengths_template(c.template.dims.clone(), c.template.dtype);
            }
        }
        c.size_of = Some(dim.clone());
        Ok(())
    }

    /// A value for this tensor from `raw` (a numpy array or a Tensor), with
    /// its dims, dtype, sparse and feature dim.
    fn value_from(&self, raw: &Bound<'_, PyAny>) -> PyResult<RfTensor> {
        let meta = self.read().meta().into_owned();
        let value = match raw.cast::<PyTensor>() {
            Ok(t) => t.get().value()?.to_host().map_err(to_py_err)?,
            Err(_) => {
                let np = raw.py().import("numpy")?;
                let array = np.call_method1("asarray", (raw, numpy_storage(meta.dtype)))?;
                host_of(&array, meta.dtype)?
            }
        };
        RfTensor::from_tensor(value, meta.dims, Some(meta.dtype), backend()?, false)
            .and_then(|t| t.with_sparse_dim(meta.sparse_dim))
            .and_then(|t| t.with_feature_dim(meta.feature_dim))
            .map_err(to_py_err)
    }

    /// Replaces the values (None: back to a template), binding the dim this
    /// tensor is the lengths of.
    fn set_value(&self, value: Option<RfTensor>) -> PyResult<()> {
        let size_of = self.read().size_of.clone();
        if let Some(dim) = &size_of {
            dim.set_lengths(value.clone()).map_err(to_py_err)?;
        }
        let mut c = self.write();
        if value.is_none() {
            c.template = c.meta().into_owned(); // a template again, of the same dims
        }
        c.value = value.map(Arc::new);
        Ok(())
    }
}

/// The Python module holding RETURNN's further Tensor and Dim API (see
/// [`python_api`]).
static TENSOR_API: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `name` of `obj` from the class `class` of the Python module
/// `verjus.rf.tensor_api`: a property's value, or a method bound to `obj`.
/// This is how RETURNN's long tail of Tensor and Dim methods is written in
/// Python, over the state kept here; unknown names are an AttributeError.
pub(crate) fn python_api<'py>(
    obj: &Bound<'py, PyAny>,
    class: &str,
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let module = TENSOR_API.get_or_try_init(py, || {
        py.import("verjus.rf.tensor_api")
            .map(|m| m.into_any().unbind())
    })?;
    let namespace = module.bind(py).getattr(class)?;
    let dict = namespace.getattr(intern!(py, "__dict__"))?;
    let Some(attr) = dict.get_item(name).ok().filter(|a| !a.is_none()) else {
        return Err(PyAttributeError::new_err(format!(
            "{} has no attribute {name:?}",
            obj.get_type().name()?
        )));
    };
    if attr.hasattr(intern!(py, "fget"))? {
        return attr.getattr(intern!(py, "fget"))?.call1((obj,));
    }
    attr.call_method1(intern!(py, "__get__"), (obj,))
}

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

/// The numpy dtype an array is converted to before it becomes a tensor of
/// `dtype`: bools arrive as float32 0/1, bfloat16 and float16 as float32
/// values that [`host_of`] rounds (numpy has no bfloat16 of its own).
fn numpy_storage(dtype: RfDType) -> &'static str {
    match dtype {
        RfDType::Int32 => "int32",
        RfDType::Int64 => "int64",
        RfDType::Float32 | RfDType::Bool | RfDType::BFloat16 | RfDType::Float16 => "float32",
    }
}

/// `array` (of [`numpy_storage`]'s type) as a host tensor of `dtype`'s storage.
fn host_of(array: &Bound<'_, PyAny>, dtype: RfDType) -> PyResult<Tensor> {
    match dtype {
        RfDType::Int32 => host::<i32>(array),
        RfDType::Int64 => host::<i64>(array),
        RfDType::Float32 | RfDType::Bool => host::<f32>(array),
        RfDType::BFloat16 => rounded(host::<f32>(array)?, half::bf16::from_f32),
        RfDType::Float16 => rounded(host::<f32>(array)?, half::f16::from_f32),
    }
}

/// The float32 host tensor `wide` rounded elementwise by `round`.
fn rounded<T: Element>(wide: Tensor, round: fn(f32) -> T) -> PyResult<Tensor> {
    let values = wide.as_slice::<f32>().map_err(to_py_err)?;
    Tensor::from_vec(wide.dims(), values.iter().map(|&v| round(v)).collect()).map_err(to_py_err)
}

/// A tensor from a numpy array of ``dtype``'s storage type (bool, bfloat16
/// and float16 as float32), as ``verjus.rf.convert_to_tensor`` prepares it.
///
/// :param npt.NDArray[Any] array: the values, any memory layout
/// :param Sequence[Dim] dims: one dim per axis, in order
/// :param str dtype: ``"float32"``, ``"int32"``, ``"int64"``, ``"bool"``,
///     ``"bfloat16"`` or ``"float16"``
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
    let value = host_of(array, dtype)?;
    RfTensor::from_tensor(
        value,
        dims_of(&dims),
        Some(dtype),
        backend()?,
        requires_grad,
    )
    .and_then(|t| t.with_sparse_dim(sparse_dim.map(|d| d.0.clone())))
    .and_then(|t| t.with_feature_dim(feature_dim.map(|d| d.0.clone())))
    .map(PyTensor::from)
    .map_err(to_py_err)
}

#[pymethods]
impl PyTensor {
    #[new]
    #[pyo3(signature = (name, dims = None, dtype = None, *, sparse_dim = None, feature_dim = None, raw_tensor = None, **_kwargs))]
    fn new(
        name: &Bound<'_, PyAny>,
        dims: Option<Vec<PyRef<'_, PyDim>>>,
        dtype: Option<&str>,
        sparse_dim: Option<PyRef<'_, PyDim>>,
        feature_dim: Option<PyRef<'_, PyDim>>,
        raw_tensor: Option<&Bound<'_, PyAny>>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<PyTensor> {
        let mut feature_axis = None;
        if let Some(kwargs) = _kwargs {
            // RETURNN's version tag changes nothing here, `feature_dim_axis` names
            // the feature dim by its axis; any other option (its older `shape=`,
            // `batch_dim_axis=`, ...) is refused by name.
            if let Some(axis) = kwargs.get_item("feature_dim_axis")? {
                feature_axis = Some(axis.extract::<Option<isize>>()?);
            }
            let unknown: Vec<String> = kwargs
                .keys()
                .iter()
                .map(|k| k.to_string())
                .filter(|k| k != "version" && k != "feature_dim_axis")
                .collect();
            if !unknown.is_empty() {
                return Err(PyTypeError::new_err(format!(
                    "Tensor: unsupported options {unknown:?} (give dims=, dtype=, sparse_dim=, \
                     feature_dim=, raw_tensor=)"
                )));
            }
        }
        if let Ok(source) = name.cast::<PyTensor>() {
            return Ok(PyTensor(RwLock::new(source.get().read().clone())));
        }
        let name: String = name.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "Tensor: the first argument must be a name (str) or a Tensor, got {}",
                name.get_type()
            ))
        })?;
        let dims = dims
            .ok_or_else(|| PyTypeError::new_err(format!("Tensor {name:?}: dims must be given")))?;
        let dims = dims_of(&dims);
        let feature_dim = match feature_axis {
            None => feature_dim.map(|d| d.0.clone()),
            Some(None) => None,
            Some(Some(axis)) => {
                let i = if axis < 0 {
                    axis + dims.len() as isize
                } else {
                    axis
                };
                let d = usize::try_from(i).ok().and_then(|i| dims.get(i));
                Some(d.cloned().ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "Tensor {name:?}: feature_dim_axis {axis} is not an axis of {}",
                        fmt_dims(&dims)
                    ))
                })?)
            }
        };
        let meta = Meta {
            dims,
            dtype: RfDType::parse(dtype.unwrap_or("float32")).map_err(to_py_err)?,
            sparse_dim: sparse_dim.map(|d| d.0.clone()),
            feature_dim,
        };
        if meta.sparse_dim.is_some() && !meta.dtype.is_int() {
            return Err(PyValueError::new_err(format!(
                "Tensor {name:?}: sparse_dim needs an integer dtype, got {}",
                meta.dtype
            )));
        }
        if let Some(f) = meta.feature_dim.as_ref().filter(|f| !meta.dims.contains(f)) {
            return Err(PyValueError::new_err(format!(
                "Tensor {name:?}: feature_dim {f} is not one of {}",
                fmt_dims(&meta.dims)
            )));
        }
        let t = PyTensor::template(Some(name), meta, None);
        if let Some(raw) = raw_tensor.filter(|r| !r.is_none()) {
            t.set_value(Some(t.value_from(raw)?))?;
        }
        Ok(t)
    }

    /// RETURNN's further Tensor API (``verjus.rf.tensor_api.TensorApi``):
    /// looked up only when no attribute of the native class has the name.
    fn __getattr__<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", name)
    }

    /// The name (RETURNN's; ``"tensor"`` for an op's result).
    ///
    /// :rtype: str
    #[getter]
    fn name(&self) -> String {
        self.tensor_name()
    }

    #[setter(name)]
    fn set_name(&self, name: String) {
        self.write().name = Some(name);
    }

    /// Backpropagates from this one-element tensor: adds ``d self / d p`` to
    /// the ``grad`` of every leaf ``p`` it depends on (parameters).
    ///
    /// As PyTorch's, it runs once per tensor: a second ``backward()`` from the
    /// same tensor would add the same gradients again (PyTorch has freed the
    /// graph by then), so it is a ``RuntimeError``; ``retain_graph=True``
    /// allows the next run, whose gradients add to the first's. (The tape
    /// keeps the graph: other tensors computed from it are unaffected.)
    ///
    /// :param bool retain_graph: allow another ``backward`` from this tensor
    #[pyo3(signature = (*, retain_graph = false))]
    fn backward(&self, py: Python<'_>, retain_graph: bool) -> PyResult<()> {
        let value = self.shared()?;
        let ran = self.read().backward_ran.as_ref().and_then(Weak::upgrade);
        if ran.is_some_and(|ran| Arc::ptr_eq(&ran, &value)) {
            return Err(PyRuntimeError::new_err(format!(
                "backward: {} already ran backward, and a second run would add the same \
                 gradients to .grad again (PyTorch refuses it too: its graph is freed). For a \
                 new step compute the loss anew (after zero_grad); to backpropagate twice on \
                 purpose, call the first backward(retain_graph=True)",
                self.__repr__()
            )));
        }
        let var = value.var().clone();
        py.detach(move || var.backward()).map_err(to_py_err)?;
        if !retain_graph {
            self.write().backward_ran = Some(Arc::downgrade(&value));
        }
        Ok(())
    }

    /// The gradient accumulated by ``backward`` (leaves only), with this
    /// tensor's dims; None before any.
    ///
    /// :rtype: Tensor | None
    #[getter]
    fn grad(&self) -> PyResult<Option<PyTensor>> {
        let t = self.value()?;
        let Some(g) = t.var().grad() else {
            return Ok(None);
        };
        let be = t.backend().clone();
        let g = verjus::core::autograd::Var::constant(
            verjus::ops::download(&*be, &g).map_err(to_py_err)?,
            be,
        )
        .map_err(to_py_err)?;
        RfTensor::new(g, t.dims().to_vec(), RfDType::Float32)
            .map(|t| Some(PyTensor::from(t)))
            .map_err(to_py_err)
    }

    /// Clears the accumulated gradient.
    fn zero_grad(&self) -> PyResult<()> {
        self.value()?.var().zero_grad();
        Ok(())
    }

    /// Replaces the values of a leaf (a parameter); graphs recorded before
    /// keep the old values.
    ///
    /// :param npt.NDArray[np.float32] array: the new values, the same shape
    fn assign(&self, py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<()> {
        let value = host::<f32>(array)?;
        let var = self.value()?.var().clone();
        py.detach(move || var.set_value(value)).map_err(to_py_err)
    }

    /// The dims, in raw-axis order.
    ///
    /// :rtype: tuple[Dim, ...]
    #[getter]
    fn dims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let c = self.read();
        let dims = c.value.as_ref().map_or(&c.template.dims[..], |v| v.dims());
        PyTuple::new(py, dims.iter().map(|d| PyDim(d.clone())))
    }

    /// The dtype: ``"float32"``, ``"int32"``, ``"int64"`` or ``"bool"``.
    ///
    /// :rtype: str
    #[getter]
    fn dtype(&self) -> &'static str {
        let c = self.read();
        c.value
            .as_ref()
            .map_or(c.template.dtype, |v| v.dtype())
            .name()
    }

    /// The class dim that integer values index, if any.
    ///
    /// :rtype: Dim | None
    #[getter]
    fn sparse_dim(&self) -> Option<PyDim> {
        let c = self.read();
        let dim = match &c.value {
            Some(v) => v.sparse_dim(),
            None => c.template.sparse_dim.as_ref(),
        };
        dim.cloned().map(PyDim)
    }

    #[setter(sparse_dim)]
    fn set_sparse_dim(&self, dim: Option<PyRef<'_, PyDim>>) -> PyResult<()> {
        let dim = dim.map(|d| d.0.clone());
        let mut c = self.write();
        if let Some(v) = &c.value {
            let v = (**v).clone().with_sparse_dim(dim).map_err(to_py_err)?;
            c.value = Some(Arc::new(v));
        } else if dim.is_some() && !c.template.dtype.is_int() {
            return Err(PyValueError::new_err(format!(
                "Tensor: sparse_dim needs an integer tensor, got {}",
                c.template.dtype
            )));
        } else {
            c.template.sparse_dim = dim;
        }
        Ok(())
    }

    /// The feature dim, if set.
    ///
    /// :rtype: Dim | None
    #[getter]
    fn feature_dim(&self) -> Option<PyDim> {
        let c = self.read();
        let dim = match &c.value {
            Some(v) => v.feature_dim(),
            None => c.template.feature_dim.as_ref(),
        };
        dim.cloned().map(PyDim)
    }

    #[setter(feature_dim)]
    fn set_feature_dim(&self, dim: Option<PyRef<'_, PyDim>>) -> PyResult<()> {
        let dim = dim.map(|d| d.0.clone());
        let mut c = self.write();
        let meta = c.meta().into_owned();
        if let Some(d) = dim.as_ref().filter(|d| !meta.dims.contains(d)) {
            return Err(PyValueError::new_err(format!(
                "Tensor: feature_dim {d} is not one of {}",
                fmt_dims(&meta.dims)
            )));
        }
        if let Some(v) = &c.value {
            let v = (**v)
                .clone()
                .with_feature_dim(dim.clone())
                .map_err(to_py_err)?;
            c.value = Some(Arc::new(v));
        }
        c.template.feature_dim = dim;
        Ok(())
    }

    /// The axis of ``feature_dim`` in ``dims`` (None without one); assigning
    /// an axis (negative from the end) or None sets ``feature_dim``, as
    /// RETURNN's ``feature_dim_axis``.
    ///
    /// :rtype: int | None
    #[getter]
    fn feature_dim_axis(&self) -> Option<usize> {
        let dim = self.feature_dim()?;
        self.read().meta().dims.iter().position(|d| *d == dim.0)
    }

    #[setter(feature_dim_axis)]
    fn set_feature_dim_axis(slf: &Bound<'_, Self>, axis: Option<isize>) -> PyResult<()> {
        let this = slf.get();
        let Some(axis) = axis else {
            return this.set_feature_dim(None);
        };
        let dims = this.read().meta().dims.clone();
        let index = if axis < 0 {
            axis + dims.len() as isize
        } else {
            axis
        };
        let dim = usize::try_from(index)
            .ok()
            .and_then(|i| dims.get(i))
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "Tensor: feature_dim_axis {axis} is not an axis of {}",
                    fmt_dims(&dims)
                ))
            })?;
        let dim = Bound::new(slf.py(), PyDim(dim.clone()))?;
        this.set_feature_dim(Some(dim.borrow()))
    }

    /// The raw sizes, in dims order (of a template: each dim's size, None
    /// where it is not known yet).
    ///
    /// :rtype: list[int | None]
    #[getter]
    fn shape(&self) -> Vec<Option<usize>> {
        let c = self.read();
        match &c.value {
            Some(v) => v.sizes().into_iter().map(Some).collect(),
            None => c.template.dims.iter().map(Dim::size_or_seen).collect(),
        }
    }

    /// Whether gradients flow to this tensor. Setting it True makes the tensor
    /// a leaf (its values copied into a new leaf; RETURNN's
    /// ``rf.set_requires_gradient``), so ``rf.gradient`` can differentiate by it.
    ///
    /// :rtype: bool
    #[getter]
    fn requires_grad(&self) -> bool {
        self.read()
            .value
            .as_ref()
            .is_some_and(|v| v.var().requires_grad())
    }

    #[setter(requires_grad)]
    fn set_requires_grad(&self, py: Python<'_>, requires_grad: bool) -> PyResult<()> {
        let t = self.value()?;
        if t.var().requires_grad() == requires_grad {
            return Ok(());
        }
        if t.dtype() != RfDType::Float32 {
            return Err(PyValueError::new_err(format!(
                "Tensor: only float32 tensors can require a gradient, got {}",
                t.dtype()
            )));
        }
        let leaf = py
            .detach(|| {
                let host = t.to_host()?;
                RfTensor::from_tensor(
                    host,
                    t.dims().to_vec(),
                    Some(t.dtype()),
                    t.backend().clone(),
                    requires_grad,
                )
                .and_then(|l| l.with_sparse_dim(t.sparse_dim().cloned()))
                .and_then(|l| l.with_feature_dim(t.feature_dim().cloned()))
            })
            .map_err(to_py_err)?;
        self.set_value(Some(leaf))
    }

    /// Where the values are (``"cpu"``, ``"cuda:0"``); a template's device is
    /// the default device, where its values will be made.
    ///
    /// :rtype: str
    #[getter]
    fn device(&self) -> PyResult<String> {
        Ok(match &self.read().value {
            Some(v) => v.backend().device().to_string(),
            None => backend()?.device().to_string(),
        })
    }

    /// Whether this is a template (no values).
    ///
    /// :rtype: bool
    fn is_template(&self) -> bool {
        self.read().value.is_none()
    }

    /// The values as a numpy array, axes in dims order (a bool tensor as a
    /// bool array).
    ///
    /// :rtype: npt.NDArray[Any]
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.value()?;
        let is_bool = t.dtype() == RfDType::Bool;
        let host = py.detach(move || t.to_host()).map_err(to_py_err)?;
        let array = to_numpy(py, host)?;
        if is_bool {
            return array.call_method1("astype", ("bool",));
        }
        Ok(array)
    }

    /// The values as a numpy array (see ``numpy``), or None for a template.
    /// Assigning an array (or a Tensor) gives the tensor those values, with
    /// its dims and dtype; assigning None makes it a template again. When the
    /// tensor is a dim's ``dyn_size_ext``, that binds the dim's sizes.
    ///
    /// :rtype: npt.NDArray[Any] | None
    #[getter]
    fn raw_tensor<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.read().value.is_none() {
            return Ok(None);
        }
        self.numpy(py).map(Some)
    }

    #[setter(raw_tensor)]
    fn set_raw_tensor(&self, raw: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let value = match raw.filter(|r| !r.is_none()) {
            Some(r) => Some(self.value_from(r)?),
            None => None,
        };
        // A leaf that gradients flow to (a parameter) keeps its identity: the
        // new values go into it, as `assign` does.
        let leaf = self
            .read()
            .value
            .clone()
            .filter(|v| v.var().requires_grad() && v.var().is_leaf());
        if let (Some(leaf), Some(new)) = (&leaf, &value) {
            if leaf.sizes() == new.sizes() && new.dtype() == RfDType::Float32 {
                let host = new.to_host().map_err(to_py_err)?;
                return leaf.var().set_value(host).map_err(to_py_err);
            }
        }
        self.set_value(value)
    }

    /// A template with this tensor's name, dims, dtype, sparse and feature dim.
    ///
    /// :param str | None name: another name
    /// :param str | None dtype: another dtype
    /// :rtype: Tensor
    #[pyo3(signature = (name = None, *, dtype = None))]
    fn copy_template(&self, name: Option<String>, dtype: Option<&str>) -> PyResult<PyTensor> {
        let c = self.read();
        let mut meta = c.meta().into_owned();
        if let Some(dtype) = dtype {
            meta.dtype = RfDType::parse(dtype).map_err(to_py_err)?;
            if !meta.dtype.is_int() {
                meta.sparse_dim = None;
            }
        }
        Ok(PyTensor::template(
            name.or_else(|| c.name.clone()),
            meta,
            None,
        ))
    }

    /// The same values with the axes in the order of ``dims``.
    ///
    /// :param Sequence[Dim] dims: all of this tensor's dims, in the new order
    /// :rtype: Tensor
    fn copy_transpose(&self, py: Python<'_>, dims: Vec<PyRef<'_, PyDim>>) -> PyResult<PyTensor> {
        let (t, dims) = (self.value()?, dims_of(&dims));
        py.detach(move || t.copy_transpose(&dims))
            .map(PyTensor::from)
            .map_err(to_py_err)
    }

    fn __repr__(&self) -> String {
        let c = self.read();
        match (&c.value, &c.name) {
            (Some(v), None) => format!("{v:?}"),
            (Some(v), Some(n)) => format!("Tensor({n:?}, {}, {})", fmt_dims(v.dims()), v.dtype()),
            (None, n) => format!(
                "Tensor({:?}, {}, {}, template)",
                n.as_deref().unwrap_or("tensor"),
                fmt_dims(&c.template.dims),
                c.template.dtype
            ),
        }
    }

    /// The truth value of a one-element tensor, as in numpy and PyTorch. A
    /// tensor of several values has none: `if x > 1:` must not be always true.
    fn __bool__(&self, py: Python<'_>) -> PyResult<bool> {
        let t = self.value()?;
        let count: usize = t.sizes().iter().product();
        if count != 1 {
            return Err(PyValueError::new_err(format!(
                "the truth value of a tensor of {count} values {} is ambiguous; \
                 reduce it first (rf.reduce_max, rf.reduce_min)",
                fmt_dims(t.dims())
            )));
        }
        let host = py.detach(move || t.to_host()).map_err(to_py_err)?;
        let truth = match host.dtype() {
            DType::I32 => host.as_slice::<i32>().map(|v| v[0] != 0),
            DType::I64 => host.as_slice::<i64>().map(|v| v[0] != 0),
            _ => host.as_slice::<f32>().map(|v| v[0] != 0.0),
        };
        truth.map_err(to_py_err)
    }

    fn __add__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &*self.shared()?, BinaryOp::Add, other, false)
    }

    fn __radd__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &*self.shared()?, BinaryOp::Add, other, true)
    }

    fn __sub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &*self.shared()?, BinaryOp::Sub, other, false)
    }

    fn __rsub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &*self.shared()?, BinaryOp::Sub, other, true)
    }

    fn __mul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &*self.shared()?, BinaryOp::Mul, other, false)
    }

    fn __rmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &*self.shared()?, BinaryOp::Mul, other, true)
    }

    fn __truediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &*self.shared()?, BinaryOp::Div, other, false)
    }

    fn __rtruediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        binary(py, &*self.shared()?, BinaryOp::Div, other, true)
    }

    fn __pow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        _modulo: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        binary(py, &*self.shared()?, BinaryOp::Pow, other, false)
    }

    fn __rpow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        _modulo: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        binary(py, &*self.shared()?, BinaryOp::Pow, other, true)
    }

    fn __neg__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = self.value()?;
        py.detach(move || verjus::rf::activation(&t, UnaryOp::Neg))
            .map(PyTensor::from)
            .map_err(to_py_err)
    }

    fn __or__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__or__")?.call1((other,))
    }

    fn __ror__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__ror__")?.call1((other,))
    }

    fn __and__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__and__")?.call1((other,))
    }

    fn __rand__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__rand__")?.call1((other,))
    }

    fn __invert__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__invert__")?.call0()
    }

    fn __mod__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__mod__")?.call1((other,))
    }

    fn __rmod__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__rmod__")?.call1((other,))
    }

    fn __floordiv__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__floordiv__")?.call1((other,))
    }

    fn __rfloordiv__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__rfloordiv__")?.call1((other,))
    }

    fn __abs__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__abs__")?.call0()
    }

    fn __float__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__float__")?.call0()
    }

    fn __int__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        python_api(slf.as_any(), "TensorApi", "__int__")?.call0()
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
        binary(py, &*self.shared()?, op, other, false)
    }
}
