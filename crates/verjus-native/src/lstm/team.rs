//! Runs the steps of an LSTM on several threads at once, one barrier a step.
//!
//! Each step is a *stage* cut into *parts* (column blocks of the gates, see
//! `layout`); a stage's parts read what the previous stage wrote, and nothing
//! another part of the same stage writes. Handing every step to rayon (a
//! fork/join per GEMM and per gate loop) cost more than the small per-step
//! products save. Here the threads stay in one loop over the stages instead
//! and meet at a counter between them.
//!
//! Parts are *claimed*, not assigned: a thread takes its own part first (so
//! that its share of the weights stays in its cache) and then any part still
//! unclaimed. A thread that arrives late or not at all (its rayon worker busy
//! elsewhere, or the OS running something else) only means the others do
//! more; no thread ever waits for one that has not started its part, so the
//! loop cannot deadlock whatever the pool does.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Parts a stage can have at most (threads sharing one step).
pub(super) const MAX_PARTS: usize = 32;

/// Busy-wait polls (some hundred microseconds, several steps' work) before a
/// waiting thread starts yielding its core. Yielding early cost more than it
/// saved: on a busy machine a yielding thread can lose its core for
/// milliseconds while the other waits at the next step.
const SPINS: u32 = 1 << 14;

/// A counter alone on its cache line, so that threads polling one do not
/// slow the writers of another.
#[repr(align(128))]
struct Padded(AtomicUsize);

/// Runs `work(stage, part)` for every stage in order and every part of
/// `parts` (at most [`MAX_PARTS`]), the parts of a stage in parallel on up to
/// `parts` threads; stage `s + 1` starts once every part of stage `s` is done.
pub(super) fn run_stages(stages: usize, parts: usize, work: impl Fn(usize, usize) + Sync) {
    let parts = parts.clamp(1, MAX_PARTS);
    let threads = rayon::current_num_threads().min(parts);
    if threads < 2 || stages < 2 {
        for s in 0..stages {
            (0..parts).for_each(|p| work(s, p));
        }
        return;
    }
    let claimed: [Padded; MAX_PARTS] = std::array::from_fn(|_| Padded(AtomicUsize::new(0)));
    let done = Padded(AtomicUsize::new(0));
    let team = Team {
        stages,
        parts,
        claimed: &claimed[..parts],
        done: &done.0,
        work: &work,
    };
    team.launch(0, threads);
}

/// The shared state of one run.
struct Team<'a, F> {
    stages: usize,
    parts: usize,
    /// Per part, the next stage not yet claimed.
    claimed: &'a [Padded],
    /// Parts finished, over all stages.
    done: &'a AtomicUsize,
    work: &'a F,
}

impl<F: Fn(usize, usize) + Sync> Team<'_, F> {
    /// Runs members `lo..hi` on rayon's threads (a join tree, so that nothing
    /// is allocated).
    fn launch(&self, lo: usize, hi: usize) {
        if hi - lo == 1 {
            self.member(lo);
        } else {
            let mid = lo + (hi - lo) / 2;
            rayon::join(|| self.launch(lo, mid), || self.launch(mid, hi));
        }
    }

    /// One thread's loop: at each stage, once the previous one is done, claim
    /// and run parts, its own (`me`) first.
    fn member(&self, me: usize) {
        for s in 0..self.stages {
            self.wait_done(s * self.parts);
            for k in 0..self.parts {
                let p = (me + k) % self.parts;
                let claim = self.claimed[p].0.compare_exchange(
                    s,
                    s + 1,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                );
                if claim.is_ok() {
                    (self.work)(s, p);
                    self.done.fetch_add(1, Ordering::Release);
                }
            }
        }
        // The caller's results must be complete when the run returns.
        self.wait_done(self.stages * self.parts);
    }

    /// Waits until `n` parts are done. Only parts some thread has claimed (and
    /// so is running) can be outstanding here.
    fn wait_done(&self, n: usize) {
        let mut spins = 0u32;
        while self.done.load(Ordering::Acquire) < n {
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// A mutable buffer shared by the parts of a stage, which write disjoint
/// ranges of it (and read only ranges no part of the same stage writes).
#[derive(Clone, Copy)]
pub(super) struct Shared {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: `Shared` is a pointer handed to the threads of one `run_stages`
// call; the stage/part discipline above keeps their accesses disjoint.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    pub(super) fn new(data: &mut [f32]) -> Self {
        Shared {
            ptr: data.as_mut_ptr(),
            len: data.len(),
        }
    }

    /// The start of the buffer, for strided GEMMs.
    pub(super) fn ptr(&self) -> *mut f32 {
        self.ptr
    }

    /// `len` elements from `at`.
    ///
    /// # Safety
    /// No other live reference may overlap the range while the slice lives
    /// (the parts of a stage use disjoint ranges).
    #[allow(clippy::mut_from_ref)] // the point: disjoint pieces for several threads
    pub(super) unsafe fn slice(&self, at: usize, len: usize) -> &mut [f32] {
        assert!(at + len <= self.len, "shared range out of bounds");
        // SAFETY: in bounds (checked); exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_of_every_stage_runs_once_after_the_previous_stage() {
        let (stages, parts) = (50, 3);
        let counts: Vec<AtomicUsize> = (0..stages * parts).map(|_| AtomicUsize::new(0)).collect();
        run_stages(stages, parts, |s, p| {
            if s > 0 {
                for q in 0..parts {
                    assert_eq!(counts[(s - 1) * parts + q].load(Ordering::Acquire), 1);
                }
            }
            counts[s * parts + p].fetch_add(1, Ordering::AcqRel);
        });
        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
    }
}
