//! Invalid attention calls: a value without the keys' frames, a query and
//! key of different features or entries, lengths of the wrong dtype, shape
//! or range, a non-finite scale, outputs and gradients of the wrong shape.
//! Each error must name the op and the offending argument.

use super::{expect_error, f32s, typed};
use crate::compare::Failures;
use crate::transfer::put_vec;
use verjus_core::ops::{self, AttentionArgs, AttentionGrads};
use verjus_core::{Backend, DType, Tensor};

const N: usize = 2;
const TQ: usize = 3;
const TK: usize = 4;
const D: usize = 5;
const DV: usize = 6;

fn call(
    be: &dyn Backend,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    lengths: Option<&Tensor>,
    scale: f32,
) -> verjus_core::Result<()> {
    let args = AttentionArgs {
        q,
        k,
        v,
        lengths,
        causal: false,
        scale,
    };
    let shape = |dims: &[usize]| verjus_core::Shape::new(dims.to_vec());
    let mut out = ops::zeros(be, &shape(&[N, TQ, DV])?, DType::F32)?;
    let mut lse = ops::zeros(be, &shape(&[N, TQ])?, DType::F32)?;
    ops::attention(be, &args, &mut out, &mut lse)
}

/// Every invalid attention call is rejected with an error naming the argument.
pub fn attention(be: &dyn Backend) -> Result<(), String> {
    let q = f32s(be, &[N, TQ, D])?;
    let k = f32s(be, &[N, TK, D])?;
    let v = f32s(be, &[N, TK, DV])?;
    let mut f = Failures::new();
    let v_short = f32s(be, &[N, TK - 1, DV])?;
    f.record(expect_error(
        "v without the keys' frames",
        &["attention", "v"],
        || call(be, &q, &k, &v_short, None, 1.0),
    ));
    let k_wide = f32s(be, &[N, TK, D + 1])?;
    f.record(expect_error(
        "k of other features",
        &["attention", "k"],
        || call(be, &q, &k_wide, &v, None, 1.0),
    ));
    let k_entries = f32s(be, &[N + 1, TK, D])?;
    f.record(expect_error(
        "k of other entries",
        &["attention", "k"],
        || call(be, &q, &k_entries, &v, None, 1.0),
    ));
    let q_flat = f32s(be, &[N, TQ * D])?;
    f.record(expect_error("q of rank 2", &["attention", "q"], || {
        call(be, &q_flat, &k, &v, None, 1.0)
    }));
    let l64 = typed(be, &[N], DType::I64)?;
    f.record(expect_error(
        "int64 lengths",
        &["attention", "lengths"],
        || call(be, &q, &k, &v, Some(&l64), 1.0),
    ));
    let l_short = typed(be, &[N - 1], DType::I32)?;
    f.record(expect_error(
        "lengths of other entries",
        &["attention", "lengths"],
        || call(be, &q, &k, &v, Some(&l_short), 1.0),
    ));
    for bad in [-1, TK as i32 + 1] {
        let l = put_vec(be, "error check setup", &[N], vec![1, bad])?;
        f.record(expect_error(
            &format!("length {bad}"),
            &["attention", "lengths[1]"],
            || call(be, &q, &k, &v, Some(&l), 1.0),
        ));
    }
    f.record(expect_error("NaN scale", &["attention", "scale"], || {
        call(be, &q, &k, &v, None, f32::NAN)
    }));
    let args = AttentionArgs {
        q: &q,
        k: &k,
        v: &v,
        lengths: None,
        causal: true,
        scale: 1.0,
    };
    let (mut out_bad, mut lse) = (f32s(be, &[N, TQ, D])?, f32s(be, &[N, TQ])?);
    f.record(expect_error(
        "out of the key features",
        &["attention", "out"],
        || ops::attention(be, &args, &mut out_bad, &mut lse),
    ));
    let (out, dout) = (f32s(be, &[N, TQ, DV])?, f32s(be, &[N, TQ, DV])?);
    let mut dk_bad = f32s(be, &[N, TK, DV])?;
    f.record(expect_error(
        "dk of the value's shape",
        &["attention_backward", "dk"],
        || {
            let grads = AttentionGrads {
                dk: Some(&mut dk_bad),
                ..Default::default()
            };
            ops::attention_backward(be, &args, &out, &lse, &dout, grads)
        },
    ));
    f.finish()
}
