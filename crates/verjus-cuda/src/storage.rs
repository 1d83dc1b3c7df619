//! Tensor storage on a CUDA device, and typed access to it for the ops.

use crate::alloc::Block;
use cudarc::driver::sys::CUdeviceptr;
use std::any::Any;
use verjus_core::{Device, DeviceStorage, Element, Error, HostData, Result, Storage, Tensor};

/// A tensor's elements in device memory (a block of the caching allocator).
#[derive(Debug)]
pub(crate) struct CudaStorage {
    pub device: Device,
    pub block: Block,
}

impl DeviceStorage for CudaStorage {
    fn device(&self) -> Device {
        self.device
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The device address of a tensor this backend made (validation has checked
/// the device, so anything else is an internal error, reported, not a panic).
pub(crate) fn ptr(op: &str, t: &Tensor) -> Result<CUdeviceptr> {
    match t.storage() {
        Storage::Device(d) => d
            .as_any()
            .downcast_ref::<CudaStorage>()
            .map(|s| s.block.ptr())
            .ok_or_else(|| foreign(op, t)),
        _ => Err(foreign(op, t)),
    }
}

/// Like [`ptr`] for an output (the `&mut` documents that the op writes it).
pub(crate) fn ptr_mut(op: &str, t: &mut Tensor) -> Result<CUdeviceptr> {
    ptr(op, t)
}

fn foreign(op: &str, t: &Tensor) -> Error {
    Error::invalid(
        op,
        format!(
            "a tensor on {} is not storage of the CUDA backend",
            t.device()
        ),
    )
}

/// The bytes of a host tensor's elements.
pub(crate) fn host_bytes(t: &Tensor) -> Result<&[u8]> {
    fn bytes<T: Element>(v: &[T]) -> &[u8] {
        // SAFETY: f32, i64, i32, bf16 and f16 have no padding and every byte pattern of
        // them is a valid u8; the length covers exactly the elements.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
    }
    Ok(match t.dtype() {
        verjus_core::DType::F32 => bytes(t.as_slice::<f32>()?),
        verjus_core::DType::I64 => bytes(t.as_slice::<i64>()?),
        verjus_core::DType::I32 => bytes(t.as_slice::<i32>()?),
        verjus_core::DType::BF16 => bytes(t.as_slice::<verjus_core::half::bf16>()?),
        verjus_core::DType::F16 => bytes(t.as_slice::<verjus_core::half::f16>()?),
        other => return Err(Error::unsupported(format!("upload of {other}"), "cuda")),
    })
}

/// The bytes of host data, writable (for downloads).
pub(crate) fn host_bytes_mut(h: &mut HostData) -> &mut [u8] {
    fn bytes<T: Element>(v: &mut [T]) -> &mut [u8] {
        // SAFETY: as in `host_bytes`; any byte pattern is a valid element.
        unsafe {
            std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v))
        }
    }
    match h {
        HostData::F32(v) => bytes(v),
        HostData::I64(v) => bytes(v),
        HostData::I32(v) => bytes(v),
        HostData::BF16(v) => bytes(v),
        HostData::F16(v) => bytes(v),
    }
}
