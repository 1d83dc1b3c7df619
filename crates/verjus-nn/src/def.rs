//! Network definitions as data.
//!
//! A [`NetworkDef`] is plain JSON (serde): named inputs with their unit shapes
//! (no batch axis), a list of layers, and the names of the outputs. Each layer
//! names its inputs; a layer that names none takes the previous layer's output
//! (or, for the first layer of a scope, that scope's input), so a plain list of
//! layers reads as a sequential network and any DAG can be written by naming
//! inputs. Containers (`Sequential`, `Graph`) nest scopes; a layer inside one is
//! addressed by its path (`block1.conv`), which is also the prefix of its
//! parameter names (`block1.conv.weight`).
//!
//! A layer may `share` the parameters of another layer of the same kind and
//! shapes (by path); the gradients of all users are summed into the one
//! parameter.
//!
//! Inputs and outputs are the network's interface: each has a name of its own
//! that callers (and a hot swap, which matches networks by it) see. An input's
//! name is the one layers read it by; an output names the layer it comes
//! `from` (version 2), or is the bare layer path and named after it (version 1).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use verjus_core::{Error, Result};

pub use crate::interface::OutputDef;

/// The current definition format: version 2 added named outputs
/// (`{"name": "logits", "from": "fc3"}`), version 3 sequences (inputs with a
/// dynamic time axis, `"dtype": "int32"` token inputs, and the layers
/// `Embedding`, `LSTM`, `LastFrame`, `MeanOverTime`, `MaxOverTime`).
pub const FORMAT_VERSION: u32 = 3;

/// The version of a definition that does not say (the first one).
fn first_version() -> u32 {
    1
}

/// A whole network: inputs, layers, outputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkDef {
    /// Version of this format; loading a newer version is an error. Reading
    /// and writing raise it to the version the definition needs (see
    /// [`NetworkDef::required_version`]), so that an older verjus refuses a
    /// definition it would misread, and still reads every other one.
    #[serde(default = "first_version")]
    pub format_version: u32,
    /// Named inputs and their unit shapes (without the batch axis).
    pub inputs: Vec<InputDef>,
    /// The layers of the top-level scope.
    pub layers: Vec<LayerDef>,
    /// The outputs the network returns, in order; empty means the last layer's
    /// output, named after it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<OutputDef>,
}

pub use crate::seqdef::{InputDType, InputDef};
pub use crate::weightdef::WeightSetting;

/// One layer: a name, where its inputs come from, and what it is.
///
/// In JSON the layer's own fields (`name`, `inputs`, `share`) sit beside its
/// type's settings in one object. Deserializing splits them by hand rather than
/// with `#[serde(flatten)]`, which would silently ignore unknown fields: a typo
/// such as `"paddding"` must be an error that names the layer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerDef {
    /// Unique within its scope; must not contain '.'.
    pub name: String,
    /// Names of the layers or network inputs feeding this layer, resolved in this
    /// scope first, then in enclosing scopes. Absent: the previous layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<String>>,
    /// Path of a layer whose parameters this layer uses instead of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<String>,
    /// Weight dropout (DropConnect) of this layer's parameters in training:
    /// drop probabilities in `[0, 1)` (see [`WeightSetting`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_dropout: Option<WeightSetting>,
    /// Weight noise (variational noise) on this layer's parameters in
    /// training: standard deviations of the Gaussian noise added to them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_noise: Option<WeightSetting>,
    /// The kind of layer and its settings.
    #[serde(flatten)]
    pub config: LayerConfig,
}

/// A size given once for both spatial axes (`3`) or per axis (`[3, 5]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Pair {
    Same(usize),
    PerAxis([usize; 2]),
}

impl Pair {
    /// `[height, width]`.
    pub fn get(self) -> [usize; 2] {
        match self {
            Pair::Same(v) => [v, v],
            Pair::PerAxis(v) => v,
        }
    }
}

