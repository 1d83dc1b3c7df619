//! Reference inverted dropout.
//!
//! Element `i` is kept when `rng::keeps(rng::word_at(seed, offset, i), threshold)`
//! with `threshold = rng::dropout_threshold(p)`; kept elements are scaled by
//! `1 / (1 - p)`, dropped ones are 0. The backward op applies the same mask to
//! `dy`, so this one function is the reference for both directions.

use crate::array::Array;
use verjus_core::rng;

/// `y = x * mask / (1 - p)` with the mask of `(seed, offset)`.
pub fn dropout(x: &Array, p: f32, seed: u64, offset: u64) -> Array {
    let threshold = rng::dropout_threshold(p);
    let scale = 1.0 / (1.0 - p);
    let data = x
        .data
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if rng::keeps(rng::word_at(seed, offset, i), threshold) {
                v * scale
            } else {
                0.0
            }
        })
        .collect();
    Array::new(x.dims.clone(), data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_about_one_minus_p_and_scales() {
        let x = Array::new([20_000], vec![1.0; 20_000]);
        assert_eq!(dropout(&x, 0.0, 3, 0), x);
        let y = dropout(&x, 0.25, 3, 0);
        let kept = y.data.iter().filter(|&&v| v != 0.0).count();
        assert!((kept as f64 / 20_000.0 - 0.75).abs() < 0.02, "{kept}");
        assert!(y
            .data
            .iter()
            .all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
        // Another offset draws another mask.
        assert_ne!(dropout(&x, 0.5, 3, 0), dropout(&x, 0.5, 3, 1));
    }
}
