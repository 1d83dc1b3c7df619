//! numpy arrays in, verjus tensors out, with as few copies as possible.
//!
//! Inputs: a C-contiguous, aligned, native-endian array of the wanted element
//! type is read in place through [`Tensor::view`] (no copy): the
//! [`PyReadonlyArrayDyn`] is kept for as long as the view is used, which keeps
//! the array alive and marks it shared for Rust-side borrows. Other arrays of
//! the right kind (float64 or float16 for f32 inputs, any integer type for
//! labels, non-contiguous or byte-swapped ones, lists) are converted once by
//! numpy. Anything else is a `TypeError` that names the argument and its dtype.
//!
//! While the GIL is released, another Python thread could still write to an
//! input array in place; the network copies its inputs into its own buffers
//! first thing, so such a race can only change the values that call sees, as
//! with any numpy function that releases the GIL.
//!
//! Outputs: a host tensor's `Vec` becomes the numpy array's buffer (no copy).

use crate::error::to_py_err;
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{
    Element as NpElement, IntoPyArray, PyArrayDescrMethods, PyReadonlyArrayDyn, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use verjus::core::{Element, HostData, HostView, Storage};
use verjus::Tensor;

/// An array read in place (see the module docs).
pub(crate) struct Borrowed<'py, T: Element + NpElement> {
    array: PyReadonlyArrayDyn<'py, T>,
}

impl<'py, T: Element + NpElement> Borrowed<'py, T> {
    /// A read-only tensor over the array's memory.
    pub(crate) fn view(&self) -> PyResult<HostView<'_>> {
        let data = self.array.as_slice().map_err(|e| {
            PyRuntimeError::new_err(format!("array is not contiguous after conversion: {e}"))
        })?;
        Tensor::view(self.array.shape(), data).map_err(to_py_err)
    }

    /// An owned copy of the elements.
    pub(crate) fn to_tensor(&self) -> PyResult<Tensor> {
        self.view()?.try_clone_host().map_err(to_py_err)
    }
}

/// Targets: class labels (any integer type, read as int64) or float values
/// (read as float32).
pub(crate) enum Targets<'py> {
    Labels(Borrowed<'py, i64>),
    Values(Borrowed<'py, f32>),
}

impl Targets<'_> {
    /// A read-only tensor over the targets' memory.
    pub(crate) fn view(&self) -> PyResult<HostView<'_>> {
        match self {
            Targets::Labels(b) => b.view(),
            Targets::Values(b) => b.view(),
        }
    }
}

/// `obj` as a numpy array (`numpy.asarray` for anything that is not one yet).
fn as_array<'py>(what: &str, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyUntypedArray>> {
    if let Ok(array) = obj.cast::<PyUntypedArray>() {
        return Ok(array.clone());
    }
    let converted = numpy_module(obj.py())?
        .call_method1("asarray", (obj,))
        .map_err(|e| {
            PyTypeError::new_err(format!(
                "{what} must be a numpy array or array-like, got {} ({e})",
                obj.get_type()
            ))
        })?;
    converted
        .cast_into::<PyUntypedArray>()
        .map_err(|e| PyTypeError::new_err(format!("{what}: numpy.asarray gave {e}")))
}

fn numpy_module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("numpy")
}

/// `array` read in place when it already is a contiguous array of `T`, else
/// converted by `numpy.require(array, dtype_name, "CA")` (C order, aligned).
fn borrow_or_convert<'py, T: Element + NpElement>(
    what: &str,
    array: &Bound<'py, PyUntypedArray>,
    dtype_name: &str,
) -> PyResult<Borrowed<'py, T>> {
    // `as_slice` also accepts Fortran order, whose elements are not row-major.
    if array.is_c_contiguous() {
        if let Ok(ro) = array.extract::<PyReadonlyArrayDyn<'py, T>>() {
            if ro.as_slice().is_ok() {
                return Ok(Borrowed { array: ro });
            }
        }
    }
    let py = array.py();
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("dtype", dtype_name)?;
    // Aligned too ("A"): `ascontiguousarray` keeps a misaligned buffer (a view at
    // an odd byte offset), which cannot be read as a slice of `T`.
    kwargs.set_item("requirements", "CA")?;
    let converted = numpy_module(py)?.call_method("require", (array,), Some(&kwargs))?;
    let ro = converted
        .extract::<PyReadonlyArrayDyn<'py, T>>()
        .map_err(|e| {
            PyRuntimeError::new_err(format!("{what}: converting to {dtype_name} failed: {e}"))
        })?;
    Ok(Borrowed { array: ro })
}

/// A float array (float32 in place; other floats converted); `what` names it in errors.
pub(crate) fn floats<'py>(what: &str, obj: &Bound<'py, PyAny>) -> PyResult<Borrowed<'py, f32>> {
    let array = as_array(what, obj)?;
    let dtype = array.dtype();
    if dtype.kind() != b'f' {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a float array (float32, or float64/float16 to convert), got an array of {dtype}"
        )));
    }
    borrow_or_convert(what, &array, "float32")
}

