//! verjus-core: the vocabulary every other verjus crate shares.
//!
//! - [`DType`], [`Shape`] (checked: an absurd shape is an error), [`Device`] and
//!   [`Tensor`] (dense, row-major, on one device; [`HostView`] borrows host
//!   memory read-only, without a copy);
//! - the [`Backend`] trait: the op set a device implements, called through the
//!   validating functions in [`ops`];
//! - [`rng`]: the Philox-4x32-10 stream all backends share, so random draws and
//!   dropout masks are the same on every device;
//! - [`grad`]: each op's gradient rule, written once into caller-provided
//!   tensors, which both the tape and the static graph's layers call;
//! - [`autograd`]: an eager tape for the frontend, built on the same ops;
//! - [`optim`]: the optimizers (update rules, schedules, clipping) that the
//!   static graph's solver and the frontend's optimizers share;
//! - one [`Error`] type.
//!
//! Backends live in their own crates (`verjus-native`, `verjus-cuda`) and are
//! chosen at run time by [`Device`].

pub mod autograd;
mod backend;
pub mod collective;
mod device;
mod dtype;
mod error;
pub mod grad;
mod host_memory;
mod host_pool;
pub mod math;
pub mod ops;
pub mod optim;
pub mod rng;
mod shape;
mod tensor;
mod view;

pub use backend::{scoped, Backend, BackendRef};
pub use collective::{Collective, CollectiveRef, ReduceOp, Solo};
pub use device::Device;
pub use dtype::{DType, Element};
pub use error::{Error, Result};
/// The `half` crate, whose `bf16` and `f16` are the elements of [`DType::BF16`] and [`DType::F16`].
pub use half;
pub use host_memory::{host_memory_stats, reset_host_peak, HostMemoryStats};
pub use host_pool::pooled_bytes;
pub use shape::{Shape, MAX_ELEMENTS, MAX_RANK};
pub use tensor::{DeviceStorage, HostData, Storage, Tensor};
pub use view::{BorrowedHost, HostView};
