//! Dynamic loss scaling for float16 mixed precision (PyTorch's `GradScaler`).
//!
//! Under `"16-mixed"` the products' backward reads the output gradient
//! rounded to float16, whose smallest value is 6e-8: small gradients would
//! flush to zero. So the loss gradient is multiplied by a scale (2^16 at
//! first) before backward, and the update divides it out again (the solver
//! divides the summed gradients by the batch size times the scale: no extra
//! pass). When the scaled gradients overflow (a non-finite global norm), the
//! step is skipped and the scale halved; after 2000 steps in a row without
//! overflow it doubles. Skipped steps are counted for the user to see.

use std::borrow::Borrow;
use verjus_core::optim::GradNorm;
use verjus_core::{Backend, Result, Tensor};

/// The scale a run starts with (PyTorch's `GradScaler` default).
const INITIAL: f32 = 65536.0;
/// Steps without overflow after which the scale doubles.
const GROWTH_INTERVAL: u32 = 2000;
/// The scale's bounds: the solver divides by `batch * scale` as an integer,
/// and 2^24 keeps that exact.
const MIN: f32 = 1.0;
const MAX: f32 = 16_777_216.0;

/// The scale and its history. See the module docs.
#[derive(Debug)]
pub(crate) struct LossScaler {
    scale: f32,
    /// Steps since the last overflow (or growth).
    good: u32,
    skipped: u64,
    norm: GradNorm,
}

impl LossScaler {
    pub(crate) fn new() -> Self {
        LossScaler {
            scale: INITIAL,
            good: 0,
            skipped: 0,
            norm: GradNorm::default(),
        }
    }

    /// The factor the loss gradient is multiplied by.
    pub(crate) fn scale(&self) -> f32 {
        self.scale
    }

    /// Steps skipped so far for overflow.
    pub(crate) fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Whether the step may update with `grads` (scaled gradients): false on
    /// overflow, which halves the scale; true otherwise, which counts towards
    /// growth. Call once per step, after the gradients are summed over ranks.
    pub(crate) fn admit<G: Borrow<Tensor>>(
        &mut self,
        be: &dyn Backend,
        grads: &[G],
    ) -> Result<bool> {
        if !self.norm.compute(be, grads)?.is_finite() {
            self.scale = (self.scale / 2.0).max(MIN);
            self.good = 0;
            self.skipped += 1;
            return Ok(false);
        }
        self.good += 1;
        if self.good == GROWTH_INTERVAL {
            self.scale = (self.scale * 2.0).min(MAX);
            self.good = 0;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verjus_native::NativeBackend;

    #[test]
    fn overflow_skips_and_halves_and_quiet_steps_grow_the_scale() {
        let be = NativeBackend::new();
        let finite = [Tensor::from_vec([2], vec![1.0f32, -2.0]).unwrap()];
        let overflow = [Tensor::from_vec([2], vec![1.0f32, f32::INFINITY]).unwrap()];
        let nan = [Tensor::from_vec([2], vec![f32::NAN, 0.0f32]).unwrap()];
        let mut s = LossScaler::new();
        assert!(!s.admit(&be, &overflow).unwrap());
        assert_eq!((s.scale(), s.skipped()), (32768.0, 1));
        assert!(
            !s.admit(&be, &nan).unwrap(),
            "NaN (inf - inf) is an overflow too"
        );
        assert_eq!((s.scale(), s.skipped()), (16384.0, 2));
        for _ in 0..GROWTH_INTERVAL - 1 {
            assert!(s.admit(&be, &finite).unwrap());
        }
        assert_eq!(s.scale(), 16384.0);
        assert!(s.admit(&be, &finite).unwrap());
        assert_eq!((s.scale(), s.skipped()), (32768.0, 2));
        for _ in 0..40 {
            s.admit(&be, &overflow).unwrap();
        }
        assert_eq!((s.scale(), s.skipped()), (MIN, 42));
    }
}
