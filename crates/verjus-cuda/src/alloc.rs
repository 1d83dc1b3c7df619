//! The caching device allocator.
//!
//! `cuMemAlloc`/`cuMemFree` synchronise and cost tens of microseconds; a
//! training step allocates and frees the same sizes every step. Freed blocks
//! therefore go to a free list keyed by their *size class* and are handed out
//! again for any request of the same class. Classes are multiples of 512 bytes
//! up to 1 MiB and, above that, four steps per power of two (at most 25 %
//! slack). Reuse is safe without events because all work runs on one stream
//! (see `device.rs`). When the driver runs out of memory the cache is emptied
//! and the allocation retried once.
//!
//! [`Pool`] is the bookkeeping alone (size classes, free lists, counters), so it
//! is tested without a GPU; [`Allocator`] adds the driver calls.

use crate::device::Gpu;
use cudarc::driver::result as drv;
use cudarc::driver::sys::CUdeviceptr;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use verjus_core::Result;

const SMALL_STEP: usize = 512;
const SMALL_LIMIT: usize = 1 << 20;

/// The size class of a request of `bytes` (0 for an empty request).
pub(crate) fn size_class(bytes: usize) -> usize {
    if bytes <= SMALL_LIMIT {
        return bytes.div_ceil(SMALL_STEP) * SMALL_STEP;
    }
    // Four classes per octave: 2^k * {1, 1.25, 1.5, 1.75}.
    let octave = usize::BITS - 1 - bytes.leading_zeros();
    let quarter = 1usize << (octave - 2);
    bytes.div_ceil(quarter).saturating_mul(quarter)
}

/// Memory counters in bytes, as size classes (what the blocks really occupy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Held by live tensors now.
    pub in_use: usize,
    /// The most `in_use` has been since the last reset (the high-water mark).
    pub peak_in_use: usize,
    /// Obtained from the driver (in use plus cached).
    pub reserved: usize,
}

/// Free lists and counters; addresses are opaque numbers here.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    free: HashMap<usize, Vec<CUdeviceptr>>,
    stats: MemoryStats,
}

impl Pool {
    /// A cached block of class `class`, counted as in use, if there is one.
    pub fn take(&mut self, class: usize) -> Option<CUdeviceptr> {
        let ptr = self.free.get_mut(&class)?.pop()?;
        self.mark_used(class);
        Some(ptr)
    }

    /// Counts a block fresh from the driver as reserved and in use.
    pub fn add_new(&mut self, class: usize) {
        self.stats.reserved += class;
        self.mark_used(class);
    }

    fn mark_used(&mut self, class: usize) {
        self.stats.in_use += class;
        self.stats.peak_in_use = self.stats.peak_in_use.max(self.stats.in_use);
    }

    /// Returns a block to its free list.
    pub fn give_back(&mut self, class: usize, ptr: CUdeviceptr) {
        self.stats.in_use -= class;
        self.free.entry(class).or_default().push(ptr);
    }

    /// Empties the free lists, returning the blocks for the driver to free.
    pub fn drain(&mut self) -> Vec<CUdeviceptr> {
        let mut out = Vec::new();
        for (class, ptrs) in self.free.drain() {
            self.stats.reserved -= class * ptrs.len();
            out.extend(ptrs);
        }
        out
    }

    pub fn stats(&self) -> MemoryStats {
        self.stats
    }

    pub fn reset_peak(&mut self) {
        self.stats.peak_in_use = self.stats.in_use;
    }
}

/// The allocator of one device.
#[derive(Debug)]
pub(crate) struct Allocator {
    gpu: Arc<Gpu>,
    pool: Mutex<Pool>,
}

/// A device allocation; returns to the allocator's cache when dropped.
#[derive(Debug)]
pub(crate) struct Block {
    ptr: CUdeviceptr,
    class: usize,
    owner: Arc<Allocator>,
}

impl Block {
    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if self.class > 0 {
            self.owner.pool().give_back(self.class, self.ptr);
        }
    }
}

