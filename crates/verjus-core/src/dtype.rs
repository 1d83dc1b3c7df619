//! Element types.
//!
//! Compute happens in `f32`; `i64` and `i32` carry labels and indices. The enum is
//! `non_exhaustive` so that `f16`/`bf16` can be added without breaking matches.

use crate::tensor::HostData;
use std::fmt;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    F32,
    I64,
    I32,
}

impl DType {
    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::I64 => 8,
        }
    }

    /// The name NumPy and PyTorch use (`float32`, `int64`, `int32`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::I64 => "int64",
            DType::I32 => "int32",
        }
    }

    /// Whether the type is an integer type (usable as indices or labels).
    pub fn is_int(self) -> bool {
        matches!(self, DType::I64 | DType::I32)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "float32" | "f32" => Ok(DType::F32),
            "int64" | "i64" => Ok(DType::I64),
            "int32" | "i32" => Ok(DType::I32),
            other => Err(crate::Error::invalid(
                "dtype",
                format!("unknown dtype {other:?} (expected float32, int64 or int32)"),
            )),
        }
    }
}

/// A Rust scalar type that is the element type of some [`DType`].
pub trait Element: Copy + Send + Sync + fmt::Debug + Default + PartialEq + 'static {
    const DTYPE: DType;
    /// Wraps a vector as host data.
    fn into_host(v: Vec<Self>) -> HostData;
    /// The elements, when `h` holds this type.
    fn host_slice(h: &HostData) -> Option<&[Self]>;
    /// The elements mutably, when `h` holds this type.
    fn host_slice_mut(h: &mut HostData) -> Option<&mut [Self]>;
}

macro_rules! element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn into_host(v: Vec<Self>) -> HostData {
                HostData::$variant(v)
            }
            fn host_slice(h: &HostData) -> Option<&[Self]> {
                match h {
                    HostData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn host_slice_mut(h: &mut HostData) -> Option<&mut [Self]> {
                match h {
                    HostData::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
element!(f32, F32);
element!(i64, I64);
element!(i32, I32);
