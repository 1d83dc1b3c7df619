//! verjus: a deep learning framework with a Rust core.
//!
//! This facade crate re-exports the workspace's crates under one name and picks a
//! backend for a [`Device`] at run time, so that programs (and the examples in
//! `examples/`) depend on one crate (the static graph is [`nn`], the RF frontend's core [`rf`]) and choose the device with a value, not a type.

pub use verjus_core as core;
pub use verjus_core::{ops, BackendRef, DType, Device, Error, Result, Shape, Tensor};
pub use verjus_native as native;
pub use verjus_nn as nn;
pub use verjus_rf as rf;

/// The backend that computes on `device`.
///
/// `Device::Cpu` is the native backend. A device no backend of this build serves
/// is an error that says so.
pub fn backend(device: Device) -> Result<BackendRef> {
    match device {
        Device::Cpu => Ok(verjus_native::backend()),
        Device::Cuda(_) => Err(Error::Device {
            device: device.to_string(),
            msg: "this build of verjus has no CUDA backend".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_backend_by_device() {
        assert_eq!(backend(Device::Cpu).unwrap().device(), Device::Cpu);
        let err = backend(Device::Cuda(0)).unwrap_err().to_string();
        assert!(err.contains("cuda:0"), "{err}");
    }
}
