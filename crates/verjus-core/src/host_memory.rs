//! Counters of the host memory that tensors own: bytes held now and the
//! high-water mark since the last [`reset_host_peak`].
//!
//! Memory is measured, not assumed: a test of a memory-saving feature (the
//! tape's gradient checkpoint scopes) asserts on these numbers. Every host
//! tensor that owns its elements ([`crate::Storage::Host`]) adds its size when
//! it is made and takes it off when it is dropped; views borrow and count
//! nothing, device tensors are their backend's to count (the CUDA allocator
//! has its own counters). Two relaxed atomics per tensor are all it costs.

use std::sync::atomic::{AtomicUsize, Ordering};

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Host bytes owned by live tensors, and the most there were since the last reset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostMemoryStats {
    /// Bytes owned by live host tensors now.
    pub current: usize,
    /// The high-water mark of `current` since the last [`reset_host_peak`].
    pub peak: usize,
}

/// The host counters now.
pub fn host_memory_stats() -> HostMemoryStats {
    HostMemoryStats {
        current: CURRENT.load(Ordering::Relaxed),
        peak: PEAK.load(Ordering::Relaxed),
    }
}

/// Starts a new high-water mark at the current bytes (at the start of a step).
pub fn reset_host_peak() {
    PEAK.store(CURRENT.load(Ordering::Relaxed), Ordering::Relaxed);
}

pub(crate) fn allocated(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

pub(crate) fn freed(bytes: usize) {
    CURRENT.fetch_sub(bytes, Ordering::Relaxed);
}
