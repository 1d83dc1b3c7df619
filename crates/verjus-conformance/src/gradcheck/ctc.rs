//! Gradient check of the CTC loss's log-probabilities gradient (the sum over
//! alignments; the Viterbi gradient is piecewise constant).

use super::{check_input, weighted_sum};
use crate::array::Array;
use crate::checks::{ctc_case, Entries};
use crate::compare::every_case;
use crate::transfer::{put, put_vec, zeros, Context};
use verjus_core::ops::{self, CtcInputs};
use verjus_core::{Backend, DType, Tensor};

/// The gradient against differences of `sum(r * losses)` over per-entry lengths.
pub fn ctc_loss(be: &dyn Backend) -> Result<(), String> {
    let cases: [(Entries, usize); 2] = [
        (&[(4, &[1, 2]), (1, &[2]), (4, &[1, 1]), (2, &[])], 0),
        (&[(3, &[0]), (3, &[1, 0])], 2),
    ];
    every_case(cases.into_iter().enumerate(), |(i, (entries, blank))| {
        let case = ctc_case(60 + i as u64, entries, 4, 3, blank, false);
        let batch = entries.len();
        let what = format!("gradcheck ctc_loss blank {blank} entries {entries:?}");
        let targets = put_vec(be, &what, &[batch, case.max_target], case.targets.clone())?;
        let il = put_vec(be, &what, &[batch], case.input_lengths.clone())?;
        let tl = put_vec(be, &what, &[batch], case.target_lengths.clone())?;
        let weights = Array::new([batch], (0..batch).map(|b| 0.5 + b as f32 * 0.3).collect());
        let run = |x: &Array, grad: Option<&mut Tensor>| {
            let lp = put(be, &what, x)?;
            let inputs = CtcInputs {
                log_probs: &lp,
                targets: &targets,
                input_lengths: &il,
                target_lengths: &tl,
            };
            let mut losses = zeros(be, &what, &[batch], DType::F32)?;
            ops::ctc_loss(be, &inputs, blank, false, &mut losses, grad).context(&what)?;
            weighted_sum(be, &what, &losses, &weights)
        };
        let mut tgrad = zeros(be, &what, &case.log_probs.dims, DType::F32)?;
        run(&case.log_probs, Some(&mut tgrad))?;
        // The op's gradient is of each loss; weight its entries like the sum.
        let mut g = crate::transfer::get::<f32>(be, &what, &tgrad)?;
        let per = g.len() / batch.max(1);
        for (b, chunk) in g.chunks_mut(per.max(1)).enumerate() {
            chunk.iter_mut().for_each(|v| *v *= weights.data[b]);
        }
        let weighted = put_vec(be, &what, &case.log_probs.dims, g)?;
        check_input(be, &what, &case.log_probs, &weighted, |v| run(v, None))
    })
}
