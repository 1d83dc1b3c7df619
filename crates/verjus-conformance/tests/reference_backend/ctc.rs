//! The reference CTC loss behind the `Backend` method of the reference
//! backend; it validates lengths and labels as a backend must
//! (`ops::ctc_check`).

use verjus_conformance::array::Array;
use verjus_conformance::reference::ctc::{ctc_loss as reference, CtcCase};
use verjus_core::ops::{ctc_check, CtcInputs, CtcPlan};
use verjus_core::{Result, Tensor};

/// Losses and gradient; `ignore_lengths` (the planted bug) runs every entry
/// over all `T` frames.
pub(crate) fn ctc_loss(
    plan: &CtcPlan,
    inputs: &CtcInputs<'_>,
    losses: &mut Tensor,
    grad: Option<&mut Tensor>,
    ignore_lengths: bool,
) -> Result<()> {
    let targets = inputs.targets.to_vec::<i32>()?;
    let mut input_lengths = inputs.input_lengths.to_vec::<i32>()?;
    let target_lengths = inputs.target_lengths.to_vec::<i32>()?;
    ctc_check(plan, &targets, &input_lengths, &target_lengths)?;
    if ignore_lengths {
        input_lengths.fill(plan.time as i32);
    }
    let lp = inputs.log_probs;
    let case = CtcCase {
        log_probs: Array::new(lp.dims().to_vec(), lp.to_vec::<f32>()?),
        targets,
        max_target: plan.max_target,
        input_lengths,
        target_lengths,
        blank: plan.blank,
        max_approx: plan.max_approx,
    };
    let (l, g) = reference(&case);
    losses.as_mut_slice::<f32>()?.copy_from_slice(&l);
    if let Some(d) = grad {
        d.as_mut_slice::<f32>()?.copy_from_slice(&g.data);
    }
    Ok(())
}
