//! Indices and labels outside their range. Validation cannot see tensor
//! contents, so these reach the backend, which must reject them with an error
//! that names the op and the offending value (as `ops::index_select` and
//! `ops::softmax_cross_entropy` document) instead of reading out of bounds.

use super::{expect_error, f32s};
use crate::compare::Failures;
use crate::transfer::put_int;
use verjus_core::{ops, Backend, DType};

/// Distinctive bad values, so a message that contains one really names it.
const BAD: [i64; 3] = [1_234_567, -3, -1_000_001];

/// `(values, the value the message must name)`. The first value past the end
/// also appears in the shapes, so for it only the op name is required.
fn cases(past_end: Vec<i64>) -> Vec<(Vec<i64>, Option<i64>)> {
    let mut c: Vec<_> = BAD.iter().map(|&b| (vec![0, b, 1], Some(b))).collect();
    c.push((past_end, None));
    c
}

/// `expect_error` requiring the op name and, when given, the bad value.
fn rejects(
    what: &str,
    op: &str,
    bad: Option<i64>,
    call: impl FnOnce() -> verjus_core::Result<()>,
) -> Result<(), String> {
    let value = bad.map(|b| b.to_string()).unwrap_or_default();
    let needles: Vec<&str> = [op, &value].into_iter().filter(|n| !n.is_empty()).collect();
    expect_error(what, &needles, call)
}

/// index_select, index_add and softmax_cross_entropy reject out-of-range values,
/// for int64 and int32, including the first value past the end.
pub fn out_of_range_indices(be: &dyn Backend) -> Result<(), String> {
    let mut f = Failures::new();
    let x = f32s(be, &[4, 3])?;
    let logits = f32s(be, &[3, 5])?;
    for dtype in [DType::I64, DType::I32] {
        for (values, bad) in cases(vec![3, 4]) {
            let idx = put_int(be, "setup", &values, dtype)?;
            let mut y = f32s(be, &[values.len(), 3])?;
            let what = format!("index_select: {dtype} indices {values:?} into an axis of 4");
            f.record(rejects(&what, "index_select", bad, || {
                ops::index_select(be, &x, 0, &idx, &mut y)
            }));
            let mut dst = f32s(be, &[4, 3])?;
            let what = format!("index_add: {dtype} indices {values:?} into an axis of 4");
            f.record(rejects(&what, "index_add", bad, || {
                ops::index_add(be, &y, 0, &idx, &mut dst)
            }));
        }
        for (values, bad) in cases(vec![0, 5, 4]) {
            let labels = put_int(be, "setup", &values, dtype)?;
            let (mut losses, mut grad) = (f32s(be, &[3])?, f32s(be, &[3, 5])?);
            let what = format!("softmax_cross_entropy: {dtype} labels {values:?} for 5 classes");
            f.record(rejects(&what, "softmax_cross_entropy", bad, || {
                ops::softmax_cross_entropy(
                    be,
                    &logits,
                    &labels,
                    0.0,
                    1.0,
                    &mut losses,
                    Some(&mut grad),
                )
            }));
        }
    }
    f.finish()
}
