//! Reference random fills from the shared Philox stream.
//!
//! Uniform: `low + (high - low) * rng::unit_uniform(rng::word_at(seed, offset, i))`.
//! Normal: `mean + std * rng::normal_at(seed, offset, i)`.

use verjus_core::ops::Distribution;
use verjus_core::rng;

/// The `n` elements of a draw at `(seed, offset)`.
pub fn random(n: usize, dist: Distribution, seed: u64, offset: u64) -> Vec<f32> {
    (0..n)
        .map(|i| match dist {
            Distribution::Uniform { low, high } => {
                low + (high - low) * rng::unit_uniform(rng::word_at(seed, offset, i))
            }
            Distribution::Normal { mean, std } => mean + std * rng::normal_at(seed, offset, i),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_in_range_and_offset_shifts_by_blocks() {
        let u = random(
            1000,
            Distribution::Uniform {
                low: -1.0,
                high: 3.0,
            },
            9,
            0,
        );
        assert!(u.iter().all(|v| (-1.0..3.0).contains(v)));
        // Element i + 4 at offset 0 is element i at offset 1 (one block = four words).
        let shifted = random(
            4,
            Distribution::Uniform {
                low: 0.0,
                high: 1.0,
            },
            9,
            1,
        );
        let base = random(
            8,
            Distribution::Uniform {
                low: 0.0,
                high: 1.0,
            },
            9,
            0,
        );
        assert_eq!(shifted, base[4..]);
        let z = random(
            2,
            Distribution::Normal {
                mean: 5.0,
                std: 0.0,
            },
            9,
            0,
        );
        assert_eq!(z, vec![5.0, 5.0]);
    }
}
