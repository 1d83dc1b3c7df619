//! Turning CUDA library failures into verjus errors.
//!
//! Every failure of the driver, cuBLAS, cuDNN or NVRTC becomes an
//! [`Error::Device`] that names the device, the verjus op and the library call,
//! so a user (often reading a Python exception) knows what failed where.

use verjus_core::{Device, Error};

/// `device {dev}: {op}: {what}: {err}`.
pub(crate) fn device_error(
    device: Device,
    op: &str,
    what: &str,
    err: impl std::fmt::Display,
) -> Error {
    Error::Device {
        device: device.to_string(),
        msg: format!("{op}: {what} failed: {err}"),
    }
}

/// A size that does not fit the C integer type a CUDA library takes.
pub(crate) fn too_large(device: Device, op: &str, what: &str, value: usize) -> Error {
    Error::Device {
        device: device.to_string(),
        msg: format!("{op}: {what} = {value} exceeds what the CUDA library call accepts"),
    }
}
