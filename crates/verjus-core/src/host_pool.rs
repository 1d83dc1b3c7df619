//! Recycled host buffers for outputs that an op overwrites entirely.
//!
//! Eager code (the autograd tape, the RF frontend) allocates a fresh output
//! for every op. Zero-filling it is a full pass over memory that the op then
//! repeats, and for an elementwise op that doubles its cost: `memset` was 7 %
//! of the RF Conformer step's samples, and skipping it through this pool made
//! the step about 9 % faster (docs/benchmarks-history.md, stop 31). So the
//! `f32` buffer of a dropped host tensor comes here rather than back to
//! `malloc`, and [`take`] hands one out for an output that the next op
//! overwrites (`Backend::alloc_output`): its elements are
//! stale values, never uninitialised memory (only buffers whose elements were
//! written are kept), so this is safe Rust.
//!
//! Bounded: buffers of at least [`MIN_ELEMENTS`], at most
//! `VERJUS_HOST_POOL_MB` (default [`DEFAULT_MB`]) MiB kept in all, and a
//! buffer serves a request only up to twice its size. What it costs: the
//! Conformer example's peak RSS was 1.85 GB without the pool, 2.11 GB with
//! 256 MiB and 2.40 GB with 512 MiB (`VERJUS_HOST_POOL_MB=0` turns it off). With
//! `VERJUS_POISON_OUTPUTS=1` (the test scripts set it) every output is filled
//! with NaN first, so that an op which does not write all of its output
//! fails its tests instead of passing on stale or zero values.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Smaller buffers are cheaper to zero than to look up (64 KiB).
pub const MIN_ELEMENTS: usize = 16 * 1024;

/// The pool's bound without `VERJUS_HOST_POOL_MB`.
pub const DEFAULT_MB: usize = 256;

/// Free buffers by capacity, and the bytes they hold.
#[derive(Default)]
struct Pool {
    free: BTreeMap<usize, Vec<Vec<f32>>>,
    bytes: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    free: BTreeMap::new(),
    bytes: 0,
});

/// The settings read from the environment once.
struct Settings {
    limit_bytes: usize,
    poison: bool,
}

fn settings() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        let mb = std::env::var("VERJUS_HOST_POOL_MB")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(DEFAULT_MB);
        let poison = std::env::var("VERJUS_POISON_OUTPUTS").is_ok_and(|v| v.trim() == "1");
        Settings {
            limit_bytes: mb.saturating_mul(1 << 20),
            poison,
        }
    })
}

/// A buffer of `len` elements for an output the caller overwrites entirely:
/// recycled (stale values) when the pool has one of `len..=2 len` capacity,
/// else `None`. With `VERJUS_POISON_OUTPUTS=1` its elements are NaN.
pub(crate) fn take(len: usize) -> Option<Vec<f32>> {
    if len < MIN_ELEMENTS {
        return None;
    }
    let mut v = {
        let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
        let (&capacity, bucket) = pool.free.range_mut(len..=2 * len).next()?;
        let v = bucket.pop().expect("the pool keeps no empty bucket");
        if bucket.is_empty() {
            pool.free.remove(&capacity);
        }
        pool.bytes -= 4 * capacity;
        v
    };
    if v.len() >= len {
        v.truncate(len);
    } else {
        v.resize(len, 0.0);
    }
    poison(&mut v);
    Some(v)
}

/// Keeps `v` for a later [`take`] when it is large enough and the pool has room.
pub(crate) fn give(v: Vec<f32>) {
    let capacity = v.capacity();
    if capacity < MIN_ELEMENTS {
        return;
    }
    let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    if pool.bytes + 4 * capacity > settings().limit_bytes {
        return;
    }
    pool.bytes += 4 * capacity;
    pool.free.entry(capacity).or_default().push(v);
}

/// Fills `v` with NaN when `VERJUS_POISON_OUTPUTS=1`.
pub(crate) fn poison(v: &mut [f32]) {
    if settings().poison {
        v.fill(f32::NAN);
    }
}

/// Bytes the pool holds now (for tests and diagnostics).
pub fn pooled_bytes() -> usize {
    POOL.lock().unwrap_or_else(PoisonError::into_inner).bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_serves_a_request_of_up_to_its_size() {
        // A capacity no other test uses, so that parallel tests do not take it.
        let n = MIN_ELEMENTS + 977;
        let mut v = vec![7.0f32; n];
        v.shrink_to_fit();
        give(v);
        assert!(
            take(n / 2 - 1).is_none_or(|v| v.capacity() != n),
            "more than twice too big"
        );
        let got = take(n - 5).expect("the buffer given");
        assert_eq!((got.len(), got.capacity()), (n - 5, n));
        assert!(got.iter().all(|&x| x == 7.0 || x.is_nan()));
        assert!(take(n - 5).is_none_or(|v| v.capacity() != n), "taken once");
    }
}
