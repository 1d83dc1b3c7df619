//! verjus-cuda: the CUDA backend.
//!
//! Implements the whole [`verjus_core::Backend`] op set on NVIDIA GPUs: GEMM
//! through cuBLAS, convolution, average pooling and the LSTM over sequences
//! through cuDNN 9, and every other op (an LSTM step included, with cuBLAS)
//! as CUDA C kernels (`src/kernels/*.cu`) compiled at run time by
//! NVRTC for the GPU's own architecture and cached on disk.
//!
//! **Builds everywhere, loads at run time.** The CUDA libraries are opened with
//! `dlopen` when a CUDA device is first asked for (through cudarc's dynamic
//! loading), so this crate builds on machines without CUDA and a program that
//! never uses a GPU never touches them. [`is_available`] and [`backend`] probe
//! the libraries first and report what is missing as an error instead of
//! letting a missing library panic (`probe.rs`).
//!
//! **No per-step waste.** One stream per device with asynchronous launches; the
//! host waits only when it reads values (downloads, `synchronize`, sequence
//! lengths); indices and labels are range-checked on the device and a bad one
//! is reported at the next such read (`deferred/`); a caching allocator
//! (`alloc.rs`) so a training step does not call `cuMemAlloc`; uploads
//! through pinned staging memory (`staging.rs`); cuDNN algorithms and
//! descriptors chosen once per shape (`cudnn/`).
//!
//! **Same numbers.** Random fills and dropout port the Philox stream of
//! `verjus_core::rng`, so a GPU draws the CPU's dropout mask; GEMM and
//! convolution use full fp32 unless TF32 is switched on
//! ([`CudaBackend::set_tf32`] or `VERJUS_CUDA_TF32=1`).

mod alloc;
mod backend;
mod blas;
mod cudnn;
mod deferred;
mod device;
mod elementwise_source;
mod error;
mod kernels;
mod launch;
mod layout;
mod nvrtc_cache;
mod ops;
mod probe;
mod staging;
mod storage;

pub use alloc::MemoryStats;
pub use backend::CudaBackend;
pub use probe::nvrtc_available;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use verjus_core::{BackendRef, Device, Error, Result};

/// Whether a usable CUDA device, driver and the libraries the backend needs
/// (cuBLAS, cuDNN, NVRTC) are present.
pub fn is_available() -> bool {
    probe::probe().is_ok()
}

/// The number of CUDA devices (0 when CUDA is unavailable).
pub fn device_count() -> usize {
    probe::probe().unwrap_or(0)
}

/// Why CUDA is unavailable (`None` when it is available).
pub fn unavailable_reason() -> Option<String> {
    probe::probe().err()
}

/// The backend of CUDA device `ordinal`, shared by every caller (all tensors
/// of a device must use its one stream and allocator). Fails with
/// [`Error::Device`] naming what is missing when CUDA cannot be used.
pub fn cuda_backend(ordinal: usize) -> Result<Arc<CudaBackend>> {
    let device = Device::Cuda(ordinal);
    let count = probe::probe().map_err(|msg| Error::Device {
        device: device.to_string(),
        msg,
    })?;
    if ordinal >= count {
        return Err(Error::Device {
            device: device.to_string(),
            msg: format!("no such device: the CUDA driver reports {count} device(s)"),
        });
    }
    static OPEN: Mutex<Option<HashMap<usize, Arc<CudaBackend>>>> = Mutex::new(None);
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    let open = open.get_or_insert_with(HashMap::new);
    if let Some(be) = open.get(&ordinal) {
        return Ok(Arc::clone(be));
    }
    let be = Arc::new(CudaBackend::open(ordinal)?);
    open.insert(ordinal, Arc::clone(&be));
    Ok(be)
}

/// [`cuda_backend`] as a [`BackendRef`].
pub fn backend(ordinal: usize) -> Result<BackendRef> {
    Ok(cuda_backend(ordinal)?)
}
