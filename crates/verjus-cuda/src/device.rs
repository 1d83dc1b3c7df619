//! One CUDA device: its primary context, the one stream every op is issued on,
//! and what the kernels need to know about it (compute capability, SM count).
//!
//! Everything runs on a single non-blocking stream per device, so ops execute in
//! the order they are issued and the host never waits, except where it reads a
//! value (downloads, `synchronize`, sequence lengths). Because the stream orders all
//! work, memory freed to the caching allocator can be handed to the next op at
//! once: any later use of it is queued behind every earlier use.
//!
//! The driver keeps a *current context* per host thread; every entry point of
//! the backend calls [`Gpu::bind`] first, so the backend can be used from any
//! thread (the static graph's Runner serves from many).

use crate::error::device_error;
use cudarc::driver::result as drv;
use cudarc::driver::sys;
use std::ffi::c_void;
use verjus_core::{Device, Result};

/// The device, its context and its stream. Dropped after everything that uses
/// them (the allocator, library handles and kernel modules hold an `Arc<Gpu>`).
#[derive(Debug)]
pub(crate) struct Gpu {
    pub device: Device,
    cu_device: sys::CUdevice,
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    /// Compute capability (major, minor).
    pub arch: (u32, u32),
    /// Number of streaming multiprocessors (sizes grids).
    pub sm_count: u32,
    pub name: String,
}

// SAFETY: the context and stream handles are plain driver handles that may be
// used from any thread once the context is made current there ([`Gpu::bind`]);
// the driver serialises launches on one stream internally.
unsafe impl Send for Gpu {}
// SAFETY: as above; `Gpu` has no interior mutability of its own.
unsafe impl Sync for Gpu {}

impl Gpu {
    /// Opens device `ordinal` (the driver must be initialised, see `probe`).
    pub fn open(ordinal: usize) -> Result<Gpu> {
        let device = Device::Cuda(ordinal);
        let err = |what: &str, e: drv::DriverError| device_error(device, "open", what, e);
        let index = i32::try_from(ordinal)
            .map_err(|_| crate::error::too_large(device, "open", "device ordinal", ordinal))?;
        let cu_device = drv::device::get(index).map_err(|e| err("cuDeviceGet", e))?;
        // SAFETY: `cu_device` is a valid device handle from cuDeviceGet.
        let ctx = unsafe { drv::primary_ctx::retain(cu_device) }
            .map_err(|e| err("cuDevicePrimaryCtxRetain", e))?;
        // SAFETY: `ctx` was just retained and stays alive until `Drop`.
        unsafe { drv::ctx::set_current(ctx) }.map_err(|e| err("cuCtxSetCurrent", e))?;
        let attr = |a: sys::CUdevice_attribute| -> Result<u32> {
            // SAFETY: a valid device and a valid attribute enum.
            let v = unsafe { drv::device::get_attribute(cu_device, a) }
                .map_err(|e| err("cuDeviceGetAttribute", e))?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        use sys::CUdevice_attribute as A;
        let arch = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let sm_count = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1);
        let name = drv::device::get_name(cu_device).unwrap_or_else(|_| "CUDA device".into());
        let stream = drv::stream::create(drv::stream::StreamKind::NonBlocking)
            .map_err(|e| err("cuStreamCreate", e))?;
        Ok(Gpu {
            device,
            cu_device,
            ctx,
            stream,
            arch,
            sm_count,
            name,
        })
    }

    /// Makes this device's context current on the calling thread.
    pub fn bind(&self, op: &str) -> Result<()> {
        // SAFETY: the context is retained for as long as `self` lives.
        unsafe { drv::ctx::set_current(self.ctx) }
            .map_err(|e| device_error(self.device, op, "cuCtxSetCurrent", e))
    }

    /// The stream all work is issued on.
    pub fn stream(&self) -> sys::CUstream {
        self.stream
    }

    /// Waits until all issued work is done; reports asynchronous kernel faults.
    pub fn sync(&self, op: &str) -> Result<()> {
        // SAFETY: the stream is alive for as long as `self`.
        unsafe { drv::stream::synchronize(self.stream) }
            .map_err(|e| device_error(self.device, op, "cuStreamSynchronize", e))
    }

    /// An error of this device for `op`.
    pub fn error(&self, op: &str, what: &str, e: impl std::fmt::Display) -> verjus_core::Error {
        device_error(self.device, op, what, e)
    }

    /// Launches `f` on the stream with the given grid and block sizes.
    ///
    /// # Safety
    /// `args` must point to values whose types and order match the kernel's
    /// parameters, every device pointer among them must be valid for what the
    /// kernel accesses, and the context must be current (`bind`).
    pub unsafe fn launch(
        &self,
        op: &str,
        f: sys::CUfunction,
        grid: u32,
        block: u32,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: the caller guarantees the arguments; the stream is alive.
        unsafe { drv::launch_kernel(f, (grid, 1, 1), (block, 1, 1), 0, self.stream, args) }
            .map_err(|e| self.error(op, "cuLaunchKernel", e))
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: the handles were created in `open` and nothing else uses
        // them any more (everything that does holds an `Arc<Gpu>`). Errors
        // cannot be reported from a destructor; the process may be exiting.
        unsafe {
            let _ = drv::ctx::set_current(self.ctx);
            let _ = drv::stream::synchronize(self.stream);
            let _ = drv::stream::destroy(self.stream);
            let _ = drv::primary_ctx::release(self.cu_device);
        }
    }
}

/// A kernel argument: the address of a value that lives until the launch returns.
pub(crate) fn arg<T>(value: &T) -> *mut c_void {
    value as *const T as *mut c_void
}
