//! Process and thread state of the RF frontend that Python scopes save and
//! restore: the random stream's position (RETURNN's `get_random_state` /
//! `set_random_state`) and the tape's grad mode (RETURNN's
//! `stop_gradient_scope`, a `torch.no_grad()` block).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use verjus::core::autograd::{no_grad, GradModeGuard};
use verjus::rf;

/// The RF random stream's state ``(seed, offset)``; reading it draws nothing.
///
/// :return: the seed and the stream's offset in it
/// :rtype: tuple[int, int]
#[pyfunction]
pub(super) fn rf_random_state() -> (u64, u64) {
    rf::random_state()
}

/// Continues the RF random stream from a state ``rf_random_state`` returned:
/// the draws that followed it come again.
///
/// :param int seed: the seed
/// :param int offset: the offset in the seed's stream
#[pyfunction]
pub(super) fn rf_restore_random_state(seed: u64, offset: u64) {
    rf::restore_random_state(seed, offset);
}

/// A scope of the tape's no-grad mode, entered by ``enter`` and left by
/// ``exit`` on the same thread: ops in it record nothing for backward, and
/// their results carry no gradient (``rf.stop_gradient_scope``'s ``with``
/// block).
#[pyclass(unsendable, module = "verjus._verjus")]
pub struct NoGradScope {
    guard: Option<GradModeGuard>,
}

#[pymethods]
impl NoGradScope {
    /// A scope not yet entered.
    #[new]
    fn new() -> Self {
        NoGradScope { guard: None }
    }

    /// Enters the scope (once).
    fn enter(&mut self) -> PyResult<()> {
        if self.guard.is_some() {
            return Err(PyRuntimeError::new_err(
                "stop_gradient_scope: the scope is entered already",
            ));
        }
        self.guard = Some(no_grad());
        Ok(())
    }

    /// Leaves the scope (nothing if it was not entered): the previous mode
    /// returns.
    fn exit(&mut self) {
        self.guard = None;
    }
}