fn yes() -> bool {
    true
}
fn one() -> Pair {
    Pair::Same(1)
}
fn zero() -> Pair {
    Pair::Same(0)
}
fn is_true(b: &bool) -> bool {
    *b
}
fn is_one(p: &Pair) -> bool {
    p.get() == [1, 1]
}
fn is_zero(p: &Pair) -> bool {
    p.get() == [0, 0]
}
fn one_layer() -> usize {
    1
}
fn is_one_layer(n: &usize) -> bool {
    *n == 1
}
fn is_zero_f32(p: &f32) -> bool {
    *p == 0.0
}
fn is_false(b: &bool) -> bool {
    !*b
}
fn last_axis() -> isize {
    -1
}
fn is_last_axis(a: &isize) -> bool {
    *a == -1
}

/// What a layer computes. Tagged by `"type"` in JSON; unknown fields are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum LayerConfig {
    /// `y = x W^T + b` over the last axis; the input's last axis is `in_features`.
    Linear {
        /// Optional check of the input's last axis (inferred when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        in_features: Option<usize>,
        out_features: usize,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        bias: bool,
    },
    /// 2-D convolution over `[C, H, W]` units.
    Conv2d {
        out_channels: usize,
        kernel: Pair,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        stride: Pair,
        #[serde(default = "zero", skip_serializing_if = "is_zero")]
        padding: Pair,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        dilation: Pair,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        bias: bool,
    },
    /// Max pooling over `[C, H, W]` units; the stride defaults to the kernel.
    MaxPool2d {
        kernel: Pair,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stride: Option<Pair>,
        #[serde(default = "zero", skip_serializing_if = "is_zero")]
        padding: Pair,
    },
    /// Average pooling (padding counts in the divisor).
    AvgPool2d {
        kernel: Pair,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stride: Option<Pair>,
        #[serde(default = "zero", skip_serializing_if = "is_zero")]
        padding: Pair,
    },
    ReLU,
    Sigmoid,
    Tanh,
    GELU,
    /// Softmax over a unit axis (negative counts from the end).
    Softmax {
        #[serde(default = "last_axis", skip_serializing_if = "is_last_axis")]
        axis: isize,
    },
    /// Log-softmax over a unit axis (negative counts from the end).
    LogSoftmax {
        #[serde(default = "last_axis", skip_serializing_if = "is_last_axis")]
        axis: isize,
    },
    /// Inverted dropout, active in training only.
    Dropout {
        p: f32,
    },
    /// Flattens the unit shape to one axis.
    Flatten,
    /// Reshapes the unit shape (same element count).
    Reshape {
        shape: Vec<usize>,
    },
    /// Sum of two or more inputs of the same shape (residual connections).
    Add,
    /// Concatenation of the inputs along a unit axis (negative counts from the end).
    Concat {
        axis: isize,
    },
    /// A table of `vocab` learned vectors of size `dim`, looked up by the
    /// int32 token ids of its input (per frame): `[..] -> [.., dim]`.
    Embedding {
        vocab: usize,
        dim: usize,
    },
    /// A (stacked, optionally bidirectional) LSTM over a sequence `[T, B, F]`
    /// with the call's lengths; output `[T, B, H]` (`[T, B, 2H]` when
    /// bidirectional), zero past each sequence's length.
    LSTM {
        hidden: usize,
        #[serde(default = "one_layer", skip_serializing_if = "is_one_layer")]
        num_layers: usize,
        /// Dropout on the outputs of every layer but the last (training only).
        #[serde(default, skip_serializing_if = "is_zero_f32")]
        dropout: f32,
        #[serde(default, skip_serializing_if = "is_false")]
        bidirectional: bool,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        bias: bool,
    },
    /// Each sequence's frame at `length - 1` (a sequence needs a frame).
    LastFrame,
    /// The mean over each sequence's frames (0 for an empty sequence).
    MeanOverTime,
    /// The maximum over each sequence's frames (a sequence needs a frame).
    MaxOverTime,
    /// A scope whose layers chain; its output is its last layer's.
    Sequential {
        layers: Vec<LayerDef>,
    },
    /// A scope whose layers name their inputs; its output is `outputs[0]`
    /// (other outputs are reachable by path).
    Graph {
        layers: Vec<LayerDef>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outputs: Vec<String>,
    },
}

