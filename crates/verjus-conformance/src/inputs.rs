//! Deterministic pseudo-random inputs, drawn from the shared Philox stream.
//!
//! Every check names a seed, so a failure reproduces exactly on every machine and
//! every backend. Besides plain uniform data there are generators that shape the
//! data for what a check needs: ties (to test first-maximum and tie-splitting
//! rules), distinct well-spaced values (to keep finite differences away from the
//! kinks of max and pooling) and values away from zero (for relu, abs, recip).

use crate::array::{numel, Array};
use verjus_core::rng;

/// Uniform on `[low, high)`.
pub fn uniform(seed: u64, dims: &[usize], low: f32, high: f32) -> Array {
    let data = (0..numel(dims))
        .map(|i| low + (high - low) * rng::unit_uniform(rng::word_at(seed, 0, i)))
        .collect();
    Array::new(dims, data)
}

/// Multiples of `step` in `[-levels * step, levels * step]`: many exact ties.
pub fn quantized(seed: u64, dims: &[usize], levels: u32, step: f32) -> Array {
    let span = 2 * levels + 1;
    let data = (0..numel(dims))
        .map(|i| ((rng::word_at(seed, 0, i) % span) as f32 - levels as f32) * step)
        .collect();
    Array::new(dims, data)
}

/// Distinct values `k * spacing - shift` in a shuffled order: no two elements are
/// closer than `spacing`, and the values are centred on zero.
pub fn distinct(seed: u64, dims: &[usize], spacing: f32) -> Array {
    let n = numel(dims);
    let mut order: Vec<usize> = (0..n).collect();
    // Fisher–Yates with Philox words.
    for i in (1..n).rev() {
        let j = rng::word_at(seed, 0, i) as usize % (i + 1);
        order.swap(i, j);
    }
    let shift = spacing * n as f32 / 2.0;
    let data = order.iter().map(|&k| k as f32 * spacing - shift).collect();
    Array::new(dims, data)
}

/// Magnitudes uniform on `[min_abs, max_abs)` with random signs.
pub fn away_from_zero(seed: u64, dims: &[usize], min_abs: f32, max_abs: f32) -> Array {
    let mut a = uniform(seed, dims, min_abs, max_abs);
    for (i, v) in a.data.iter_mut().enumerate() {
        if rng::word_at(seed ^ 0x5eed, 0, i) & 1 == 1 {
            *v = -*v;
        }
    }
    a
}

/// `count` indices uniform on `[0, len)` (`len` must be positive unless `count` is 0).
pub fn indices(seed: u64, count: usize, len: usize) -> Vec<i64> {
    (0..count)
        .map(|i| (rng::word_at(seed, 0, i) as usize % len) as i64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_respect_their_ranges() {
        let u = uniform(1, &[100], -2.0, 3.0);
        assert!(u.data.iter().all(|v| (-2.0..3.0).contains(v)));
        let q = quantized(2, &[100], 2, 0.5);
        assert!(q
            .data
            .iter()
            .all(|v| [-1.0, -0.5, 0.0, 0.5, 1.0].contains(v)));
        let a = away_from_zero(3, &[100], 0.25, 1.0);
        assert!(a.data.iter().all(|v| (0.25..1.0).contains(&v.abs())));
        assert!(a.data.iter().any(|&v| v < 0.0) && a.data.iter().any(|&v| v > 0.0));
        assert!(indices(4, 50, 7).iter().all(|i| (0..7).contains(i)));
    }

    #[test]
    fn distinct_values_are_spaced() {
        let d = distinct(5, &[4, 6], 0.1);
        let mut v = d.data.clone();
        v.sort_by(f32::total_cmp);
        assert!(v.windows(2).all(|w| w[1] - w[0] > 0.099), "{v:?}");
        assert_ne!(d.data, v, "the values should be shuffled");
    }
}
