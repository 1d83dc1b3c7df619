//! Axes out of range or repeated, and permutations that are not permutations.

use super::{expect_error, f32s, typed};
use crate::compare::Failures;
use crate::transfer::put_int;
use verjus_core::ops::{self, ReduceOp};
use verjus_core::{Backend, DType};

/// Every op with an axis argument rejects a bad one.
pub fn bad_axes(be: &dyn Backend) -> Result<(), String> {
    let t = |d: &[usize]| f32s(be, d);
    let mut f = Failures::new();
    let x = t(&[2, 3])?;
    let mut y = t(&[2, 3])?;
    let mut r = t(&[])?;
    f.record(expect_error(
        "reduce_sum: axis 2 of a rank-2 tensor",
        &["reduce_sum"],
        || ops::reduce(be, ReduceOp::Sum, &x, &[2], &mut r),
    ));
    f.record(expect_error(
        "reduce_mean: axis 0 listed twice",
        &["reduce_mean"],
        || ops::reduce(be, ReduceOp::Mean, &x, &[0, 0], &mut r),
    ));
    let mut dx = t(&[2, 3])?;
    f.record(expect_error(
        "reduce_max_backward: axis 5",
        &["reduce_max"],
        || ops::reduce_backward(be, ReduceOp::Max, &x, &[5], &r, &r, &mut dx),
    ));
    let mut am = typed(be, &[2], DType::I64)?;
    f.record(expect_error(
        "argmax: axis 2 of a rank-2 tensor",
        &["argmax"],
        || ops::argmax(be, &x, 2, &mut am),
    ));
    let scalar = t(&[])?;
    let mut am0 = typed(be, &[], DType::I64)?;
    f.record(expect_error(
        "argmax: axis 0 of a scalar",
        &["argmax"],
        || ops::argmax(be, &scalar, 0, &mut am0),
    ));
    f.record(expect_error(
        "softmax: axis 3 of a rank-2 tensor",
        &["softmax"],
        || ops::softmax(be, &x, 3, false, &mut y),
    ));
    f.record(expect_error(
        "log_softmax: axis 2 of a rank-2 tensor",
        &["log_softmax"],
        || ops::softmax(be, &x, 2, true, &mut y),
    ));
    f.record(expect_error(
        "softmax_backward: axis 2 of a rank-2 tensor",
        &["softmax_backward"],
        || ops::softmax_backward(be, &x, &x, 2, false, &mut dx),
    ));
    let idx = put_int(be, "setup", &[0], DType::I64)?;
    f.record(expect_error(
        "index_select: axis 2 of a rank-2 tensor",
        &["index_select"],
        || ops::index_select(be, &x, 2, &idx, &mut y),
    ));
    f.record(expect_error(
        "index_add: axis 2 of a rank-2 tensor",
        &["index_add"],
        || ops::index_add(be, &x, 2, &idx, &mut y),
    ));
    let mut whole = t(&[4, 3])?;
    f.record(expect_error(
        "concat: axis 2 of rank-2 parts",
        &["concat"],
        || ops::concat(be, &[&x, &x], 2, &mut whole),
    ));
    let (mut p1, mut p2) = (t(&[2, 3])?, t(&[2, 3])?);
    f.record(expect_error(
        "split: axis 2 of rank-2 parts",
        &["split"],
        || ops::split(be, &whole, 2, &mut [&mut p1, &mut p2]),
    ));
    let perms: [&[usize]; 4] = [&[0, 0], &[0], &[0, 2], &[1, 0, 2]];
    for perm in perms {
        let mut yp = t(&[3, 2])?;
        f.record(expect_error(
            &format!("permute: {perm:?} for a rank-2 tensor"),
            &["permute"],
            || ops::permute(be, &x, perm, &mut yp),
        ));
    }
    f.finish()
}
