//! Connectionist temporal classification (CTC): the loss of each batch
//! entry's target sequence under per-frame log-probabilities, summed (or
//! maximised, the Viterbi approximation) over every alignment, by the
//! log-space forward-backward algorithm over per-entry input and target
//! lengths.
//!
//! The validated entry point and its plan live here; the values that only a
//! backend can read (lengths and labels) are checked by [`ctc_check`], which
//! every backend calls on its host copy of them, so each backend reports the
//! same errors.

use super::{check_device, check_dtype, check_f32_on, check_shape};
use crate::{Backend, DType, Error, Result, Shape, Tensor};

/// The operands of [`ctc_loss`]: `log_probs [B, T, C]` (f32, per-frame
/// log-probabilities; they need not be normalised), `targets [B, S]`,
/// `input_lengths [B]` and `target_lengths [B]` (all int32).
#[derive(Clone, Copy, Debug)]
pub struct CtcInputs<'a> {
    pub log_probs: &'a Tensor,
    pub targets: &'a Tensor,
    pub input_lengths: &'a Tensor,
    pub target_lengths: &'a Tensor,
}

/// Validated sizes of a [`ctc_loss`] call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtcPlan {
    pub batch: usize,
    /// Frames `T` of `log_probs`.
    pub time: usize,
    pub classes: usize,
    /// Target positions `S` of `targets`.
    pub max_target: usize,
    pub blank: usize,
    /// Viterbi: the best alignment's score instead of the sum over all.
    pub max_approx: bool,
}

/// Per-entry losses `losses[b] = -log sum_{alignments} prod_t p(t, a_t)` of
/// `targets[b, ..target_lengths[b]]` over the first `input_lengths[b]`
/// frames of `log_probs[b]` (with `max_approx`, `-log max` instead). An
/// alignment emits one class per frame; collapsing repeats and then removing
/// `blank` gives the target. When `grad` `[B, T, C]` is given it receives
/// `d losses[b] / d log_probs[b, t, c]` (minus the posterior occupancy of
/// class `c` at frame `t`; with `max_approx`, minus the best alignment's
/// one-hot), zero past each entry's length.
///
/// A target that no alignment of its input produces (it needs more frames,
/// `target_length + repeats`, than the input has) gets the loss `+inf` and a
/// zero gradient, as PyTorch's `ctc_loss` with `zero_infinity=False` for the
/// loss. Errors: lengths outside `0..=T` / `0..=S`, a target label outside
/// `[0, C)` or equal to `blank` (checked by the backend, [`ctc_check`]).
pub fn ctc_loss(
    be: &dyn Backend,
    inputs: &CtcInputs<'_>,
    blank: usize,
    max_approx: bool,
    losses: &mut Tensor,
    grad: Option<&mut Tensor>,
) -> Result<()> {
    let plan = ctc_plan(be, inputs, blank, max_approx)?;
    check_f32_on(OP, be, &[("losses", losses)])?;
    check_shape(OP, "losses", losses, &Shape::new([plan.batch])?)?;
    if let Some(g) = &grad {
        check_f32_on(OP, be, &[("grad", g)])?;
        check_shape(OP, "grad", g, inputs.log_probs.shape())?;
    }
    be.ctc_loss(&plan, inputs, losses, grad)
}

const OP: &str = "ctc_loss";

/// The plan of a [`ctc_loss`] call: shapes, dtypes, devices and `blank`.
pub fn ctc_plan(
    be: &dyn Backend,
    inputs: &CtcInputs<'_>,
    blank: usize,
    max_approx: bool,
) -> Result<CtcPlan> {
    let lp = inputs.log_probs;
    check_f32_on(OP, be, &[("log_probs", lp)])?;
    if lp.shape().rank() != 3 {
        return Err(Error::shape(
            OP,
            "log_probs",
            "rank 3 [B, T, C]",
            lp.shape(),
        ));
    }
    let (batch, time, classes) = (lp.dims()[0], lp.dims()[1], lp.dims()[2]);
    let ints = [
        ("targets", inputs.targets),
        ("input_lengths", inputs.input_lengths),
        ("target_lengths", inputs.target_lengths),
    ];
    for (what, t) in ints {
        check_device(OP, what, be, t)?;
        check_dtype(OP, what, t, DType::I32)?;
    }
    if inputs.targets.shape().rank() != 2 || inputs.targets.dims()[0] != batch {
        return Err(Error::shape(
            OP,
            "targets",
            format!("[{batch}, S] (the batch of log_probs {})", lp.shape()),
            inputs.targets.shape(),
        ));
    }
    let max_target = inputs.targets.dims()[1];
    let per_entry = Shape::new([batch])?;
    check_shape(OP, "input_lengths", inputs.input_lengths, &per_entry)?;
    check_shape(OP, "target_lengths", inputs.target_lengths, &per_entry)?;
    if blank >= classes {
        return Err(Error::invalid(
            OP,
            format!(
                "blank index {blank} is not a class of log_probs {} (C = {classes})",
                lp.shape()
            ),
        ));
    }
    Ok(CtcPlan {
        batch,
        time,
        classes,
        max_target,
        blank,
        max_approx,
    })
}

/// Checks the host copies of the lengths and targets against `plan`: every
/// input length in `0..=T`, target length in `0..=S`, and every label within
/// an entry's target length in `[0, C)` and not `blank`. Backends call this
/// before computing.
pub fn ctc_check(
    plan: &CtcPlan,
    targets: &[i32],
    input_lengths: &[i32],
    target_lengths: &[i32],
) -> Result<()> {
    let outside = |what: &str, b: usize, l: i32, max: usize, of: &str| {
        Error::invalid(OP, format!("{what}[{b}] = {l} is outside 0..={max} ({of})"))
    };
    for (b, (&li, &ls)) in input_lengths.iter().zip(target_lengths).enumerate() {
        if li < 0 || li as usize > plan.time {
            return Err(outside(
                "input_lengths",
                b,
                li,
                plan.time,
                "the frames of log_probs",
            ));
        }
        if ls < 0 || ls as usize > plan.max_target {
            return Err(outside(
                "target_lengths",
                b,
                ls,
                plan.max_target,
                "the width of targets",
            ));
        }
        let row = &targets[b * plan.max_target..b * plan.max_target + ls as usize];
        if let Some((s, &label)) = row
            .iter()
            .enumerate()
            .find(|(_, &l)| l < 0 || l as usize >= plan.classes || l as usize == plan.blank)
        {
            return Err(Error::invalid(
                OP,
                format!(
                    "targets[{b}, {s}] = {label} is not a label: labels are in [0, {}) and not the blank {}",
                    plan.classes, plan.blank
                ),
            ));
        }
    }
    Ok(())
}
