//! What the ranks of a data-parallel step sum besides the gradients: the
//! loss (times its normaliser), the normaliser (examples, or real frames) and
//! how many ranks saw a non-finite loss. Reduced in the same call as the
//! gradients (one collective per step, one point where the ranks wait for
//! each other), as three `f32`s: counts are exact below 2^24, and the loss sum
//! is only reported.

use verjus_core::{Result, Tensor};

/// See the module docs.
pub(crate) struct Tally(Tensor);

impl Tally {
    /// This rank's share: `loss` is the mean over `norm` rows or frames (none
    /// on a rank without rows).
    pub(crate) fn new(loss: f32, norm: usize) -> Result<Self> {
        let finite = loss.is_finite();
        let values = vec![
            if finite { loss * norm as f32 } else { 0.0 },
            norm as f32,
            if finite { 0.0 } else { 1.0 },
        ];
        Ok(Tally(Tensor::from_vec([3], values)?))
    }

    /// The tensor a collective sums in place.
    pub(crate) fn tensor(&mut self) -> &mut Tensor {
        &mut self.0
    }

    /// After the sum: the global mean loss and normaliser, or None when some
    /// rank's loss was not finite. Alone (`world` 1), the mean is `loss`
    /// itself, not its round trip through the sum.
    pub(crate) fn agreed(&self, loss: f32, world: usize) -> Result<Option<(f32, usize)>> {
        let values = self.0.as_slice::<f32>()?;
        let (sum, norm, non_finite) = (values[0], values[1], values[2]);
        if non_finite > 0.0 {
            return Ok(None);
        }
        let mean = if world == 1 { loss } else { sum / norm };
        Ok(Some((mean, norm as usize)))
    }
}
