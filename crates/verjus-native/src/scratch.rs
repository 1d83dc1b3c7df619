//! A per-thread scratch buffer of f32, kept between calls.
//!
//! Ops that need a temporary as large as their operands (the convolution's
//! column buffer, the LSTM backward's gate gradients) borrow it here, so that
//! a training loop neither allocates nor page-faults once the largest call has
//! run.

use std::cell::Cell;

thread_local! {
    /// Each thread's scratch buffer, kept between calls so that a training loop
    /// neither allocates nor page-faults per convolution or LSTM backward.
    static SCRATCH: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Buffers larger than this many elements (64 MiB) are freed after use instead of kept.
const KEEP_LIMIT: usize = 16 << 20;

/// A thread's scratch buffer, borrowed for one piece of work and returned on drop.
/// Taking (not borrowing) the buffer makes re-entrance on the same thread safe:
/// the second user just allocates its own.
pub(crate) struct Scratch(pub(crate) Vec<f32>);

impl Scratch {
    /// At least `len` elements (contents unspecified); `None` when memory is short.
    pub(crate) fn take(len: usize) -> Option<Self> {
        let mut v = SCRATCH.take();
        if v.len() < len {
            v.clear();
            v.try_reserve_exact(len).ok()?;
            v.resize(len, 0.0);
        }
        Some(Scratch(v))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.0);
        if v.capacity() <= KEEP_LIMIT {
            SCRATCH.set(v);
        }
    }
}
