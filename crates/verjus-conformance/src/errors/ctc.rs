//! Invalid CTC calls: lengths outside `0..=T` / `0..=S` and labels that are
//! the blank or not classes (the backend reads them), a blank that is not a
//! class, operands of the wrong rank, shape or dtype, and outputs of the
//! wrong shape. Each error must name the op and the offending argument.

use super::{expect_error, f32s, typed};
use crate::compare::Failures;
use crate::transfer::put_vec;
use verjus_core::ops::{self, CtcInputs};
use verjus_core::{Backend, DType, Tensor};

const B: usize = 2;
const T: usize = 3;
const C: usize = 4;
const S: usize = 2;

/// Every invalid CTC call is rejected with an error naming the argument.
pub fn ctc(be: &dyn Backend) -> Result<(), String> {
    let ints = |dims: &[usize], v: Vec<i32>| put_vec(be, "error check setup", dims, v);
    let lp = f32s(be, &[B, T, C])?;
    let targets = ints(&[B, S], vec![1, 2, 3, -1])?;
    let (il, tl) = (ints(&[B], vec![3, 2])?, ints(&[B], vec![2, 1])?);
    let good = CtcInputs {
        log_probs: &lp,
        targets: &targets,
        input_lengths: &il,
        target_lengths: &tl,
    };
    let call = |inputs: CtcInputs<'_>, blank: usize, grad_dims: &[usize]| {
        let mut losses = f32s(be, &[B]).map_err(verjus_core::Error::Autograd)?;
        let mut grad = f32s(be, grad_dims).map_err(verjus_core::Error::Autograd)?;
        ops::ctc_loss(be, &inputs, blank, false, &mut losses, Some(&mut grad))
    };
    let with = |t: &Tensor, which: &str| {
        let mut inputs = good;
        match which {
            "log_probs" => inputs.log_probs = t,
            "targets" => inputs.targets = t,
            "input_lengths" => inputs.input_lengths = t,
            _ => inputs.target_lengths = t,
        }
        call(inputs, 0, &[B, T, C])
    };
    let mut f = Failures::new();
    let (il_long, tl_long) = (ints(&[B], vec![4, 2])?, ints(&[B], vec![2, 3])?);
    let blank_label = ints(&[B, S], vec![1, 0, 3, -1])?;
    let big_label = ints(&[B, S], vec![1, 2, 4, -1])?;
    let neg_length = ints(&[B], vec![-1, 2])?;
    let float_lengths = f32s(be, &[B])?;
    let wide_batch = ints(&[B + 1, S], vec![1; (B + 1) * S])?;
    let flat = f32s(be, &[B, T * C])?;
    let long_targets = typed(be, &[B, S], DType::I64)?;
    f.record(expect_error(
        "ctc_loss input length > T",
        &["ctc_loss", "input_lengths[0] = 4"],
        || with(&il_long, "input_lengths"),
    ));
    f.record(expect_error(
        "ctc_loss negative input length",
        &["ctc_loss", "input_lengths[0] = -1"],
        || with(&neg_length, "input_lengths"),
    ));
    f.record(expect_error(
        "ctc_loss target length > S",
        &["ctc_loss", "target_lengths[1] = 3"],
        || with(&tl_long, "target_lengths"),
    ));
    f.record(expect_error(
        "ctc_loss blank as a label",
        &["ctc_loss", "targets[0, 1] = 0"],
        || with(&blank_label, "targets"),
    ));
    f.record(expect_error(
        "ctc_loss label >= C",
        &["ctc_loss", "targets[1, 0] = 4"],
        || with(&big_label, "targets"),
    ));
    f.record(expect_error(
        "ctc_loss float lengths",
        &["ctc_loss", "target_lengths"],
        || with(&float_lengths, "target_lengths"),
    ));
    f.record(expect_error(
        "ctc_loss int64 targets",
        &["ctc_loss", "targets"],
        || with(&long_targets, "targets"),
    ));
    f.record(expect_error(
        "ctc_loss targets of another batch",
        &["ctc_loss", "targets"],
        || with(&wide_batch, "targets"),
    ));
    f.record(expect_error(
        "ctc_loss rank-2 log_probs",
        &["ctc_loss", "log_probs"],
        || with(&flat, "log_probs"),
    ));
    f.record(expect_error(
        "ctc_loss blank not a class",
        &["ctc_loss", "blank index 4"],
        || call(good, 4, &[B, T, C]),
    ));
    f.record(expect_error(
        "ctc_loss grad of the wrong shape",
        &["ctc_loss", "grad"],
        || call(good, 0, &[B, T, C + 1]),
    ));
    f.finish()
}
