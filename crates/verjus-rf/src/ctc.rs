//! [`ctc_loss`]: RETURNN's `rf.ctc_loss` over dim-tagged logits and sparse
//! targets, on the core's CTC op (`verjus_core::ops::ctc_loss`).
//!
//! The logits' batch dims (all but the input spatial and class dims) are
//! merged into one batch axis, the input and target lengths come from the
//! two spatial dims (a static dim: every entry its full size), and the
//! per-entry losses are split back over the batch dims. Unless
//! `logits_normalized`, a `log_softmax` over the class dim comes first, so
//! the gradient reaching the logits is `softmax - posterior` per frame.

use crate::lstm::lengths_over;
use crate::{cast, fmt_dims, log_softmax, Dim, RfDType, RfTensor};
use verjus_core::autograd::{CtcTargets, Var};
use verjus_core::ops;
use verjus_core::{Error, Result, Shape};

const OP: &str = "ctc_loss";

/// The options of [`ctc_loss`] besides its tensors and dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtcOptions {
    pub blank_index: usize,
    /// The logits are log-probabilities already (no `log_softmax`).
    pub logits_normalized: bool,
    /// Viterbi: the best alignment's score instead of the sum over all.
    pub max_approx: bool,
}

/// Per-entry CTC losses (over the batch dims of `logits`) of `targets`
/// (sparse over the class dim, over `{batch dims..., targets_spatial_dim}`)
/// under `logits` over `{batch dims..., input_spatial_dim, class_dim}`.
/// A target that no alignment produces gets the loss `+inf` (and no
/// gradient); see `verjus_core::ops::ctc_loss`.
pub fn ctc_loss(
    logits: &RfTensor,
    targets: &RfTensor,
    input_spatial_dim: &Dim,
    targets_spatial_dim: &Dim,
    class_dim: &Dim,
    opts: CtcOptions,
) -> Result<RfTensor> {
    logits.axis(OP, input_spatial_dim)?;
    logits.axis(OP, class_dim)?;
    targets.axis(OP, targets_spatial_dim)?;
    let int_targets = matches!(targets.dtype(), RfDType::Int32 | RfDType::Int64);
    if logits.dtype() != RfDType::Float32 || !int_targets {
        return Err(Error::invalid(
            OP,
            format!(
                "logits must be float32 and targets integer labels; got {} logits and {} targets",
                logits.dtype(),
                targets.dtype()
            ),
        ));
    }
    let batch: Vec<Dim> = logits
        .dims()
        .iter()
        .filter(|d| *d != input_spatial_dim && *d != class_dim)
        .cloned()
        .collect();
    let same_batch = targets.dims().len() == batch.len() + 1
        && batch.iter().all(|d| targets.axis_of(d).is_some());
    if !same_batch {
        return Err(Error::invalid(
            OP,
            format!(
                "targets {} must have the batch dims {} of logits {} and {targets_spatial_dim}",
                fmt_dims(targets.dims()),
                fmt_dims(&batch),
                fmt_dims(logits.dims())
            ),
        ));
    }
    let sizes = logits.sizes();
    let size_of = |d: &Dim| sizes[logits.axis_of(d).unwrap_or(0)];
    let batch_shape: Vec<usize> = batch.iter().map(size_of).collect();
    let b: usize = batch_shape.iter().product();
    let (t, c) = (size_of(input_spatial_dim), size_of(class_dim));
    let s = targets.sizes()[targets.axis_of(targets_spatial_dim).unwrap_or(0)];
    let log_probs = match opts.logits_normalized {
        true => logits.clone(),
        false => log_softmax(logits, class_dim, true)?,
    };
    let mut order = batch.clone();
    order.extend([input_spatial_dim.clone(), class_dim.clone()]);
    let lp = log_probs.copy_transpose(&order)?.var().reshape([b, t, c])?;
    let mut order = batch.clone();
    order.push(targets_spatial_dim.clone());
    let tg = cast(targets, RfDType::Int32)?;
    let tg = tg.copy_transpose(&order)?.var().reshape([b, s])?;
    let lengths = |dim: &Dim, size: usize| -> Result<Var> {
        match dim.lengths() {
            Some(l) => lengths_over(OP, dim, &l, &batch, &batch_shape)?.reshape([b]),
            None => {
                let be = logits.backend();
                let mut full = ops::zeros(&**be, &Shape::new([b])?, verjus_core::DType::I32)?;
                ops::fill(&**be, &mut full, size as f64)?;
                Var::constant(full, be.clone())
            }
        }
    };
    let (il, tl) = (
        lengths(input_spatial_dim, t)?,
        lengths(targets_spatial_dim, s)?,
    );
    let ctc = CtcTargets {
        targets: &tg,
        input_lengths: &il,
        target_lengths: &tl,
    };
    let losses = lp.ctc_loss(&ctc, opts.blank_index, opts.max_approx)?;
    RfTensor::new(losses.reshape(batch_shape)?, batch, RfDType::Float32)
}
