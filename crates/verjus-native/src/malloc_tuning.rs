//! Keeps freed host memory in the process for the next allocation (glibc).
//!
//! An eager step allocates and frees many buffers of some hundred KB to some
//! MB (each op's output, each gradient). glibc hands blocks above a threshold
//! to `mmap` and gives freed memory at the top of a heap back to the kernel, so
//! the same buffers came back step after step as fresh pages: one page fault
//! per 4 KiB, which took a twelfth of the RF Conformer's step (`perf`:
//! `exc_page_fault`) and 7 ms of its 51 ms backward. Raising the two
//! thresholds (as `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...` would)
//! keeps freed blocks in the heaps for reuse. The cost: memory a process has
//! freed stays its own until it exits, up to [`TRIM_THRESHOLD`] at the top of
//! a heap.

/// Blocks up to this size come from the heaps rather than their own mappings.
const MMAP_THRESHOLD: libc::c_int = 256 << 20;

/// Free memory at the top of a heap kept before any is given back.
const TRIM_THRESHOLD: libc::c_int = 1 << 30;

/// Sets both thresholds, once per process.
pub(crate) fn keep_freed_memory() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `mallopt` only changes glibc's allocation parameters; both
        // values are in range, and a refusal (return 0) leaves the defaults.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
        }
    });
}