impl<'de> Deserialize<'de> for LayerDef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let mut fields = Map::<String, Value>::deserialize(deserializer)?;
        let name = match fields.remove("name") {
            Some(Value::String(name)) => name,
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "a layer's \"name\" must be a string, got {other}"
                )))
            }
            None => return Err(D::Error::missing_field("name")),
        };
        let in_layer = |e: serde_json::Error| D::Error::custom(format!("layer {name:?}: {e}"));
        let inputs = fields
            .remove("inputs")
            .map(serde_json::from_value)
            .transpose()
            .map_err(in_layer)?;
        let share = fields
            .remove("share")
            .map(serde_json::from_value)
            .transpose()
            .map_err(in_layer)?;
        let mut setting = |key: &str| -> std::result::Result<Option<WeightSetting>, D::Error> {
            fields
                .remove(key)
                .map(serde_json::from_value)
                .transpose()
                .map_err(|e| D::Error::custom(format!("layer {name:?}: {key}: {e}")))
        };
        let weight_dropout = setting("weight_dropout")?;
        let weight_noise = setting("weight_noise")?;
        // serde ignores extra fields beside the tag of a unit variant; refuse them here.
        let extra: Vec<String> = fields.keys().filter(|k| *k != "type").cloned().collect();
        let config = LayerConfig::deserialize(Value::Object(fields)).map_err(in_layer)?;
        if config.takes_no_settings() && !extra.is_empty() {
            return Err(D::Error::custom(format!(
                "layer {name:?}: unknown field(s) {extra:?}: {} takes no settings",
                config.kind()
            )));
        }
        if matches!(
            config,
            LayerConfig::Sequential { .. } | LayerConfig::Graph { .. }
        ) && (weight_dropout.is_some() || weight_noise.is_some())
        {
            return Err(D::Error::custom(format!(
                "layer {name:?}: weight_dropout and weight_noise apply to the layers \
                 inside a {}, not to the container",
                config.kind()
            )));
        }
        Ok(LayerDef {
            name,
            inputs,
            share,
            weight_dropout,
            weight_noise,
            config,
        })
    }
}

impl LayerConfig {
    /// Whether this type has no settings besides its `"type"` (a unit variant).
    fn takes_no_settings(&self) -> bool {
        matches!(
            self,
            LayerConfig::ReLU
                | LayerConfig::Sigmoid
                | LayerConfig::Tanh
                | LayerConfig::GELU
                | LayerConfig::Flatten
                | LayerConfig::Add
                | LayerConfig::LastFrame
                | LayerConfig::MeanOverTime
                | LayerConfig::MaxOverTime
        )
    }

    /// The `"type"` tag, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            LayerConfig::Linear { .. } => "Linear",
            LayerConfig::Conv2d { .. } => "Conv2d",
            LayerConfig::MaxPool2d { .. } => "MaxPool2d",
            LayerConfig::AvgPool2d { .. } => "AvgPool2d",
            LayerConfig::ReLU => "ReLU",
            LayerConfig::Sigmoid => "Sigmoid",
            LayerConfig::Tanh => "Tanh",
            LayerConfig::GELU => "GELU",
            LayerConfig::Softmax { .. } => "Softmax",
            LayerConfig::LogSoftmax { .. } => "LogSoftmax",
            LayerConfig::Dropout { .. } => "Dropout",
            LayerConfig::Flatten => "Flatten",
            LayerConfig::Reshape { .. } => "Reshape",
            LayerConfig::Add => "Add",
            LayerConfig::Concat { .. } => "Concat",
            LayerConfig::Embedding { .. } => "Embedding",
            LayerConfig::LSTM { .. } => "LSTM",
            LayerConfig::LastFrame => "LastFrame",
            LayerConfig::MeanOverTime => "MeanOverTime",
            LayerConfig::MaxOverTime => "MaxOverTime",
            LayerConfig::Sequential { .. } => "Sequential",
            LayerConfig::Graph { .. } => "Graph",
        }
    }
}

