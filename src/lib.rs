//! verjus: a deep learning framework with a Rust core.
//!
//! This facade crate re-exports the workspace's crates under one name and picks a
//! backend for a [`Device`] at run time, so that programs (and the examples in
//! `examples/`) depend on one crate (the static graph is [`nn`], the RF frontend's core [`rf`]) and choose the device with a value, not a type.

pub use verjus_core as core;
pub use verjus_core::{
    ops, BackendRef, Collective, CollectiveRef, DType, Device, Error, ReduceOp, Result, Shape,
    Solo, Tensor,
};
pub use verjus_native as native;

/// The CUDA backend: whether it is usable here, device count, memory counters.
/// CUDA libraries are loaded at run time, so every build has this module.
pub mod cuda {
    pub use verjus_cuda::{
        cuda_backend, device_count, is_available, unavailable_reason, CudaBackend, MemoryStats,
    };
}
pub use verjus_nn as nn;
pub use verjus_rf as rf;

/// The backend that computes on `device`.
///
/// `Device::Cpu` is the native backend, `Device::Cuda(n)` the CUDA backend of
/// device `n` (one shared instance per device). Where CUDA cannot be used the
/// error ([`Error::Device`]) names what is missing: the driver, cuBLAS, cuDNN
/// or NVRTC, or the device.
pub fn backend(device: Device) -> Result<BackendRef> {
    match device {
        Device::Cpu => Ok(verjus_native::backend()),
        Device::Cuda(n) => verjus_cuda::backend(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_backend_by_device() {
        assert_eq!(backend(Device::Cpu).unwrap().device(), Device::Cpu);
        match backend(Device::Cuda(0)) {
            Ok(be) => assert_eq!(be.device(), Device::Cuda(0)),
            Err(e) => {
                let err = e.to_string();
                assert!(!cuda::is_available());
                assert!(err.contains("cuda:0") && err.contains(".so"), "{err}");
            }
        }
    }
}
