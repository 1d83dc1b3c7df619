//! The tensors the tape keeps for backward, counted: bytes held now and the
//! high-water mark since the last [`reset_tape_saved_peak`].
//!
//! Memory is measured, not assumed: the allocator's counters
//! ([`crate::host_memory_stats`], the CUDA allocator's) say how much a step
//! holds, these say how much of it the graph holds *for backward*, so a test
//! can show that a gradient checkpoint scope keeps no derived weight per step.
//! Every tensor a node keeps goes through a [`Saved`]: an input value its
//! backward reads ([`Source::Kept`](super::checkpoint::Source), also a
//! replay's kept sources) and a tensor its backward owns (a softmax's output,
//! an LSTM's reserve). A tensor kept by several nodes counts once (by
//! address); the value of a leaf that requires a gradient (a parameter) is
//! not counted, since its owner holds it anyway. Sizes are elements times
//! dtype size, on whatever device the tensor lives: the counters are the
//! process's, over all devices. A lock and a map update per saved tensor are
//! all it costs.

use crate::Tensor;
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Bytes the tape keeps for backward now, and the most there were since the
/// last [`reset_tape_saved_peak`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapeSavedStats {
    /// Bytes of the distinct tensors live graph nodes keep for backward.
    pub current: usize,
    /// The high-water mark of `current` since the last reset.
    pub peak: usize,
}

/// The saved tensors by address: how many [`Saved`]s hold each and its size.
#[derive(Default)]
struct Registry {
    held: HashMap<usize, (usize, usize)>,
    stats: TapeSavedStats,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn registry() -> MutexGuard<'static, Option<Registry>> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The tape's counters now.
pub fn tape_saved_stats() -> TapeSavedStats {
    registry().as_ref().map(|r| r.stats).unwrap_or_default()
}

/// Starts a new high-water mark at the current bytes (at the start of a step).
pub fn reset_tape_saved_peak() {
    if let Some(r) = registry().as_mut() {
        r.stats.peak = r.stats.current;
    }
}

/// A tensor a graph node keeps for backward, counted while it is held.
pub(crate) struct Saved {
    tensor: Arc<Tensor>,
    counted: bool,
}

impl Saved {
    /// Keeps `tensor` and counts it (once, however many nodes keep it).
    pub(crate) fn new(tensor: Arc<Tensor>) -> Saved {
        let bytes = tensor.numel() * tensor.dtype().size_in_bytes();
        let mut guard = registry();
        let r = guard.get_or_insert_with(Registry::default);
        let entry = r.held.entry(address(&tensor)).or_insert((0, bytes));
        entry.0 += 1;
        if entry.0 == 1 {
            r.stats.current += bytes;
            r.stats.peak = r.stats.peak.max(r.stats.current);
        }
        Saved {
            tensor,
            counted: true,
        }
    }

    /// Keeps a tensor the op made and owns.
    pub(crate) fn owned(tensor: Tensor) -> Saved {
        Saved::new(Arc::new(tensor))
    }

    /// Keeps a leaf's value without counting it (its owner holds it anyway).
    pub(crate) fn leaf(tensor: Arc<Tensor>) -> Saved {
        Saved {
            tensor,
            counted: false,
        }
    }

    /// The kept tensor.
    pub(crate) fn tensor(&self) -> &Arc<Tensor> {
        &self.tensor
    }
}

impl Deref for Saved {
    type Target = Tensor;

    fn deref(&self) -> &Tensor {
        &self.tensor
    }
}

impl Drop for Saved {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let mut guard = registry();
        let Some(r) = guard.as_mut() else { return };
        let key = address(&self.tensor);
        if let Some(entry) = r.held.get_mut(&key) {
            entry.0 -= 1;
            if entry.0 == 0 {
                r.stats.current -= entry.1;
                r.held.remove(&key);
            }
        }
    }
}

fn address(tensor: &Arc<Tensor>) -> usize {
    Arc::as_ptr(tensor) as usize
}
