//! A solver's configuration as data: what the Python bindings (and a
//! checkpoint) pass around as JSON, without the state.
//!
//! [`Solver`] itself carries state (moments, step counts) that is not plain
//! data; [`SolverConfig`] is the part a user writes. Reading one validates it, so
//! a bad setting is an error naming the field before any training starts.

use super::{LrSchedule, Solver, UpdateRule};
use serde::{Deserialize, Serialize};
use verjus_core::Result;

/// Rule, schedule and clipping of a [`Solver`]. In JSON:
///
/// ```json
/// {"rule": {"Adam": {"lr": 0.001}}, "schedule": "Constant", "clip_norm": null}
/// ```
///
/// `schedule` defaults to `"Constant"` and `clip_norm` to `null` (no clipping);
/// unknown fields are errors.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SolverConfig {
    /// The optimizer and its hyperparameters.
    pub rule: UpdateRule,
    /// Scales the rule's learning rate by step.
    #[serde(default)]
    pub schedule: LrSchedule,
    /// Clip the mean gradient to this global L2 norm; `None` disables clipping.
    #[serde(default)]
    pub clip_norm: Option<f32>,
}

impl From<UpdateRule> for SolverConfig {
    fn from(rule: UpdateRule) -> Self {
        SolverConfig {
            rule,
            schedule: LrSchedule::Constant,
            clip_norm: None,
        }
    }
}

impl Solver {
    /// A fresh solver (no state) with the settings of `cfg`, which are checked.
    pub fn from_config(cfg: SolverConfig) -> Result<Solver> {
        let mut solver = Solver::new(cfg.rule).with_schedule(cfg.schedule);
        solver.clip_norm = cfg.clip_norm;
        solver.validate()?;
        Ok(solver)
    }

    /// The settings (not the state) of this solver.
    pub fn config(&self) -> SolverConfig {
        SolverConfig {
            rule: self.rule,
            schedule: self.schedule,
            clip_norm: self.clip_norm,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solver::{Adam, Sgd};

    #[test]
    fn json_shape_and_defaults() {
        let cfg: SolverConfig =
            serde_json::from_str(r#"{"rule": {"Adam": {"lr": 0.01}}}"#).unwrap();
        assert_eq!(cfg, SolverConfig::from(UpdateRule::Adam(Adam::new(0.01))));
        let text = serde_json::to_string(&cfg).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["schedule"], "Constant");
        assert!(value["clip_norm"].is_null());
        for field in ["lr", "beta1", "beta2", "eps", "weight_decay", "decoupled"] {
            assert!(
                value["rule"]["Adam"].get(field).is_some(),
                "{field} in {text}"
            );
        }
        assert_eq!(serde_json::from_str::<SolverConfig>(&text).unwrap(), cfg);

        let sgd: SolverConfig = serde_json::from_str(
            r#"{"rule": {"Sgd": {"lr": 0.1, "momentum": 0.9}},
                "schedule": {"Step": {"step_size": 10, "gamma": 0.5}}, "clip_norm": 1.0}"#,
        )
        .unwrap();
        let solver = Solver::from_config(sgd).unwrap();
        assert_eq!(
            solver.rule,
            UpdateRule::Sgd(Sgd {
                momentum: 0.9,
                ..Sgd::new(0.1)
            })
        );
        assert_eq!(solver.clip_norm, Some(1.0));
        assert_eq!(solver.config(), sgd);
        let cosine: SolverConfig = serde_json::from_str(
            r#"{"rule": {"Sgd": {"lr": 0.1}},
                "schedule": {"Cosine": {"warmup_steps": 1, "total_steps": 5, "min_lr": 0.0}}}"#,
        )
        .unwrap();
        assert!(matches!(cosine.schedule, LrSchedule::Cosine { .. }));
    }

    #[test]
    fn bad_configs_are_errors_naming_the_field() {
        for (text, needle) in [
            (r#"{"rule": {"Adam": {"lr": 0.01, "betas": 1}}}"#, "betas"),
            (r#"{"rule": {"Adam": {}}}"#, "lr"),
            (r#"{"rule": {"Sgd": {"lr": 0.1}}, "clip": 1}"#, "clip"),
            (
                r#"{"rule": {"Sgd": {"lr": 0.1}}, "schedule": {"Step": {"step_size": 1}}}"#,
                "gamma",
            ),
            (r#"{"rule": {"Rmsprop": {"lr": 0.1}}}"#, "Rmsprop"),
        ] {
            let err = serde_json::from_str::<SolverConfig>(text)
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
        let bad = |json: &str| {
            let cfg: SolverConfig = serde_json::from_str(json).unwrap();
            Solver::from_config(cfg).unwrap_err().to_string()
        };
        let err = bad(r#"{"rule": {"Adam": {"lr": 0.01, "beta1": 1.5}}}"#);
        assert!(err.contains("beta1"), "{err}");
        let err = bad(r#"{"rule": {"Sgd": {"lr": 0.1}}, "clip_norm": -1.0}"#);
        assert!(err.contains("clip_norm"), "{err}");
        let err = bad(
            r#"{"rule": {"Sgd": {"lr": 0.1}}, "schedule": {"Step": {"step_size": 0, "gamma": 0.5}}}"#,
        );
        assert!(err.contains("step_size"), "{err}");
    }
}
