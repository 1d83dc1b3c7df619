//! Python's operators on `Tensor` (`+ - * / **`, comparisons): the other
//! operand is a `Tensor` (combined by dims) or a number (a scalar op; a
//! Python float makes an integer tensor's result float32, as in RETURNN);
//! anything else gives `NotImplemented`, so Python tries the other side.
//! The operands are borrowed, not cloned, for the op (these are the most
//! frequent calls).

use super::{compute, PyTensor};
use crate::error::to_py_err;
use pyo3::prelude::*;
use pyo3::types::PyFloat;
use verjus::ops::BinaryOp;
use verjus::rf::{combine, combine_float_scalar, combine_scalar, RfTensor};

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
        let float = other.is_instance_of::<PyFloat>();
        compute(py, &[a], || number_op(a, op, s, float, reversed))
    } else {
        return Ok(py.NotImplemented());
    };
    let t = result.map_err(to_py_err)?;
    Ok(Py::new(py, PyTensor::from(t))?.into_any())
}

/// `t op s` (`s op t` when `scalar_first`) for a number `s`, a Python float
/// when `float` (which makes an integer tensor's result float32).
pub(crate) fn number_op(
    t: &RfTensor,
    op: BinaryOp,
    s: f64,
    float: bool,
    scalar_first: bool,
) -> verjus::Result<RfTensor> {
    if float {
        combine_float_scalar(t, op, s, scalar_first)
    } else {
        combine_scalar(t, op, s, scalar_first)
    }
}
