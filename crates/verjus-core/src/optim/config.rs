//! A solver's configuration as data: what the Python bindings (and a
//! checkpoint) pass around as JSON, without the state.
//!
//! A solver itself carries state (moments, step counts) that is not plain
//! data; [`SolverConfig`] is the part a user writes, and the same for the static
//! graph's solver and the RF optimizers. Checking one before training names the
//! bad field.

use super::{LrSchedule, UpdateRule};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// Rule, schedule and clipping of a solver. In JSON:
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

impl SolverConfig {
    /// Checks the rule, the schedule and the clipping norm; errors name the field.
    pub fn validate(&self) -> Result<()> {
        self.rule.validate()?;
        self.schedule.validate()?;
        match self.clip_norm {
            Some(c) if !(c.is_finite() && c > 0.0) => Err(Error::invalid(
                "Solver",
                format!("clip_norm must be finite and > 0, got {c}"),
            )),
            _ => Ok(()),
        }
    }

    /// The learning rate of solver step `step` (0 for the first).
    pub fn lr_at(&self, step: u64) -> f32 {
        self.schedule.lr_at(self.rule.lr(), step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::{Adam, Sgd};

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
        sgd.validate().unwrap();
        assert_eq!(
            sgd.rule,
            UpdateRule::Sgd(Sgd {
                momentum: 0.9,
                ..Sgd::new(0.1)
            })
        );
        assert_eq!(sgd.clip_norm, Some(1.0));
        assert_eq!(
            sgd.schedule,
            LrSchedule::Step {
                step_size: 10,
                gamma: 0.5
            }
        );
        // The schedule scales the rule's learning rate.
        assert_eq!(sgd.lr_at(0), 0.1);
        assert_eq!(sgd.lr_at(10), 0.05);
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
            cfg.validate().unwrap_err().to_string()
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
