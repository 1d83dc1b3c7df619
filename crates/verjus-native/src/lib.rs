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
mod dropout;
mod elementwise;
mod gemm;
mod index;
mod loss;
mod lstm;
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

/// Runs `work` on one of the backend's worker threads and returns its result.
///
/// An op called from another thread (Python's, say) hands its parallel loops to
/// the pool and sleeps until they are done: a wake-up across threads per op,
/// which costs more than a small op computes. A sequence of many ops (a tape's
/// backward pass) run here pays that once; its ops' loops then split among the
/// workers directly.
pub fn on_worker<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| work())
}
