//! Python's operators on `Tensor` (`+ - * / **`, comparisons): the other
//! operand is a `Tensor` (combined by dims) or a number (a scalar op);
//! anything else gives `NotImplemented`, so Python tries the other side.
//! The operands are borrowed, not cloned, for the op (these are the most
//! frequent calls).

use super::{compute, PyTensor};
use crate::error::to_py_err;
use pyo3::prelude::*;
use verjus::ops::BinaryOp;
use verjus::rf::{combine, combine_scalar, RfTensor};

/// `a op other`, or `other op a` when `reversed`.
pub(crate) fn binary(
    py: Python<'_>,
    a: &RfTensor,
    op: BinaryOp,
    other: &Bound<'_, PyAny>,
    reversed: bool,
) -> PyResult<Py<PyAny>> {
    let result = if let Ok(b) = other.cast::<PyTensor>() {
        let b = &*b.get().shared()?;
        compute(py, &[a, b], || {
            if reversed {
                combine(b, op, a, false)
            } else {
                combine(a, op, b, false)
            }
        })
    } else if let Ok(s) = other.extract::<f64>() {
        compute(py, &[a], || combine_scalar(a, op, s, reversed))
    } else {
        return Ok(py.NotImplemented());
    };
    let t = result.map_err(to_py_err)?;
    Ok(Py::new(py, PyTensor::from(t))?.into_any())
}
