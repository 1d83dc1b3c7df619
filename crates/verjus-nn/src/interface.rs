//! A network's outputs as a named interface.
//!
//! An output has a name of its own, which callers see (`Network::output_shapes`,
//! Python's `Network.outputs`) and which a hot swap matches, and the layer it
//! comes `from`. Naming outputs apart from layers lets a retrained variant
//! with other layers (one more, one fewer, renamed) replace a network that
//! serves, as long as the interface names and unit shapes agree.
//!
//! In JSON an output is `{"name": "logits", "from": "fc3"}` (format version
//! 2) or, as in version 1, the bare layer path `"fc3"`, which names the output
//! after its layer. An output whose name is its layer's path is written in the
//! bare form, so such a definition stays readable by version-1 readers.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// One network output: its interface name and the layer (path) it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputDef {
    /// The name callers and hot swaps see; unique among the outputs.
    pub name: String,
    /// The path of the layer whose output this is (`fc3`, `block1.conv`).
    pub from: String,
}

impl OutputDef {
    /// The output of layer `path`, named after it (the version-1 form).
    pub fn layer(path: impl Into<String>) -> OutputDef {
        let path = path.into();
        OutputDef {
            name: path.clone(),
            from: path,
        }
    }

    /// Whether this output needs the named form (format version 2): its name
    /// is not its layer's path.
    pub fn is_renamed(&self) -> bool {
        self.name != self.from
    }
}

/// The object form, with its fields checked (an unknown one is an error).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Named<'a> {
    name: std::borrow::Cow<'a, str>,
    from: std::borrow::Cow<'a, str>,
}

impl Serialize for OutputDef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.is_renamed() {
            Named {
                name: (&*self.name).into(),
                from: (&*self.from).into(),
            }
            .serialize(serializer)
        } else {
            serializer.serialize_str(&self.from)
        }
    }
}

impl<'de> Deserialize<'de> for OutputDef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::String(path) => Ok(OutputDef::layer(path)),
            value @ Value::Object(_) => {
                let named = Named::deserialize(value).map_err(|e| {
                    D::Error::custom(format!(
                        "a network output {{\"name\": ..., \"from\": ...}}: {e}"
                    ))
                })?;
                Ok(OutputDef {
                    name: named.name.into_owned(),
                    from: named.from.into_owned(),
                })
            }
            other => Err(D::Error::custom(format!(
                "a network output is a layer path (\"fc3\") or {{\"name\": \"logits\", \
                 \"from\": \"fc3\"}}, got {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<OutputDef, serde_json::Error> {
        serde_json::from_str(text)
    }

    #[test]
    fn both_forms_read_and_write_back_as_written() {
        let bare = parse(r#""fc3""#).unwrap();
        assert_eq!(bare, OutputDef::layer("fc3"));
        assert_eq!(serde_json::to_string(&bare).unwrap(), r#""fc3""#);
        let named = parse(r#"{"name": "logits", "from": "fc3"}"#).unwrap();
        assert_eq!(
            (named.name.as_str(), named.from.as_str()),
            ("logits", "fc3")
        );
        assert!(named.is_renamed());
        assert_eq!(
            serde_json::to_string(&named).unwrap(),
            r#"{"name":"logits","from":"fc3"}"#
        );
        // Named after its own layer: the version-1 form.
        let same = parse(r#"{"name": "fc3", "from": "fc3"}"#).unwrap();
        assert_eq!(serde_json::to_string(&same).unwrap(), r#""fc3""#);
    }

    #[test]
    fn malformed_outputs_are_errors_that_say_what_an_output_is() {
        for (text, needle) in [
            (r#"{"name": "logits"}"#, "from"),
            (
                r#"{"name": "logits", "from": "fc3", "shape": [10]}"#,
                "shape",
            ),
            (r#"{"name": 3, "from": "fc3"}"#, "name"),
            ("7", "layer path"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