impl NetworkDef {
    /// Parses a definition from JSON text; errors name the line and column.
    /// A leading byte-order mark (editors on Windows write one) is skipped.
    pub fn from_json(text: &str) -> Result<Self> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut def: NetworkDef = serde_json::from_str(text)
            .map_err(|e| Error::definition("<definition>", format!("invalid JSON: {e}")))?;
        if def.format_version > FORMAT_VERSION {
            return Err(Error::definition(
                "<definition>",
                format!(
                    "format_version {} is newer than this verjus understands ({FORMAT_VERSION})",
                    def.format_version
                ),
            ));
        }
        def.format_version = def.format_version.max(def.required_version());
        Ok(def)
    }

    /// The definition as pretty JSON, its `format_version` at least the one
    /// it needs.
    pub fn to_json(&self) -> String {
        let needed = self.required_version();
        let text = if self.format_version >= needed {
            serde_json::to_string_pretty(self)
        } else {
            serde_json::to_string_pretty(&NetworkDef {
                format_version: needed,
                ..self.clone()
            })
        };
        text.expect("a NetworkDef always serializes")
    }

    /// The oldest format version that reads this definition as meant: 3 when
    /// it has a sequence or int32 input or a sequence layer, 2 when an output
    /// is named apart from its layer, else 1.
    pub fn required_version(&self) -> u32 {
        if self.inputs.iter().any(InputDef::needs_version_3) || any_sequence_layer(&self.layers) {
            3
        } else if self.outputs.iter().any(OutputDef::is_renamed) {
            2
        } else {
            1
        }
    }
}

