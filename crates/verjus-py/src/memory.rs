//! Memory counters and gradient checkpoint scopes for Python.
//!
//! Memory-saving features are shown by measurement: ``host_memory_stats``
//! gives the bytes that host tensors own (now and the high-water mark),
//! the counterpart of ``cuda_memory_stats`` for the CPU; ``tape_saved_stats``
//! the bytes the tape keeps for backward (any device). The checkpoint
//! scope is the tape's (``verjus_core::autograd::checkpoint_scope``), entered
//! and left by ``rf.gradient_checkpoint_scope``'s ``with`` block.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use verjus::core::autograd::{checkpoint_scope, CheckpointScope};

/// The bytes owned by host (CPU) tensors.
///
/// :return: ``(current, peak)``: held now, and the most since the last reset
/// :rtype: tuple[int, int]
#[pyfunction]
fn host_memory_stats() -> (usize, usize) {
    let s = verjus::core::host_memory_stats();
    (s.current, s.peak)
}

/// Starts a new high-water mark of the host bytes at the current use.
#[pyfunction]
fn reset_host_peak_memory() {
    verjus::core::reset_host_peak();
}

/// The bytes the autograd tape keeps for backward (distinct saved tensors of
/// live graphs, parameters not counted; all devices).
///
/// :return: ``(current, peak)``: held now, and the most since the last reset
/// :rtype: tuple[int, int]
#[pyfunction]
fn tape_saved_stats() -> (usize, usize) {
    let s = verjus::core::autograd::tape_saved_stats();
    (s.current, s.peak)
}

/// Starts a new high-water mark of the tape's saved bytes at the current ones.
#[pyfunction]
fn reset_tape_saved_peak() {
    verjus::core::autograd::reset_tape_saved_peak();
}

/// A gradient checkpoint scope of the tape, entered by ``enter`` and left by
/// ``exit`` on the same thread: values made by ops in it are recomputed in
/// backward (same random numbers) instead of kept.
#[pyclass(unsendable, module = "verjus._verjus")]
pub struct CheckpointScopeGuard {
    scope: Option<CheckpointScope>,
}

#[pymethods]
impl CheckpointScopeGuard {
    /// A scope not yet entered.
    #[new]
    fn new() -> Self {
        CheckpointScopeGuard { scope: None }
    }

    /// Enters the scope (once).
    fn enter(&mut self) -> PyResult<()> {
        if self.scope.is_some() {
            return Err(PyRuntimeError::new_err(
                "gradient_checkpoint_scope: the scope is entered already",
            ));
        }
        self.scope = Some(checkpoint_scope());
        Ok(())
    }

    /// Leaves the scope (nothing if it was not entered).
    fn exit(&mut self) {
        self.scope = None;
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(host_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(reset_host_peak_memory, m)?)?;
    m.add_function(wrap_pyfunction!(tape_saved_stats, m)?)?;
    m.add_function(wrap_pyfunction!(reset_tape_saved_peak, m)?)?;
    m.add_class::<CheckpointScopeGuard>()?;
    Ok(())
}
