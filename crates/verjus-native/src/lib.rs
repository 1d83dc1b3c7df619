//! verjus-native: the CPU backend.
//!
//! Implements the whole [`verjus_core::Backend`] op set on host memory:
//! GEMM through the `gemm` crate (AVX-512 kernels, rayon threads), convolution as
//! im2col + GEMM, and the remaining ops as rayon-parallel loops over contiguous
//! slices. Each file holds one group of ops; [`NativeBackend`]'s trait
//! implementation in `backend.rs` only dispatches to them.

mod attention;
mod backend;
mod broadcast;
mod concat;
mod conv;
mod ctc;
mod depthwise;
mod dropout;
mod elementwise;
mod gemm;
mod index;
mod layer_norm;
mod loss;
mod lstm;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod malloc_tuning;
mod memory;
mod optim;
mod parallel;
mod permute;
mod pool;
mod random_batch;
mod reduce;
mod scratch;
mod select;
mod simd;
mod softmax;
mod transpose;

pub use backend::NativeBackend;

use std::sync::Arc;
use verjus_core::BackendRef;

/// The shared native backend.
pub fn backend() -> BackendRef {
    Arc::new(NativeBackend::new())
}