/// An integer array read as int32 (token ids, lengths); `what` names it in
/// errors. Values that do not fit int32 are a `ValueError` (the cast would
/// wrap them into other ids).
pub(crate) fn ids<'py>(what: &str, obj: &Bound<'py, PyAny>) -> PyResult<Borrowed<'py, i32>> {
    let array = as_array(what, obj)?;
    let dtype = array.dtype();
    if !matches!(dtype.kind(), b'i' | b'u') {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an integer array, got an array of {dtype}"
        )));
    }
    let wide = dtype.itemsize() > 4 || (dtype.kind() == b'u' && dtype.itemsize() == 4);
    if wide && array.len() > 0 {
        let (low, high): (i128, i128) = (
            array.call_method0("min")?.extract()?,
            array.call_method0("max")?.extract()?,
        );
        let bad = if low < i128::from(i32::MIN) {
            low
        } else {
            high
        };
        if low < i128::from(i32::MIN) || high > i128::from(i32::MAX) {
            return Err(PyValueError::new_err(format!(
                "{what}: value {bad} does not fit int32"
            )));
        }
    }
    borrow_or_convert(what, &array, "int32")
}

/// Targets: an integer array (class labels, as int64) or a float array (values,
/// as float32); `what` names it in errors.
pub(crate) fn targets<'py>(what: &str, obj: &Bound<'py, PyAny>) -> PyResult<Targets<'py>> {
    let array = as_array(what, obj)?;
    let dtype = array.dtype();
    match dtype.kind() {
        b'i' | b'u' => {
            if dtype.kind() == b'u' && dtype.itemsize() == 8 {
                refuse_above_i64(what, &array)?;
            }
            Ok(Targets::Labels(borrow_or_convert(what, &array, "int64")?))
        }
        b'f' => Ok(Targets::Values(borrow_or_convert(what, &array, "float32")?)),
        _ => Err(PyTypeError::new_err(format!(
            "{what} must be integer class labels or float targets, got an array of {dtype}"
        ))),
    }
}

/// Refuses a uint64 array holding a value above `i64::MAX`, which the cast to
/// int64 would wrap into a negative label.
fn refuse_above_i64(what: &str, array: &Bound<'_, PyUntypedArray>) -> PyResult<()> {
    if array.len() == 0 {
        return Ok(());
    }
    let max: u64 = array.call_method0("max")?.extract()?;
    if i64::try_from(max).is_err() {
        return Err(PyValueError::new_err(format!(
            "{what}: label {max} does not fit int64"
        )));
    }
    Ok(())
}

/// A numpy array that takes over the elements of the host tensor `t` (a
/// device tensor must be downloaded first). float16 is numpy's own; bfloat16
/// is `ml_dtypes.bfloat16` where that package is installed, and float32
/// values (exactly the bfloat16 ones) otherwise.
pub(crate) fn to_numpy(py: Python<'_>, mut t: Tensor) -> PyResult<Bound<'_, PyAny>> {
    let dims = IxDyn(t.dims());
    let layout = |e: numpy::ndarray::ShapeError| {
        PyRuntimeError::new_err(format!("result has a bad layout: {e}"))
    };
    let empty = Storage::Host(HostData::F32(Vec::new()));
    Ok(match std::mem::replace(t.storage_mut(), empty) {
        Storage::Host(HostData::F32(v)) => ArrayD::from_shape_vec(dims, v)
            .map_err(layout)?
            .into_pyarray(py)
            .into_any(),
        Storage::Host(HostData::I64(v)) => ArrayD::from_shape_vec(dims, v)
            .map_err(layout)?
            .into_pyarray(py)
            .into_any(),
        Storage::Host(HostData::I32(v)) => ArrayD::from_shape_vec(dims, v)
            .map_err(layout)?
            .into_pyarray(py)
            .into_any(),
        Storage::Host(HostData::F16(v)) => ArrayD::from_shape_vec(dims, v)
            .map_err(layout)?
            .into_pyarray(py)
            .into_any(),
        Storage::Host(HostData::BF16(v)) if py.import("ml_dtypes").is_ok() => {
            ArrayD::from_shape_vec(dims, v)
                .map_err(layout)?
                .into_pyarray(py)
                .into_any()
        }
        Storage::Host(HostData::BF16(v)) => {
            let wide: Vec<f32> = v.iter().map(|x| x.to_f32()).collect();
            ArrayD::from_shape_vec(dims, wide)
                .map_err(layout)?
                .into_pyarray(py)
                .into_any()
        }
        Storage::Borrowed(_) | Storage::Alias(_) | Storage::Device(_) => {
            return Err(PyRuntimeError::new_err(
                "internal: a result to return to Python is not owned host memory",
            ))
        }
    })
}
