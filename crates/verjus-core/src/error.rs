//! The one error type of verjus.
//!
//! Every fallible operation returns [`Result`]. Messages name the operation and,
//! for shape problems, the expected and the actual shape, so that a user reading
//! the message (often from Python, where it becomes an exception) can find the
//! mistake without a debugger.

use crate::{DType, Device};

/// Every error verjus-core and the backends can return.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tensor had the wrong shape for an operation.
    #[error("{op}: shape mismatch for {what}: expected {expected}, got {actual}")]
    ShapeMismatch {
        op: String,
        what: String,
        expected: String,
        actual: String,
    },
    /// A tensor had the wrong element type for an operation.
    #[error("{op}: dtype mismatch for {what}: expected {expected}, got {actual}")]
    DTypeMismatch {
        op: String,
        what: String,
        expected: DType,
        actual: DType,
    },
    /// An argument that is not a shape or a dtype was out of range.
    #[error("{op}: invalid argument: {msg}")]
    InvalidArgument { op: String, msg: String },
    /// A shape whose size overflows or exceeds what verjus will allocate.
    #[error("shape {dims:?} is too large: {reason}")]
    ShapeTooLarge { dims: Vec<usize>, reason: String },
    /// The backend does not implement this operation.
    #[error("{op} is unsupported on the {backend} backend")]
    Unsupported { op: String, backend: String },
    /// A tensor lives on another device than the backend that was asked to use it.
    #[error("{op}: tensor {what} lives on {actual}, but the backend runs on {expected}")]
    WrongDevice {
        op: String,
        what: String,
        expected: Device,
        actual: Device,
    },
    /// The device (driver, library, memory) failed or is absent.
    #[error("device {device}: {msg}")]
    Device { device: String, msg: String },
    /// A network definition is wrong (unknown input, cycle, shape mismatch, bad
    /// setting); names the layer by its path.
    #[error("layer {layer:?}: {msg}")]
    Definition { layer: String, msg: String },
    /// A file is missing, unreadable or malformed; names the file and, where it
    /// helps, the byte offset.
    #[error("{path}: {msg}")]
    File { path: String, msg: String },
    /// Misuse of the autograd tape (e.g. backward of a non-scalar without a seed gradient).
    #[error("autograd: {0}")]
    Autograd(String),
    /// A collective of data-parallel training failed (another rank ended, the
    /// communicator raised).
    #[error("collective: {0}")]
    Collective(String),
}

/// `Result` with verjus' [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shape mismatch; `expected` is typically a shape or a description such as `[*, 784]`.
    pub fn shape(
        op: impl Into<String>,
        what: impl Into<String>,
        expected: impl std::fmt::Display,
        actual: impl std::fmt::Display,
    ) -> Self {
        Error::ShapeMismatch {
            op: op.into(),
            what: what.into(),
            expected: expected.to_string(),
            actual: actual.to_string(),
        }
    }

    /// Invalid argument.
    pub fn invalid(op: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::InvalidArgument {
            op: op.into(),
            msg: msg.into(),
        }
    }

    /// A definition error for `layer`.
    pub fn definition(layer: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Definition {
            layer: layer.into(),
            msg: msg.into(),
        }
    }

    /// A file error for `path`.
    pub fn file(path: impl AsRef<std::path::Path>, msg: impl Into<String>) -> Self {
        Error::File {
            path: path.as_ref().display().to_string(),
            msg: msg.into(),
        }
    }

    /// This error, from checking the contents of the file `path`, naming the
    /// file. Definition and shape errors keep their kind (Python maps them to
    /// `ValueError`); file errors stay as they are; any other becomes a file
    /// error.
    pub fn in_file(self, path: &std::path::Path) -> Self {
        let at = path.display();
        match self {
            Error::Definition { layer, msg } => Error::Definition {
                layer,
                msg: format!("{msg} (in {at})"),
            },
            Error::ShapeMismatch {
                op,
                what,
                expected,
                actual,
            } => Error::ShapeMismatch {
                op,
                what: format!("{what} in {at}"),
                expected,
                actual,
            },
            Error::File { .. } => self,
            other => Error::file(path, other.to_string()),
        }
    }

    /// Operation not implemented by a backend.
    pub fn unsupported(op: impl Into<String>, backend: impl Into<String>) -> Self {
        Error::Unsupported {
            op: op.into(),
            backend: backend.into(),
        }
    }
}
