//! `verjus.autocast`'s native scope: matrix products in bfloat16 or float16
//! on the entering thread (`verjus_core::autograd::autocast` says what runs
//! in which precision).

use crate::error::to_py_err;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use verjus::core::autograd::{autocast, AutocastGuard};
use verjus::DType;

/// A scope of autocast, entered by ``enter`` and left by ``exit`` on the same
/// thread (``verjus.autocast``'s ``with`` block).
///
/// :param str | None dtype: ``"bfloat16"`` or ``"float16"`` (``None``: float32)
#[pyclass(unsendable, module = "verjus._verjus")]
pub struct AutocastScope {
    dtype: Option<DType>,
    guard: Option<AutocastGuard>,
}

#[pymethods]
impl AutocastScope {
    /// A scope not yet entered; the dtype is checked here.
    #[new]
    #[pyo3(signature = (dtype))]
    fn new(dtype: Option<&str>) -> PyResult<Self> {
        // Checked now, not at `enter`: a wrong dtype is the caller's mistake.
        let dtype = dtype
            .map(|name| name.parse::<DType>()?.mixed_precision("autocast"))
            .transpose()
            .map_err(to_py_err)?;
        Ok(AutocastScope { dtype, guard: None })
    }

    /// Enters the scope (once).
    fn enter(&mut self) -> PyResult<()> {
        if self.guard.is_some() {
            return Err(PyRuntimeError::new_err(
                "autocast: the scope is entered already",
            ));
        }
        self.guard = Some(autocast(self.dtype).map_err(to_py_err)?);
        Ok(())
    }

    /// Leaves the scope (nothing if it was not entered): the previous
    /// setting returns.
    fn exit(&mut self) {
        self.guard = None;
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AutocastScope>()
}
