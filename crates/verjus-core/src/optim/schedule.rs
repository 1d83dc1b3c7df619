//! Learning-rate schedules: the learning rate as a pure function of the step.
//!
//! A schedule scales the optimizer's base learning rate; it keeps no state of its
//! own, so restoring the solver's step count restores the schedule too.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// How the learning rate changes with the step number `t` (0 for the first step).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum LrSchedule {
    /// `lr(t) = base`.
    #[default]
    Constant,
    /// `lr(t) = base · gamma^⌊t / step_size⌋` (PyTorch's `StepLR`).
    Step { step_size: u64, gamma: f32 },
    /// Linear warm-up, then a half cosine down to `min_lr`:
    ///
    /// ```text
    /// lr(t) = base · (t + 1) / warmup_steps                          t < warmup_steps
    /// lr(t) = min_lr + (base − min_lr) · (1 + cos(π · s)) / 2        otherwise,
    ///         s = min(1, (t − warmup_steps) / (total_steps − warmup_steps))
    /// ```
    ///
    /// so the last warm-up step reaches `base` and every step from `total_steps`
    /// on uses `min_lr`.
    Cosine {
        warmup_steps: u64,
        total_steps: u64,
        min_lr: f32,
    },
}

impl LrSchedule {
    /// Checks the settings; errors name the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::invalid("LrSchedule", msg));
        match *self {
            LrSchedule::Constant => Ok(()),
            LrSchedule::Step { step_size, gamma } => {
                if step_size == 0 {
                    return bad("Step: step_size must be > 0".into());
                }
                if !(gamma.is_finite() && gamma >= 0.0) {
                    return bad(format!("Step: gamma must be finite and >= 0, got {gamma}"));
                }
                Ok(())
            }
            LrSchedule::Cosine {
                warmup_steps,
                total_steps,
                min_lr,
            } => {
                if total_steps <= warmup_steps {
                    return bad(format!(
                        "Cosine: total_steps ({total_steps}) must exceed warmup_steps ({warmup_steps})"
                    ));
                }
                if !(min_lr.is_finite() && min_lr >= 0.0) {
                    return bad(format!(
                        "Cosine: min_lr must be finite and >= 0, got {min_lr}"
                    ));
                }
                Ok(())
            }
        }
    }

    /// The learning rate of step `t` for base learning rate `base`.
    pub fn lr_at(&self, base: f32, t: u64) -> f32 {
        match *self {
            LrSchedule::Constant => base,
            LrSchedule::Step { step_size, gamma } => {
                let k = t / step_size.max(1);
                // Saturate the exponent: gamma^(2^31) is 0, 1 or inf anyway.
                base * gamma.powi(i32::try_from(k).unwrap_or(i32::MAX))
            }
            LrSchedule::Cosine {
                warmup_steps,
                total_steps,
                min_lr,
            } => {
                if t < warmup_steps {
                    return (f64::from(base) * (t + 1) as f64 / warmup_steps as f64) as f32;
                }
                let span = total_steps.saturating_sub(warmup_steps).max(1);
                let s = ((t - warmup_steps) as f64 / span as f64).min(1.0);
                let cos = 0.5 * (1.0 + (std::f64::consts::PI * s).cos());
                (f64::from(min_lr) + (f64::from(base) - f64::from(min_lr)) * cos) as f32
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() <= 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn constant_and_step() {
        assert_eq!(LrSchedule::Constant.lr_at(0.1, 12345), 0.1);
        let s = LrSchedule::Step {
            step_size: 10,
            gamma: 0.5,
        };
        assert!(close(s.lr_at(1.0, 0), 1.0));
        assert!(close(s.lr_at(1.0, 9), 1.0));
        assert!(close(s.lr_at(1.0, 10), 0.5));
        assert!(close(s.lr_at(1.0, 25), 0.25));
        assert_eq!(s.lr_at(1.0, u64::MAX), 0.0);
    }

    #[test]
    fn cosine_with_warmup() {
        let s = LrSchedule::Cosine {
            warmup_steps: 4,
            total_steps: 12,
            min_lr: 0.1,
        };
        s.validate().unwrap();
        // Warm-up: 1/4, 2/4, 3/4, 4/4 of the base.
        for (t, want) in [(0, 0.25), (1, 0.5), (2, 0.75), (3, 1.0)] {
            assert!(close(s.lr_at(1.0, t), want), "t={t}: {}", s.lr_at(1.0, t));
        }
        // Cosine over the 8 steps after warm-up: full at 4, a quarter of the way
        // at 6, halfway at 8, the minimum from 12 on.
        assert!(close(s.lr_at(1.0, 4), 1.0));
        let quarter = 0.1 + 0.9 * (1.0 + std::f32::consts::FRAC_1_SQRT_2) / 2.0;
        assert!(close(s.lr_at(1.0, 6), quarter), "{}", s.lr_at(1.0, 6));
        assert!(close(s.lr_at(1.0, 8), 0.55));
        assert!(close(s.lr_at(1.0, 12), 0.1));
        assert!(close(s.lr_at(1.0, 1_000_000), 0.1));
        // The base scales everything but min_lr.
        assert!(close(s.lr_at(0.5, 1), 0.25));
        let lrs: Vec<f32> = (3..20).map(|t| s.lr_at(1.0, t)).collect();
        assert!(lrs.windows(2).all(|w| w[1] <= w[0]), "{lrs:?}");
    }

    #[test]
    fn bad_settings_are_errors() {
        let err = LrSchedule::Step {
            step_size: 0,
            gamma: 0.1,
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(err.contains("step_size"), "{err}");
        let err = LrSchedule::Cosine {
            warmup_steps: 10,
            total_steps: 10,
            min_lr: 0.0,
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(err.contains("total_steps"), "{err}");
        assert!(LrSchedule::Cosine {
            warmup_steps: 0,
            total_steps: 10,
            min_lr: f32::NAN,
        }
        .validate()
        .is_err());
    }
}
