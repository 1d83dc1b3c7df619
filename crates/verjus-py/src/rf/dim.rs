//! `Dim`: a handle to a [`verjus::rf::Dim`]; equal and hashed by identity.

use super::PyTensor;
use crate::error::to_py_err;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
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
/// A dim that is not static takes its sizes when they are known, and anew
/// for every batch, as in RETURNN: ``Dim(Tensor("time", [batch_dim],
/// "int32"))`` (a template) or ``Dim(None)``, then ``dim.dyn_size_ext =
/// lengths`` or ``dim.dyn_size_ext.raw_tensor = array``; ops given such a
/// dim as ``out_dim`` fill it in. RETURNN's further Dim methods
/// (``get_dim_value``, ``is_batch_dim``, ...) are in
/// ``verjus.rf.tensor_api.DimApi``.
///
/// :param int | Tensor | None dimension: the static size, the per-sequence
///   lengths (or their template), or None
/// :param str | None name: the name, for messages (default: the lengths'
///   name, else ``"unnamed"``)
/// :param str | None description: RETURNN's older name for ``name``
/// :param Tensor | None dyn_size_ext: the lengths, instead of ``dimension``
/// :param Any vocab: the vocabulary of a class dim (kept as ``dim.vocab``)
/// :param str | None kind: RETURNN's ``Dim.Types`` kind (``Dim.Types.Feature``,
///   ...); accepted and not used: verjus tells a feature dim by the tensor's
///   ``feature_dim``
#[pyclass(name = "Dim", module = "verjus.rf", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct PyDim(pub(crate) Dim);

/// RETURNN's kinds of dims, as ``Dim.Types``: names that ``Dim(..., kind=)``
/// accepts.
#[pyclass(name = "DimTypes", module = "verjus.rf", frozen)]
pub(crate) struct DimTypes;

#[pymethods]
#[allow(non_upper_case_globals)] // RETURNN's names
impl DimTypes {
    #[classattr]
    const Unspecified: &'static str = "unspecified";
    #[classattr]
    const Batch: &'static str = "batch";
    #[classattr]
    const Spatial: &'static str = "spatial";
    #[classattr]
    const Time: &'static str = "spatial";
    #[classattr]
    const Feature: &'static str = "feature";
}

impl DimTypes {
    /// `kind` is one of the kinds, else a ValueError naming them.
    fn check(kind: &str) -> PyResult<()> {
        match kind {
            "unspecified" | "batch" | "spatial" | "feature" => Ok(()),
            other => Err(PyValueError::new_err(format!(
                "Dim: kind must be one of Dim.Types (Unspecified, Batch, Spatial, Time, Feature), got {other:?}"
            ))),
        }
    }
}

#[pymethods]
impl PyDim {
    #[new]
    #[pyo3(signature = (dimension = None, *, name = None, description = None, dyn_size_ext = None, vocab = None, kind = None))]
    fn new(
        dimension: Option<&Bound<'_, PyAny>>,
        name: Option<&str>,
        description: Option<&str>,
        dyn_size_ext: Option<&Bound<'_, PyAny>>,
        vocab: Option<Py<PyAny>>,
        kind: Option<&str>,
    ) -> PyResult<PyDim> {
        if let Some(kind) = kind {
            DimTypes::check(kind)?;
        }
        let dim = PyDim::make(dimension.or(dyn_size_ext), name.or(description))?;
        if vocab.is_some() {
            dim.set_vocab(vocab);
        }
        Ok(dim)
    }

    /// RETURNN's kinds of dims (``Dim.Types.Feature``, ``Spatial``, ``Time``,
    /// ``Batch``, ``Unspecified``), for ``Dim(..., kind=)``.
    #[classattr]
    #[pyo3(name = "Types")]
    fn types(py: Python<'_>) -> Py<pyo3::types::PyType> {
        py.get_type::<DimTypes>().unbind()
    }

    /// The vocabulary of a class dim (RETURNN's ``Dim(..., vocab=)``), kept
    /// with the dim; None if none was given.
    ///
    /// :rtype: Any
    #[getter]
    fn vocab(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        vocabularies().get(&self.0.id()).map(|v| v.clone_ref(py))
    }

