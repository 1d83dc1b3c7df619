//! Host transfers through pinned (page-locked) staging memory.
//!
//! Copies from pageable memory are staged by the driver through its own
//! buffers and cannot overlap with computation; copies from pinned memory are
//! true DMA and asynchronous. Uploads copy the host data into one of a few
//! pinned chunks and queue the transfer; a chunk is reused once the event
//! recorded after its last transfer has completed, so an upload normally does
//! not wait for the GPU at all. Downloads stage through the same chunks and
//! wait for each (the host is about to read the values).

use crate::device::Gpu;
use cudarc::driver::result as drv;
use cudarc::driver::sys::{self, CUdeviceptr};
use std::sync::{Arc, Mutex};
use verjus_core::Result;

/// Bytes per pinned chunk.
const CHUNK: usize = 4 << 20;
/// Chunks in the ring.
const CHUNKS: usize = 4;

#[derive(Debug)]
struct Chunk {
    host: *mut u8,
    /// Recorded after the last transfer that used `host`.
    done: sys::CUevent,
}

#[derive(Debug)]
struct Ring {
    chunks: Vec<Chunk>,
    next: usize,
}

/// The staging ring of one device.
#[derive(Debug)]
pub(crate) struct Staging {
    gpu: Arc<Gpu>,
    ring: Mutex<Ring>,
}

// SAFETY: the raw host pointers and events are only touched with the ring's
// lock held, and pinned memory may be used from any thread.
unsafe impl Send for Staging {}
// SAFETY: as above.
unsafe impl Sync for Staging {}

/// The pieces `(offset, length)` a transfer of `bytes` is cut into.
pub(crate) fn pieces(bytes: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..bytes)
        .step_by(CHUNK)
        .map(move |off| (off, CHUNK.min(bytes - off)))
}

impl Staging {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        Staging {
            gpu,
            ring: Mutex::new(Ring {
                chunks: Vec::new(),
                next: 0,
            }),
        }
    }

    /// The next chunk, allocated on first use, once its last transfer is done.
    fn next_chunk<'a>(&self, op: &str, ring: &'a mut Ring) -> Result<&'a Chunk> {
        if ring.chunks.len() < CHUNKS {
            // SAFETY: the context is current (callers bind first).
            let host = unsafe { drv::malloc_host(CHUNK, 0) }
                .map_err(|e| self.gpu.error(op, "cuMemHostAlloc", e))?
                as *mut u8;
            let done = drv::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
                .map_err(|e| self.gpu.error(op, "cuEventCreate", e))?;
            ring.chunks.push(Chunk { host, done });
        }
        let i = ring.next % ring.chunks.len();
        ring.next = ring.next.wrapping_add(1);
        let chunk = &ring.chunks[i];
        // SAFETY: the event is valid; waiting on a never-recorded event returns at once.
        unsafe { drv::event::synchronize(chunk.done) }
            .map_err(|e| self.gpu.error(op, "cuEventSynchronize", e))?;
        Ok(chunk)
    }

    /// Queues `dst[..src.len()] = src` (bytes); returns before the copy is done.
    pub fn upload(&self, op: &str, src: &[u8], dst: CUdeviceptr) -> Result<()> {
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        for (off, len) in pieces(src.len()) {
            let chunk = self.next_chunk(op, &mut ring)?;
            // SAFETY: `host` holds CHUNK >= len bytes and no transfer uses it
            // (its event completed); `dst + off .. + len` lies in the
            // destination allocation (callers size it from the tensor).
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr().add(off), chunk.host, len);
                let staged = std::slice::from_raw_parts(chunk.host, len);
                drv::memcpy_htod_async(dst + off as u64, staged, self.gpu.stream())
                    .map_err(|e| self.gpu.error(op, "cuMemcpyHtoDAsync", e))?;
                drv::event::record(chunk.done, self.gpu.stream())
                    .map_err(|e| self.gpu.error(op, "cuEventRecord", e))?;
            }
        }
        Ok(())
    }

    /// `dst = src[..dst.len()]` (bytes), after all queued work; waits.
    pub fn download(&self, op: &str, src: CUdeviceptr, dst: &mut [u8]) -> Result<()> {
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        for (off, len) in pieces(dst.len()) {
            let chunk = self.next_chunk(op, &mut ring)?;
            // SAFETY: as in `upload`, in the other direction; the event wait
            // below makes the copy complete before the host reads `host`.
            unsafe {
                let staged = std::slice::from_raw_parts_mut(chunk.host, len);
                drv::memcpy_dtoh_async(staged, src + off as u64, self.gpu.stream())
                    .map_err(|e| self.gpu.error(op, "cuMemcpyDtoHAsync", e))?;
                drv::event::record(chunk.done, self.gpu.stream())
                    .map_err(|e| self.gpu.error(op, "cuEventRecord", e))?;
                drv::event::synchronize(chunk.done)
                    .map_err(|e| self.gpu.error(op, "cuEventSynchronize", e))?;
                std::ptr::copy_nonoverlapping(chunk.host, dst.as_mut_ptr().add(off), len);
            }
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let ring = self.ring.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the chunks came from cuMemHostAlloc / cuEventCreate; waiting
        // for each event first means no transfer still uses the memory.
        // Errors cannot be reported from a destructor.
        unsafe {
            let _ = self.gpu.bind("drop");
            for c in ring.chunks.drain(..) {
                let _ = drv::event::synchronize(c.done);
                let _ = drv::event::destroy(c.done);
                let _ = drv::free_host(c.host as *mut std::ffi::c_void);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_transfer() {
        assert_eq!(pieces(0).count(), 0);
        assert_eq!(pieces(10).collect::<Vec<_>>(), vec![(0, 10)]);
        let p: Vec<_> = pieces(2 * CHUNK + 3).collect();
        assert_eq!(p, vec![(0, CHUNK), (CHUNK, CHUNK), (2 * CHUNK, 3)]);
    }
}
