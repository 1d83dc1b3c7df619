//! Network inputs in a definition: their unit shape, whether they are
//! sequences, and their element type.
//!
//! A sequence input has a dynamic time axis, written as a leading `null` in
//! its shape (`{"name": "chars", "shape": [null], "dtype": "int32"}`,
//! `{"name": "rows", "shape": [null, 28]}`): each call gives its padded length
//! `T` and, optionally, the length of every example (format version 3). The
//! unit shape kept here is the shape of one *frame*, without the time axis.
//! Token ids are `"int32"` inputs, which only an `Embedding` reads.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The element type of a network input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum InputDType {
    /// Feature values (the default).
    #[default]
    #[serde(rename = "float32")]
    F32,
    /// Token ids (for an `Embedding`).
    #[serde(rename = "int32")]
    I32,
}

impl InputDType {
    /// The tensor dtype callers give.
    pub fn dtype(self) -> verjus_core::DType {
        match self {
            InputDType::F32 => verjus_core::DType::F32,
            InputDType::I32 => verjus_core::DType::I32,
        }
    }
}

/// A named network input.
#[derive(Clone, Debug, PartialEq)]
pub struct InputDef {
    pub name: String,
    /// The shape of one example (of one frame, for a sequence), e.g. `[1, 28, 28]`.
    pub shape: Vec<usize>,
    /// Whether the input has a dynamic time axis before `shape`.
    pub sequence: bool,
    pub dtype: InputDType,
}

impl InputDef {
    /// A float input of fixed unit shape (the only kind before version 3).
    pub fn fixed(name: impl Into<String>, shape: Vec<usize>) -> Self {
        InputDef {
            name: name.into(),
            shape,
            sequence: false,
            dtype: InputDType::F32,
        }
    }

    /// Whether reading this input needs format version 3.
    pub(crate) fn needs_version_3(&self) -> bool {
        self.sequence || self.dtype != InputDType::F32
    }
}

/// The JSON form: the time axis is a leading `null` in the shape.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: String,
    shape: Vec<Option<usize>>,
    #[serde(default, skip_serializing_if = "is_f32")]
    dtype: InputDType,
}

fn is_f32(d: &InputDType) -> bool {
    *d == InputDType::F32
}

impl Serialize for InputDef {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let time = self.sequence.then_some(None);
        Raw {
            name: self.name.clone(),
            shape: time
                .into_iter()
                .chain(self.shape.iter().map(|&d| Some(d)))
                .collect(),
            dtype: self.dtype,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for InputDef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let raw = Raw::deserialize(d)?;
        let sequence = raw.shape.first() == Some(&None);
        let frame = &raw.shape[usize::from(sequence)..];
        let shape: Option<Vec<usize>> = frame.iter().copied().collect();
        let shape = shape.ok_or_else(|| {
            D::Error::custom(format!(
                "input {:?}: only the first axis (time) may be null, got shape {:?}",
                raw.name, raw.shape
            ))
        })?;
        Ok(InputDef {
            name: raw.name,
            shape,
            sequence,
            dtype: raw.dtype,
        })
    }
}
