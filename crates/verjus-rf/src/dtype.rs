//! [`RfDType`]: the element type an RF tensor presents to the user.

use verjus_core::{DType, Error, Result};

/// The user-visible element type. `Bool` (results of comparisons, masks) is
/// stored as float32 0/1, since the backends compute in float32 and index
/// with integers; it is a separate type so that `t.dtype` says what the
/// values mean and `numpy()` gives a bool array. `BFloat16` and `Float16` are
/// reduced-precision storage (see `verjus_core::DType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RfDType {
    Float32,
    Int32,
    Int64,
    Bool,
    BFloat16,
    Float16,
}

impl RfDType {
    /// The RETURNN / NumPy name (`float32`, `int32`, `int64`, `bool`,
    /// `bfloat16`, `float16`).
    pub fn name(self) -> &'static str {
        match self {
            RfDType::Float32 => "float32",
            RfDType::Int32 => "int32",
            RfDType::Int64 => "int64",
            RfDType::Bool => "bool",
            RfDType::BFloat16 => "bfloat16",
            RfDType::Float16 => "float16",
        }
    }

    /// The element type of the storage.
    pub fn storage(self) -> DType {
        match self {
            RfDType::Float32 | RfDType::Bool => DType::F32,
            RfDType::Int32 => DType::I32,
            RfDType::Int64 => DType::I64,
            RfDType::BFloat16 => DType::BF16,
            RfDType::Float16 => DType::F16,
        }
    }

    /// The user type of a storage type (float32 storage reads as float32).
    pub fn of_storage(dtype: DType) -> Result<RfDType> {
        match dtype {
            DType::F32 => Ok(RfDType::Float32),
            DType::I32 => Ok(RfDType::Int32),
            DType::I64 => Ok(RfDType::Int64),
            DType::BF16 => Ok(RfDType::BFloat16),
            DType::F16 => Ok(RfDType::Float16),
            other => Err(Error::invalid(
                "rf",
                format!("no RF dtype for storage {other}"),
            )),
        }
    }

    /// Whether the values are integers (indices, lengths, labels).
    pub fn is_int(self) -> bool {
        matches!(self, RfDType::Int32 | RfDType::Int64)
    }

    /// Whether the values are floats of any precision.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            RfDType::Float32 | RfDType::BFloat16 | RfDType::Float16
        )
    }

    /// Parses a name as [`RfDType::name`] gives it.
    pub fn parse(name: &str) -> Result<RfDType> {
        match name {
            "float32" => Ok(RfDType::Float32),
            "int32" => Ok(RfDType::Int32),
            "int64" => Ok(RfDType::Int64),
            "bool" => Ok(RfDType::Bool),
            "bfloat16" => Ok(RfDType::BFloat16),
            "float16" => Ok(RfDType::Float16),
            other => Err(Error::invalid(
                "dtype",
                format!(
                    "unknown dtype {other:?} \
                     (expected float32, int32, int64, bool, bfloat16 or float16)"
                ),
            )),
        }
    }
}

impl std::fmt::Display for RfDType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