impl Allocator {
    pub fn new(gpu: Arc<Gpu>) -> Arc<Self> {
        Arc::new(Allocator {
            gpu,
            pool: Mutex::new(Pool::default()),
        })
    }

    fn pool(&self) -> MutexGuard<'_, Pool> {
        // A panic while holding the lock cannot leave the counters
        // inconsistent in a way that matters more than losing the cache.
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A block of at least `bytes` (uninitialised); the context must be current.
    pub fn alloc(self: &Arc<Self>, op: &str, bytes: usize) -> Result<Block> {
        let class = size_class(bytes);
        let block = |ptr| Block {
            ptr,
            class,
            owner: Arc::clone(self),
        };
        if class == 0 {
            return Ok(block(0));
        }
        if let Some(ptr) = self.pool().take(class) {
            return Ok(block(ptr));
        }
        // SAFETY: the caller made the context current; the size is positive.
        let fresh = unsafe { drv::malloc_sync(class) };
        let ptr = match fresh {
            Ok(ptr) => ptr,
            Err(_) => {
                self.release_cache(op)?;
                // SAFETY: as above.
                unsafe { drv::malloc_sync(class) }.map_err(|e| {
                    let s = self.stats();
                    self.gpu.error(
                        op,
                        &format!(
                            "allocating {bytes} bytes ({} bytes in use, {} reserved)",
                            s.in_use, s.reserved
                        ),
                        e,
                    )
                })?
            }
        };
        self.pool().add_new(class);
        Ok(block(ptr))
    }

    /// Frees every cached block to the driver (after the stream is idle).
    pub fn release_cache(&self, op: &str) -> Result<()> {
        self.gpu.sync(op)?;
        let blocks = self.pool().drain();
        for ptr in blocks {
            // SAFETY: the block came from cuMemAlloc, is in no tensor (it was
            // in the free list) and the stream is idle.
            unsafe { drv::free_sync(ptr) }.map_err(|e| self.gpu.error(op, "cuMemFree", e))?;
        }
        Ok(())
    }

    pub fn stats(&self) -> MemoryStats {
        self.pool().stats()
    }

    pub fn reset_peak(&self) {
        self.pool().reset_peak()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes() {
        assert_eq!(size_class(0), 0);
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(512), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(1 << 20), 1 << 20);
        // Above 1 MiB: quarters of the octave.
        assert_eq!(size_class((1 << 20) + 1), (1 << 20) + (1 << 18));
        assert_eq!(size_class(3 << 20), 3 << 20);
        assert_eq!(size_class((7 << 20) + 5), 8 << 20);
        for bytes in [1usize, 4000, 1 << 20, (1 << 20) + 7, 123_456_789, 1 << 34] {
            let c = size_class(bytes);
            assert!(
                c >= bytes && c - bytes <= bytes / 4 + SMALL_STEP,
                "{bytes} -> {c}"
            );
            assert_eq!(size_class(c), c, "classes are fixed points");
        }
    }

    #[test]
    fn pool_reuses_and_counts() {
        let mut p = Pool::default();
        assert_eq!(p.take(1024), None);
        p.add_new(1024);
        p.add_new(512);
        assert_eq!(p.stats().in_use, 1536);
        p.give_back(1024, 0xA000);
        assert_eq!(p.take(512), None, "another class is not reused");
        assert_eq!(p.take(1024), Some(0xA000));
        assert_eq!(p.stats().peak_in_use, 1536);
        p.give_back(1024, 0xA000);
        p.give_back(512, 0xB000);
        let s = p.stats();
        assert_eq!((s.in_use, s.peak_in_use, s.reserved), (0, 1536, 1536));
        p.reset_peak();
        assert_eq!(p.stats().peak_in_use, 0);
        let mut freed = p.drain();
        freed.sort();
        assert_eq!(freed, vec![0xA000, 0xB000]);
        assert_eq!(p.stats().reserved, 0);
    }
}
