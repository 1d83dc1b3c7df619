//! The `weight_dropout` and `weight_noise` options of a layer in a definition:
//! what they say and which of the layer's parameters they apply to.
//!
//! A setting is one number for every weight matrix of the layer (its
//! parameters whose names start with `weight`), or an object of numbers by
//! parameter name: an exact name (`"weight_hh_l1_reverse"`) or, for the
//! per-layer parameters of an `LSTM`, a family (`"weight_hh"` is every
//! `weight_hh_l<n>` and `weight_hh_l<n>_reverse`). An exact name overrides its
//! family. The run-time side is `layers::weight_param`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A layer's `weight_dropout` (drop probability) or `weight_noise`
/// (standard deviation) setting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WeightSetting {
    /// The same value for every parameter whose name starts with `weight`.
    All(f32),
    /// Values by parameter name or (LSTM) family name.
    PerParam(BTreeMap<String, f32>),
}

impl WeightSetting {
    /// The value for each of `roles` (0 where the setting says nothing), or
    /// a message naming a key that matches none of them.
    pub(crate) fn resolve(&self, roles: &[&str]) -> Result<Vec<f32>, String> {
        let mut out = vec![0.0; roles.len()];
        match self {
            WeightSetting::All(v) => {
                for (o, r) in out.iter_mut().zip(roles) {
                    if r.starts_with("weight") {
                        *o = *v;
                    }
                }
            }
            WeightSetting::PerParam(map) => {
                for key in map.keys() {
                    if !roles.iter().any(|r| r == key || in_family(r, key)) {
                        return Err(format!(
                            "has no parameter {key:?} (its parameters: {})",
                            roles.join(", ")
                        ));
                    }
                }
                // Families first, so that an exact name overrides its family.
                for exact in [false, true] {
                    for (key, v) in map {
                        for (o, r) in out.iter_mut().zip(roles) {
                            if (exact && r == key) || (!exact && in_family(r, key)) {
                                *o = *v;
                            }
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Whether `role` is `family_l<n>` or `family_l<n>_reverse`.
fn in_family(role: &str, family: &str) -> bool {
    let Some(rest) = role.strip_prefix(family).and_then(|r| r.strip_prefix("_l")) else {
        return false;
    };
    let digits = rest.strip_suffix("_reverse").unwrap_or(rest);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LSTM: [&str; 8] = [
        "weight_ih_l0",
        "weight_hh_l0",
        "bias_ih_l0",
        "bias_hh_l0",
        "weight_ih_l0_reverse",
        "weight_hh_l0_reverse",
        "bias_ih_l0_reverse",
        "bias_hh_l0_reverse",
    ];

    fn per(pairs: &[(&str, f32)]) -> WeightSetting {
        WeightSetting::PerParam(pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect())
    }

    #[test]
    fn a_number_applies_to_every_weight_matrix() {
        let got = WeightSetting::All(0.5).resolve(&LSTM).unwrap();
        assert_eq!(got, [0.5, 0.5, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0]);
        let got = WeightSetting::All(0.5)
            .resolve(&["weight", "bias"])
            .unwrap();
        assert_eq!(got, [0.5, 0.0]);
    }

    #[test]
    fn a_family_covers_every_layer_and_direction_and_exact_names_override_it() {
        let got = per(&[("weight_hh", 0.2)]).resolve(&LSTM).unwrap();
        assert_eq!(got, [0.0, 0.2, 0.0, 0.0, 0.0, 0.2, 0.0, 0.0]);
        let got = per(&[("weight_hh_l0_reverse", 0.1), ("weight_hh", 0.2)])
            .resolve(&LSTM)
            .unwrap();
        assert_eq!(got, [0.0, 0.2, 0.0, 0.0, 0.0, 0.1, 0.0, 0.0]);
        let got = per(&[("bias", 0.3)]).resolve(&["weight", "bias"]).unwrap();
        assert_eq!(got, [0.0, 0.3]);
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_parameters() {
        let e = per(&[("weight_hx", 0.2)]).resolve(&LSTM).unwrap_err();
        assert!(
            e.contains("\"weight_hx\"") && e.contains("weight_hh_l0"),
            "{e}"
        );
        // A family is a whole name before `_l<n>`, not any prefix.
        assert!(per(&[("weight", 0.2)]).resolve(&LSTM).is_err());
        assert!(per(&[("weight_h", 0.2)]).resolve(&LSTM).is_err());
    }

    #[test]
    fn json_forms() {
        let a: WeightSetting = serde_json::from_str("0.25").unwrap();
        assert_eq!(a, WeightSetting::All(0.25));
        let b: WeightSetting = serde_json::from_str(r#"{"weight_hh": 0.2}"#).unwrap();
        assert_eq!(b, per(&[("weight_hh", 0.2)]));
        assert_eq!(serde_json::to_string(&b).unwrap(), r#"{"weight_hh":0.2}"#);
        assert!(serde_json::from_str::<WeightSetting>(r#""0.2""#).is_err());
    }
}
