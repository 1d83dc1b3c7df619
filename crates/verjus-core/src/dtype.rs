//! Element types.
//!
//! Compute happens in `f32`; `i64` and `i32` carry labels and indices.
//! `bf16` and `f16` are storage types for reduced precision (half the bytes of
//! `f32`, converted with round-to-nearest-even by the `half` crate); a backend
//! computes on them in `f32` unless it has a kernel for them. The enum is
//! `non_exhaustive` so that more types can be added without breaking matches.

use crate::tensor::HostData;
use std::fmt;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    F32,
    I64,
    I32,
    /// bfloat16: `f32`'s exponent range with an 8-bit significand.
    BF16,
    /// IEEE half precision: 5 exponent bits (largest finite 65504), 11-bit significand.
    F16,
}

impl DType {
    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::I64 => 8,
            DType::BF16 | DType::F16 => 2,
        }
    }

    /// The name NumPy and PyTorch use (`float32`, `int64`, `int32`,
    /// `bfloat16`, `float16`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::I64 => "int64",
            DType::I32 => "int32",
            DType::BF16 => "bfloat16",
            DType::F16 => "float16",
        }
    }

    /// Whether the type is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::BF16 | DType::F16)
    }

    /// Whether the type is a reduced-precision float (`bf16`, `f16`).
    pub fn is_reduced_float(self) -> bool {
        matches!(self, DType::BF16 | DType::F16)
    }

    /// `self`, when mixed precision can run in it (bfloat16 or float16); the
    /// error names `op`.
    pub fn mixed_precision(self, op: &str) -> crate::Result<DType> {
        if !self.is_reduced_float() {
            return Err(crate::Error::invalid(
                op,
                format!("mixed precision is bfloat16 or float16, not {self}"),
            ));
        }
        Ok(self)
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
            "bfloat16" | "bf16" => Ok(DType::BF16),
            "float16" | "f16" => Ok(DType::F16),
            other => Err(crate::Error::invalid(
                "dtype",
                format!(
                    "unknown dtype {other:?} (expected float32, int64, int32, bfloat16 or float16)"
                ),
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
element!(half::bf16, BF16);
element!(half::f16, F16);
