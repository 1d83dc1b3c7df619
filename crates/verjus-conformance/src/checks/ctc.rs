//! Check of the CTC loss against the enumeration reference: losses and the
//! log-probabilities' gradient over per-entry input and target lengths
//! (lengths 0, 1 and `T`, an empty target, repeated labels, padding that
//! holds non-labels, an entry with too few frames: loss `+inf`, gradient 0),
//! blank first or last, the Viterbi approximation, no gradient asked, an
//! empty batch. Tolerance: `Tolerance::GEMM` (a log-sum-exp chain over the
//! frames in f32).

use crate::compare::{close, every_case, Tolerance};
use crate::inputs::uniform;
use crate::reference::ctc::{ctc_loss as reference, CtcCase};
use crate::transfer::{get, put, put_vec, zeros, Context};
use verjus_core::ops::{self, CtcInputs};
use verjus_core::{Backend, DType};

/// The entries of a case: (input length, target), padded with `-1`.
pub type Entries = &'static [(i32, &'static [i32])];

/// Entries over 4 classes (labels 1..=3 with blank 0; 0..=2 with blank 3).
const MIXED: Entries = &[
    (5, &[1, 2, 2]),
    (1, &[3]),
    (5, &[2, 2]),
    (3, &[]),
    (2, &[1, 1]),
    (0, &[]),
    (4, &[3, 1, 3]),
];
const BLANK_LAST: Entries = &[(6, &[0, 1, 1]), (6, &[2]), (2, &[1, 2]), (6, &[])];

/// One call: entries, frames `T`, classes, blank, Viterbi, gradient asked.
type Case = (Entries, usize, usize, usize, bool, bool);

const CASES: [Case; 6] = [
    (MIXED, 5, 4, 0, false, true),
    (BLANK_LAST, 6, 4, 3, false, true),
    (MIXED, 5, 4, 0, true, true),
    (BLANK_LAST, 6, 4, 3, true, true),
    (MIXED, 5, 4, 0, false, false),
    (&[], 3, 4, 0, false, true),
];

/// The reference's inputs for `entries`, log-probabilities drawn with `seed`.
pub fn ctc_case(
    seed: u64,
    entries: Entries,
    time: usize,
    classes: usize,
    blank: usize,
    max_approx: bool,
) -> CtcCase {
    let max_target = entries.iter().map(|e| e.1.len()).max().unwrap_or(0).max(1);
    let mut targets = vec![-1; entries.len() * max_target];
    for (b, (_, t)) in entries.iter().enumerate() {
        targets[b * max_target..b * max_target + t.len()].copy_from_slice(t);
    }
    CtcCase {
        log_probs: uniform(seed, &[entries.len(), time, classes], -3.0, 1.0),
        targets,
        max_target,
        input_lengths: entries.iter().map(|e| e.0).collect(),
        target_lengths: entries.iter().map(|e| e.1.len() as i32).collect(),
        blank,
        max_approx,
    }
}

/// Runs `ops::ctc_loss` on the backend: the losses, and the gradient if asked.
pub fn run_ctc(
    be: &dyn Backend,
    what: &str,
    case: &CtcCase,
    with_grad: bool,
) -> Result<(Vec<f32>, Option<Vec<f32>>), String> {
    let batch = case.input_lengths.len();
    let lp = put(be, what, &case.log_probs)?;
    let targets = put_vec(be, what, &[batch, case.max_target], case.targets.clone())?;
    let il = put_vec(be, what, &[batch], case.input_lengths.clone())?;
    let tl = put_vec(be, what, &[batch], case.target_lengths.clone())?;
    let inputs = CtcInputs {
        log_probs: &lp,
        targets: &targets,
        input_lengths: &il,
        target_lengths: &tl,
    };
    let mut losses = zeros(be, what, &[batch], DType::F32)?;
    let mut grad = zeros(be, what, &case.log_probs.dims, DType::F32)?;
    ops::ctc_loss(
        be,
        &inputs,
        case.blank,
        case.max_approx,
        &mut losses,
        with_grad.then_some(&mut grad),
    )
    .context(what)?;
    let grad = match with_grad {
        true => Some(get(be, what, &grad)?),
        false => None,
    };
    Ok((get(be, what, &losses)?, grad))
}

/// `ops::ctc_loss`.
pub fn ctc_loss(be: &dyn Backend) -> Result<(), String> {
    every_case(
        CASES.into_iter().enumerate(),
        |(i, (entries, time, classes, blank, max_approx, with_grad))| {
            let case = ctc_case(i as u64 + 40, entries, time, classes, blank, max_approx);
            let what = format!(
                "ctc_loss B={} T={time} C={classes} blank {blank} max_approx {max_approx} input lengths {:?} targets {:?}",
                entries.len(),
                case.input_lengths,
                case.targets
            );
            let (losses, grad) = reference(&case);
            let (tl, tg) = run_ctc(be, &what, &case, with_grad)?;
            let tol = Tolerance::GEMM;
            close(
                &format!("{what} losses"),
                &[entries.len()],
                &losses,
                &tl,
                tol,
            )?;
            match tg {
                Some(tg) => close(&format!("{what} grad"), &grad.dims, &grad.data, &tg, tol),
                None => Ok(()),
            }
        },
    )
}