/// Whether a layer of `layers` (nested ones included) is one of version 3.
fn any_sequence_layer(layers: &[LayerDef]) -> bool {
    layers.iter().any(|l| match &l.config {
        LayerConfig::Embedding { .. }
        | LayerConfig::LSTM { .. }
        | LayerConfig::LastFrame
        | LayerConfig::MeanOverTime
        | LayerConfig::MaxOverTime => true,
        LayerConfig::Sequential { layers } | LayerConfig::Graph { layers, .. } => {
            any_sequence_layer(layers)
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CNN: &str = r#"{
        "inputs": [{"name": "image", "shape": [1, 28, 28]}],
        "layers": [
            {"name": "conv1", "type": "Conv2d", "out_channels": 32, "kernel": 3, "padding": 1},
            {"name": "relu1", "type": "ReLU"},
            {"name": "pool1", "type": "MaxPool2d", "kernel": 2},
            {"name": "flat", "type": "Flatten"},
            {"name": "fc", "type": "Linear", "out_features": 10, "bias": false}
        ]
    }"#;

    #[test]
    fn parses_and_round_trips() {
        let def = NetworkDef::from_json(CNN).unwrap();
        assert_eq!(def.format_version, 1);
        assert_eq!(def.layers[0].config.kind(), "Conv2d");
        match &def.layers[0].config {
            LayerConfig::Conv2d {
                kernel,
                padding,
                stride,
                ..
            } => {
                assert_eq!(
                    (kernel.get(), padding.get(), stride.get()),
                    ([3, 3], [1, 1], [1, 1])
                );
            }
            other => panic!("parsed as {other:?}"),
        }
        let again = NetworkDef::from_json(&def.to_json()).unwrap();
        assert_eq!(def, again);
        let with_mark = NetworkDef::from_json(&format!("\u{feff}{CNN}")).unwrap();
        assert_eq!(def, with_mark);
    }

    #[test]
    fn named_outputs_are_version_2_and_bare_ones_still_read() {
        let bare = CNN.replace(
            "\n        ]\n",
            "\n        ],\n        \"outputs\": [\"fc\"]\n",
        );
        let def = NetworkDef::from_json(&bare).unwrap();
        assert_eq!(def.outputs, [OutputDef::layer("fc")]);
        assert_eq!(def.format_version, 1);
        assert!(def.to_json().contains("\"format_version\": 1"));

        let named = bare.replace(r#"["fc"]"#, r#"[{"name": "logits", "from": "fc"}]"#);
        let def = NetworkDef::from_json(&named).unwrap();
        assert_eq!(
            def.outputs,
            [OutputDef {
                name: "logits".into(),
                from: "fc".into()
            }]
        );
        // Raised to the version the named output needs, and written so.
        assert_eq!(def.format_version, 2);
        assert_eq!(NetworkDef::from_json(&def.to_json()).unwrap(), def);
        let mut built_in_code = def.clone();
        built_in_code.format_version = 1;
        assert!(built_in_code.to_json().contains("\"format_version\": 2"));

        let too_new = named.replacen('{', r#"{"format_version": 4,"#, 1);
        let err = NetworkDef::from_json(&too_new).unwrap_err().to_string();
        assert!(err.contains("format_version 4"), "{err}");
    }

    #[test]
    fn unknown_type_and_fields_are_errors() {
        let bad = CNN.replace("\"ReLU\"", "\"Relu6\"");
        let err = NetworkDef::from_json(&bad).unwrap_err().to_string();
        assert!(err.contains("Relu6"), "{err}");
        let bad = CNN.replace("\"inputs\"", "\"inptus\"");
        assert!(NetworkDef::from_json(&bad).is_err());
    }

    #[test]
    fn unknown_fields_inside_a_layer_name_the_layer() {
        let bad = CNN.replace("\"padding\"", "\"paddding\"");
        let err = NetworkDef::from_json(&bad).unwrap_err().to_string();
        assert!(err.contains("conv1") && err.contains("paddding"), "{err}");
        let bad = CNN.replace(
            r#"{"name": "relu1", "type": "ReLU"}"#,
            r#"{"name": "relu1", "type": "ReLU", "inplace": true}"#,
        );
        let err = NetworkDef::from_json(&bad).unwrap_err().to_string();
        assert!(err.contains("relu1") && err.contains("inplace"), "{err}");
        let bad = CNN.replace(r#""name": "fc""#, r#""name": 7"#);
        let err = NetworkDef::from_json(&bad).unwrap_err().to_string();
        assert!(err.contains("name"), "{err}");
    }

    #[test]
    fn nested_layers_round_trip_and_check_their_fields() {
        let text = r#"{
            "inputs": [{"name": "x", "shape": [4]}],
            "layers": [{"name": "block", "type": "Sequential", "layers": [
                {"name": "fc", "type": "Linear", "out_features": 2, "bias": false},
                {"name": "act", "inputs": ["fc"], "type": "Tanh"}
            ]}]
        }"#;
        let def = NetworkDef::from_json(text).unwrap();
        assert_eq!(NetworkDef::from_json(&def.to_json()).unwrap(), def);
        let bad = text.replace("\"bias\": false", "\"biass\": false");
        let err = NetworkDef::from_json(&bad).unwrap_err().to_string();
        assert!(err.contains("fc") && err.contains("biass"), "{err}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let depth = 10_000;
        let mut text = String::from(r#"{"inputs": [{"name": "x", "shape": [1]}], "layers": ["#);
        for i in 0..depth {
            text.push_str(&format!(
                r#"{{"name": "s{i}", "type": "Sequential", "layers": ["#
            ));
        }
        text.push_str(&"]}".repeat(depth));
        text.push_str("]}");
        assert!(NetworkDef::from_json(&text).is_err());
    }
}
