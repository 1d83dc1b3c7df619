//! Indices and labels outside their range. Validation cannot see tensor
//! contents, so these reach the backend, which must reject them with an error
//! that names the op and the offending value (as `ops::index_select` and
//! `ops::softmax_cross_entropy` document) instead of reading out of bounds.
//!
//! A backend may check on its device without waiting (CUDA does): then the
//! error comes at the latest from the next read from the device, a download
//! or `synchronize`, and names the first bad value since the previous read.
//! So each case is the op call followed by such a read, and after the error
//! the backend must work again (the next `synchronize` succeeds).

use super::{expect_error, f32s};
use crate::compare::Failures;
use crate::transfer::put_int;
use verjus_core::{ops, Backend, DType, Tensor};

/// Distinctive bad values, so a message that contains one really names it.
const BAD: [i64; 3] = [1_234_567, -3, -1_000_001];

/// `(values, the value the message must name)`. The first value past the end
/// also appears in the shapes, so for it only the op name is required.
fn cases(past_end: Vec<i64>) -> Vec<(Vec<i64>, Option<i64>)> {
    let mut c: Vec<_> = BAD.iter().map(|&b| (vec![0, b, 1], Some(b))).collect();
    c.push((past_end, None));
    c
}

/// `expect_error` on `call` (the op and a read from the device) requiring the
/// op name and, when given, the bad value; then the backend must be usable.
fn rejects(
    be: &dyn Backend,
    what: &str,
    op: &str,
    bad: Option<i64>,
    call: impl FnOnce() -> verjus_core::Result<()>,
) -> Result<(), String> {
    let value = bad.map(|b| b.to_string()).unwrap_or_default();
    let needles: Vec<&str> = [op, &value].into_iter().filter(|n| !n.is_empty()).collect();
    expect_error(what, &needles, call)?;
    be.synchronize()
        .map_err(|e| format!("{what}: after the error, synchronize still fails: {e}"))
}

/// A download of `t` as a read from the device.
fn read(be: &dyn Backend, t: &Tensor) -> verjus_core::Result<()> {
    ops::download(be, t).map(drop)
}

/// index_select, index_add and softmax_cross_entropy reject out-of-range values,
/// for int64 and int32, including the first value past the end; the error
/// comes from the call or from the next download / synchronize.
pub fn out_of_range_indices(be: &dyn Backend) -> Result<(), String> {
    let mut f = Failures::new();
    let x = f32s(be, &[4, 3])?;
    let logits = f32s(be, &[3, 5])?;
    for dtype in [DType::I64, DType::I32] {
        for (values, bad) in cases(vec![3, 4]) {
            let idx = put_int(be, "setup", &values, dtype)?;
            let mut y = f32s(be, &[values.len(), 3])?;
            let what = format!("index_select: {dtype} indices {values:?} into an axis of 4");
            f.record(rejects(be, &what, "index_select", bad, || {
                ops::index_select(be, &x, 0, &idx, &mut y)?;
                read(be, &y)
            }));
            let mut dst = f32s(be, &[4, 3])?;
            let what = format!("index_add: {dtype} indices {values:?} into an axis of 4");
            f.record(rejects(be, &what, "index_add", bad, || {
                ops::index_add(be, &y, 0, &idx, &mut dst)?;
                be.synchronize()
            }));
        }
        for (values, bad) in cases(vec![0, 5, 4]) {
            let labels = put_int(be, "setup", &values, dtype)?;
            let (mut losses, mut grad) = (f32s(be, &[3])?, f32s(be, &[3, 5])?);
            let what = format!("softmax_cross_entropy: {dtype} labels {values:?} for 5 classes");
            f.record(rejects(be, &what, "softmax_cross_entropy", bad, || {
                ops::softmax_cross_entropy(
                    be,
                    &logits,
                    &labels,
                    0.0,
                    1.0,
                    &mut losses,
                    Some(&mut grad),
                )?;
                read(be, &losses)
            }));
        }
    }
    f.record(first_bad_value_is_named(be));
    f.finish()
}

/// Two bad calls before a read: the error names the first call's op and value.
fn first_bad_value_is_named(be: &dyn Backend) -> Result<(), String> {
    let x = f32s(be, &[4, 3])?;
    let logits = f32s(be, &[3, 5])?;
    let idx = put_int(be, "setup", &[0, BAD[0], 1], DType::I64)?;
    let labels = put_int(be, "setup", &[0, BAD[1], 1], DType::I32)?;
    let mut y = f32s(be, &[3, 3])?;
    let mut losses = f32s(be, &[3])?;
    let first = BAD[0].to_string();
    rejects(
        be,
        "index_select then softmax_cross_entropy, both with a bad value, before a read",
        "index_select",
        Some(BAD[0]),
        || {
            ops::index_select(be, &x, 0, &idx, &mut y)?;
            ops::softmax_cross_entropy(be, &logits, &labels, 0.0, 1.0, &mut losses, None)?;
            read(be, &losses)
        },
    )
    .map_err(|e| format!("{e} (the first bad value is {first})"))
}