    #[setter(vocab)]
    fn set_vocab(&self, vocab: Option<Py<PyAny>>) {
        let mut all = vocabularies();
        match vocab {
            Some(v) => all.insert(self.0.id(), v),
            None => all.remove(&self.0.id()),
        };
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

    /// The axis size of tensors with this dim now: the static size, the
    /// longest sequence, or for a dim of unknown size its size in the last
    /// tensor made from data over it (the batch's); None before any.
    ///
    /// :rtype: int | None
    #[getter]
    fn axis_size(&self) -> Option<usize> {
        self.0.size_or_seen()
    }

    /// The per-sequence lengths of a dynamic dim (RETURNN's name), or their
    /// template while the dim has none; None for a static dim. Assigning a
    /// Tensor binds the dim to its values (a template declares their dims and
    /// dtype), as does assigning values to the returned tensor's
    /// ``raw_tensor``; a scalar gives every entry that size (the batch of one
    /// step); None makes the dim unknown again.
    ///
    /// :rtype: Tensor | None
    #[getter]
    fn dyn_size_ext(&self) -> Option<PyTensor> {
        PyTensor::size_of(&self.0)
    }

    #[setter(dyn_size_ext)]
    fn set_dyn_size_ext(&self, lengths: Option<PyRef<'_, PyTensor>>) -> PyResult<()> {
        match lengths {
            Some(t) => t.bind_as_size_of(&self.0),
            None => self.0.set_lengths(None).map_err(to_py_err),
        }
    }

    /// RETURNN's further Dim API (``verjus.rf.tensor_api.DimApi``): looked
    /// up only when no attribute of the native class has the name.
    fn __getattr__<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        super::tensor::python_api(slf.as_any(), "DimApi", name)
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
    fn __mul__(&self, other: DimOperand<'_>) -> PyResult<PyDim> {
        self.mul(other, false)
    }

    /// ``n * self`` (``n >= 1``): the size of ``self * n``, another dim.
    fn __rmul__(&self, other: DimOperand<'_>) -> PyResult<PyDim> {
        self.mul(other, true)
    }

    /// ``self // n``: each entry's length divided by ``n``, rounded down;
    /// ``(dim * n) // n`` is ``dim``.
    fn __floordiv__(&self, n: i64) -> PyResult<PyDim> {
        dim_result(self.0.floordiv(n))
    }

    /// ``self / n``: the size must be a multiple of ``n`` (``div_right``).
    fn __truediv__(&self, n: DimOperand<'_>) -> PyResult<PyDim> {
        self.div_right(n)
    }

    /// ``self / n``, the size a multiple of ``n`` (e.g. the half of a feature dim).
    ///
    /// :param int | Dim n: the divisor, >= 1 (or a static dim of that size)
    /// :rtype: Dim
    fn div_left(&self, n: DimOperand<'_>) -> PyResult<PyDim> {
        dim_result(self.0.div(n.factor("div_left")?, true))
    }

    /// ``self / n``, the size a multiple of ``n``.
    ///
    /// :param int | Dim n: the divisor, >= 1 (or a static dim of that size)
    /// :rtype: Dim
    fn div_right(&self, n: DimOperand<'_>) -> PyResult<PyDim> {
        dim_result(self.0.div(n.factor("div_right")?, false))
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
    /// A dim from RETURNN's ``dimension`` argument (see the class docs).
    fn make(dimension: Option<&Bound<'_, PyAny>>, name: Option<&str>) -> PyResult<PyDim> {
        let Some(dimension) = dimension.filter(|d| !d.is_none()) else {
            return Ok(PyDim(Dim::new_unknown(name.unwrap_or("unnamed"))));
        };
        if let Ok(t) = dimension.cast::<PyTensor>() {
            let t = t.get();
            let dim = Dim::new_unknown(name.unwrap_or(&t.tensor_name()));
            t.bind_as_size_of(&dim)?;
            return Ok(PyDim(dim));
        }
        let name = name.unwrap_or("unnamed");
        match dimension.extract::<usize>() {
            Ok(n) => Ok(PyDim(Dim::new_static(n, name))),
            Err(_) if dimension.extract::<i64>().is_ok() => Err(PyValueError::new_err(format!(
                "Dim: the size must be >= 0, got {dimension}"
            ))),
            Err(_) => Err(PyTypeError::new_err(format!(
                "Dim: dimension must be an int >= 0, an int Tensor of lengths or None, got {}",
                dimension.get_type()
            ))),
        }
    }

    /// ``self + other``, or ``other + self`` when ``left``.
    fn add(&self, other: DimOperand<'_>, left: bool) -> PyResult<PyDim> {
        dim_result(match other {
            DimOperand::Dim(d) => self.0.add_dim(&d.0, left),
            DimOperand::Int(n) => self.0.add(n, left),
        })
    }

    fn mul(&self, other: DimOperand<'_>, left: bool) -> PyResult<PyDim> {
        dim_result(match other {
            DimOperand::Dim(d) => self.0.mul_dim(&d.0, left),
            DimOperand::Int(n) => self.0.mul(n, left),
        })
    }
}

impl DimOperand<'_> {
    /// The number an int or a static dim stands for as a divisor (RETURNN's
    /// ``dim.div_left(heads_dim)``).
    fn factor(&self, op: &str) -> PyResult<i64> {
        match self {
            DimOperand::Int(n) => Ok(*n),
            DimOperand::Dim(d) => d.0.static_size().map(|n| n as i64).ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "Dim.{op}: the divisor must be an int or a static dim, got {:?}",
                    d.0
                ))
            }),
        }
    }
}

fn dim_result(r: verjus::Result<Dim>) -> PyResult<PyDim> {
    r.map(PyDim).map_err(to_py_err)
}

/// The vocabularies given to dims (``Dim(..., vocab=)``), by dim id: a dim
/// handle is made anew for each access, so what RETURNN keeps on the dim
/// object is kept here (for the process's life; class dims are few).
fn vocabularies() -> MutexGuard<'static, BTreeMap<u64, Py<PyAny>>> {
    static VOCABULARIES: Mutex<BTreeMap<u64, Py<PyAny>>> = Mutex::new(BTreeMap::new());
    VOCABULARIES.lock().unwrap_or_else(PoisonError::into_inner)
}
