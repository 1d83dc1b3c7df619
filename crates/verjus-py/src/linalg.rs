//! Matrix products on numpy arrays.

use crate::error::to_py_err;
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{IntoPyArray, PyArrayDyn, PyReadonlyArrayDyn, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use verjus::ops::{self, GemmPlan, GemmSpec};
use verjus::{DType, Device, Result, Tensor};

/// ``a @ b`` for float32 arrays on the CPU (the GIL is released while
/// computing).
///
/// Matrices are the last two axes; leading axes are a batch, equal in both
/// operands or absent in one. Raises ``ValueError`` naming both shapes when
/// they do not fit, and ``TypeError`` for anything but float32 numpy arrays.
///
/// :param npt.NDArray[np.float32] a: the left operand, rank >= 2
/// :param npt.NDArray[np.float32] b: the right operand, rank >= 2
/// :rtype: npt.NDArray[np.float32]
#[pyfunction]
pub(crate) fn gemm<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let a = to_tensor("gemm", "a", a)?;
    let b = to_tensor("gemm", "b", b)?;
    let c = py.detach(move || matmul(&a, &b)).map_err(to_py_err)?;
    let data = c.to_vec::<f32>().map_err(to_py_err)?;
    let array = ArrayD::from_shape_vec(IxDyn(c.dims()), data)
        .map_err(|e| PyRuntimeError::new_err(format!("gemm: result has a bad layout: {e}")))?;
    Ok(array.into_pyarray(py))
}

/// `a @ b` on the CPU backend, into a fresh tensor.
fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let be = verjus::backend(Device::Cpu)?;
    let spec = GemmSpec::default();
    let shape = GemmPlan::new(a.shape(), b.shape(), spec)?.output_shape(a.shape(), b.shape())?;
    let mut c = ops::zeros(&*be, &shape, DType::F32)?;
    ops::gemm(&*be, a, b, &mut c, spec)?;
    Ok(c)
}

/// A host tensor with a copy of the elements of the float32 array `obj` (in
/// row-major order, whatever the array's strides); `op` and `arg` name it in errors.
fn to_tensor(op: &str, arg: &str, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let array: PyReadonlyArrayDyn<'_, f32> = obj.extract().map_err(|_| {
        let got = match obj.cast::<PyUntypedArray>() {
            Ok(array) => format!("an array of {}", array.dtype()),
            Err(_) => format!("{}", obj.get_type()),
        };
        PyTypeError::new_err(format!(
            "{op}: {arg} must be a float32 numpy array, got {got}"
        ))
    })?;
    let view = array.as_array();
    // `as_slice` is `Some` only for row-major contiguous data.
    let data = match view.as_slice() {
        Some(row_major) => row_major.to_vec(),
        None => view.iter().copied().collect(),
    };
    Tensor::from_vec(array.shape(), data).map_err(to_py_err)
}
