//! Checking optimizer and schedule settings when the Python object is made.
//!
//! `verjus.optim.Adam(lr=-1)` should fail where it is written, as in PyTorch,
//! not later when a `Trainer` or an RF optimizer is made from it. The
//! `verjus.optim` classes pass their JSON here from their constructors; the
//! checks are the core's own ([`SolverConfig::validate`],
//! [`LrSchedule::validate`]), so the messages name the field as they do
//! everywhere else.

use crate::error::{json_err, to_py_err};
use pyo3::prelude::*;
use verjus::core::optim::{LrSchedule, SolverConfig};

/// Checks a solver configuration (rule, schedule, clipping) as a ``Trainer``
/// would; a bad setting is a ``ValueError`` naming the field.
///
/// :param str solver_json: a ``SolverConfig``, as the ``verjus.optim`` classes
///   write it
#[pyfunction]
pub(crate) fn check_solver_config(solver_json: &str) -> PyResult<()> {
    let config: SolverConfig =
        serde_json::from_str(solver_json).map_err(|e| json_err("solver_json", e))?;
    config.validate().map_err(to_py_err)
}

/// Checks a learning-rate schedule; a bad setting is a ``ValueError`` naming
/// the field.
///
/// :param str schedule_json: an ``LrSchedule``, as the ``verjus.optim``
///   schedules write it
#[pyfunction]
pub(crate) fn check_schedule(schedule_json: &str) -> PyResult<()> {
    let schedule: LrSchedule =
        serde_json::from_str(schedule_json).map_err(|e| json_err("schedule_json", e))?;
    schedule.validate().map_err(to_py_err)
}
