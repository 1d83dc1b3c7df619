//! Hand-worked values: dim identity, the binary-op dim union and its
//! broadcast-all-sources error, copy_transpose, matmul's dim order, and the
//! masked reductions and softmax with lengths including 0.

use crate::common::*;
use std::collections::HashSet;
use verjus_core::ops::{BinaryOp, UnaryOp};
use verjus_rf::*;

fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

#[test]
fn dims_are_equal_only_when_the_same_object() {
    let (a, b) = (Dim::new_static(7, "feat"), Dim::new_static(7, "feat"));
    assert_ne!(a, b);
    assert_eq!(a, a.clone());
    let set: HashSet<Dim> = [a.clone(), b.clone(), a.clone()].into_iter().collect();
    assert_eq!(set.len(), 2);
    assert_eq!(batch_dim(), batch_dim());
    assert_eq!(a.size(), Some(7));
    let t = time(&[2, 5, 0]);
    assert_eq!(
        (t.size(), t.static_size(), t.is_dynamic()),
        (Some(5), None, true)
    );
    let err = Dim::new_dynamic(float(&[], &[], vec![1.0]), "t").unwrap_err();
    assert!(err.to_string().contains("int32 or int64"), "{err}");
}

#[test]
fn a_value_must_fit_its_dims() {
    let f = Dim::new_static(3, "feat");
    let err = RfTensor::from_tensor(
        verjus_core::Tensor::from_vec([4], vec![0f32; 4]).unwrap(),
        vec![f.clone()],
        None,
        be(),
        false,
    )
    .unwrap_err();
    assert!(err.to_string().contains("feat=3"), "{err}");
    let err = RfTensor::from_tensor(
        verjus_core::Tensor::from_vec([3, 3], vec![0f32; 9]).unwrap(),
        vec![f.clone(), f],
        None,
        be(),
        false,
    )
    .unwrap_err();
    assert!(err.to_string().contains("appears twice"), "{err}");
}

#[test]
fn combine_gives_the_union_of_dims_in_order_of_appearance() {
    let (b, f) = (batch_dim(), Dim::new_static(3, "feat"));
    let x = float(&[&b, &f], &[2, 3], iota(6));
    let bias = float(&[&f], &[3], vec![10.0, 20.0, 30.0]);
    let y = combine(&x, BinaryOp::Add, &bias, false).unwrap();
    assert_eq!(names(&y), ["batch", "feat"]);
    assert_eq!(vals(&y), [10.0, 21.0, 32.0, 13.0, 24.0, 35.0]);
    // The bias first: its dims lead, then the batch.
    let y = combine(&bias, BinaryOp::Sub, &x, false).unwrap();
    assert_eq!(names(&y), ["feat", "batch"]);
    assert_eq!(vals(&y), [10.0, 7.0, 19.0, 16.0, 28.0, 25.0]);
    // An operand in the other order is transposed: [feat, batch] + [batch, feat].
    let xt = x.copy_transpose(&[f.clone(), b.clone()]).unwrap();
    assert_eq!(vals(&xt), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    let y = combine(&x, BinaryOp::Mul, &xt, false).unwrap();
    assert_eq!(names(&y), ["batch", "feat"]);
    assert_eq!(vals(&y), [0.0, 1.0, 4.0, 9.0, 16.0, 25.0]);
}

#[test]
fn a_missing_middle_dim_is_broadcast() {
    let (b, t, f) = (
        batch_dim(),
        Dim::new_static(2, "t"),
        Dim::new_static(2, "f"),
    );
    let x = float(&[&b, &t, &f], &[2, 2, 2], iota(8));
    let y = float(&[&b, &f], &[2, 2], vec![100.0, 200.0, 300.0, 400.0]);
    let z = combine(&x, BinaryOp::Add, &y, false).unwrap();
    assert_eq!(names(&z), ["batch", "t", "f"]);
    assert_eq!(
        vals(&z),
        [100.0, 201.0, 102.0, 203.0, 304.0, 405.0, 306.0, 407.0]
    );
}

#[test]
fn broadcasting_both_sources_is_an_error_unless_allowed() {
    let (f, g) = (Dim::new_static(2, "feat"), Dim::new_static(3, "other"));
    let a = float(&[&f], &[2], vec![1.0, 2.0]);
    let c = float(&[&g], &[3], vec![10.0, 20.0, 30.0]);
    let err = combine(&a, BinaryOp::Add, &c, false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("[feat]")
            && err.contains("[other]")
            && err.contains("allow_broadcast_all_sources"),
        "{err}"
    );
    let y = combine(&a, BinaryOp::Add, &c, true).unwrap();
    assert_eq!(names(&y), ["feat", "other"]);
    assert_eq!(vals(&y), [11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
}

#[test]
fn a_shared_dim_of_unknown_size_must_agree() {
    let b = batch_dim();
    let x = float(&[&b], &[2], vec![1.0, 2.0]);
    let y = float(&[&b], &[3], vec![1.0, 2.0, 3.0]);
    let err = combine(&x, BinaryOp::Add, &y, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("batch") && err.contains("size 2"), "{err}");
}

#[test]
fn scalars_comparisons_and_dtypes() {
    let f = Dim::new_static(3, "feat");
    let x = float(&[&f], &[3], vec![1.0, 2.0, 4.0]);
    let y = combine_scalar(&x, BinaryOp::Sub, 1.0, true).unwrap();
    assert_eq!(vals(&y), [0.0, -1.0, -3.0]);
    let y = combine_scalar(&x, BinaryOp::Div, 8.0, true).unwrap();
    assert_eq!(vals(&y), [8.0, 4.0, 2.0]);
    let y = combine_scalar(&x, BinaryOp::Pow, 2.0, false).unwrap();
    assert_eq!(vals(&y), [1.0, 4.0, 16.0]);
    let y = combine_scalar(&x, BinaryOp::Gt, 1.5, false).unwrap();
    assert_eq!((y.dtype(), vals(&y)), (RfDType::Bool, vec![0.0, 1.0, 1.0]));
    let lens = lengths(&[3, 0]);
    let more = combine_scalar(&lens, BinaryOp::Add, 1.0, false).unwrap();
    assert_eq!(
        (more.dtype(), vals(&more)),
        (RfDType::Int32, vec![4.0, 1.0])
    );
    let half = combine_scalar(&lens, BinaryOp::Div, 2.0, false).unwrap();
    assert_eq!(
        (half.dtype(), vals(&half)),
        (RfDType::Float32, vec![1.5, 0.0])
    );
    let i = cast(
        &combine_scalar(&x, BinaryOp::Mul, -0.6, false).unwrap(),
        RfDType::Int64,
    )
    .unwrap();
    assert_eq!(
        (i.dtype(), vals(&i)),
        (RfDType::Int64, vec![0.0, -1.0, -2.0])
    );
    let bools = cast(&float(&[&f], &[3], vec![0.0, 0.5, -2.0]), RfDType::Bool).unwrap();
    assert_eq!(
        (bools.dtype(), vals(&bools)),
        (RfDType::Bool, vec![0.0, 1.0, 1.0])
    );
    let err = compare(&x, BinaryOp::Add, &x, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a comparison"), "{err}");
    assert!(parse_kind("floordiv").is_err());
    assert_eq!(parse_kind("truediv").unwrap(), BinaryOp::Div);
}

#[test]
fn copy_transpose_needs_the_same_dims() {
    let (a, b, c) = (
        Dim::new_static(2, "a"),
        Dim::new_static(3, "b"),
        Dim::new_static(1, "c"),
    );
    let x = float(&[&a, &b], &[2, 3], iota(6));
    let err = x.copy_transpose(&[b.clone(), c]).unwrap_err().to_string();
    assert!(err.contains("[b, c]") && err.contains("[a, b]"), "{err}");
    let same = x.copy_transpose(&[a, b]).unwrap();
    assert!(same.var().ptr_eq(x.var()), "the same order must not copy");
}

/// `sum_k a[..k..] * b[..k..]` by index functions, for the matmul goldens.
fn naive(
    n: [usize; 4],
    a: impl Fn(usize, usize, usize) -> f32,
    b: impl Fn(usize, usize, usize) -> f32,
) -> Vec<f32> {
    let [bs, is, js, ks] = n;
    let mut out = Vec::new();
    for bi in 0..bs {
        for i in 0..is {
            for j in 0..js {
                out.push((0..ks).map(|k| a(bi, i, k) * b(bi, k, j)).sum());
            }
        }
    }
    out
}

#[test]
fn matmul_orders_common_then_a_only_then_b_only() {
    let (b, i, j, k) = (
        batch_dim(),
        Dim::new_static(3, "i"),
        Dim::new_static(5, "j"),
        Dim::new_static(4, "k"),
    );
    let av = uniform(1, 24, -1.0, 1.0);
    let bv = uniform(2, 40, -1.0, 1.0);
    // a [batch, i, k]; b stored [k, j, batch].
    let x = float(&[&b, &i, &k], &[2, 3, 4], av.clone());
    let y = float(&[&k, &j, &b], &[4, 5, 2], bv.clone());
    let z = matmul(&x, &y, std::slice::from_ref(&k), true).unwrap();
    assert_eq!(names(&z), ["batch", "i", "j"]);
    let want = naive(
        [2, 3, 5, 4],
        |bi, ii, kk| av[bi * 12 + ii * 4 + kk],
        |bi, kk, jj| bv[kk * 10 + jj * 2 + bi],
    );
    assert_close("matmul [b,i,k] x [k,j,b]", &vals(&z), &want, 1e-5);
    // y first: the common dim (batch), then y's own (j), then x's (i).
    let z = matmul(&y, &x, std::slice::from_ref(&k), true).unwrap();
    assert_eq!(names(&z), ["batch", "j", "i"]);
    // A weight stored [j, k] is read transposed, without a permute.
    let w = float(&[&j, &k], &[5, 4], bv[..20].to_vec());
    let z = matmul(&x, &w, std::slice::from_ref(&k), true).unwrap();
    assert_eq!(names(&z), ["batch", "i", "j"]);
    let want = naive(
        [2, 3, 5, 4],
        |bi, ii, kk| av[bi * 12 + ii * 4 + kk],
        |_, kk, jj| bv[jj * 4 + kk],
    );
    assert_close("matmul [b,i,k] x [j,k]", &vals(&z), &want, 1e-5);
    let err = matmul(&x, &w, std::slice::from_ref(&b), true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("batch") && err.contains("[j, k]"), "{err}");
}

/// x over [batch=3, time] with lengths [3, 1, 0] and NaN/inf in the padding.
fn padded() -> (Dim, RfTensor) {
    let t = time(&[3, 1, 0]);
    let nan = f32::NAN;
    let x = float(
        &[&batch_dim(), &t],
        &[3, 3],
        vec![
            1.0,
            2.0,
            6.0,
            4.0,
            nan,
            f32::INFINITY,
            nan,
            nan,
            f32::NEG_INFINITY,
        ],
    );
    (t, x)
}

#[test]
fn masked_reductions_respect_each_sequence_length() {
    let (t, x) = padded();
    let axis = std::slice::from_ref(&t);
    let r = |mode| vals(&reduce(&x, mode, axis, true).unwrap());
    assert_eq!(r(ReduceMode::Sum), [9.0, 4.0, 0.0]);
    assert_eq!(r(ReduceMode::Mean), [3.0, 4.0, 0.0]);
    assert_eq!(r(ReduceMode::Max), [6.0, 4.0, f32::NEG_INFINITY]);
    assert_eq!(r(ReduceMode::Min), [1.0, 4.0, f32::INFINITY]);
    let lse = r(ReduceMode::LogSumExp);
    let want0 = (1f32.exp() + 2f32.exp() + 6f32.exp()).ln();
    assert_close("logsumexp", &lse, &[want0, 4.0, f32::NEG_INFINITY], 1e-6);
    let am = argmax(&x, &t, true).unwrap();
    assert_eq!(
        (am.dtype(), vals(&am)),
        (RfDType::Int64, vec![2.0, 0.0, 0.0])
    );
    assert_eq!(am.sparse_dim(), Some(&t));
    // Mean over [batch, time]: static and dynamic dims together.
    let b = batch_dim();
    let both = reduce(&x, ReduceMode::Sum, &[b, t.clone()], true).unwrap();
    assert_eq!(vals(&both), [13.0]);
    let err = reduce(&x, ReduceMode::Sum, &[Dim::new_static(3, "feat")], true).unwrap_err();
    assert!(
        err.to_string().contains("feat") && err.to_string().contains("[batch, time]"),
        "{err}"
    );
}

#[test]
fn masked_softmax_gives_zeros_for_an_empty_sequence() {
    let (t, x) = padded();
    let y = vals(&softmax(&x, &t, true).unwrap());
    let e = [1f32.exp(), 2f32.exp(), 6f32.exp()];
    let s: f32 = e.iter().sum();
    assert_close(
        "softmax",
        &y,
        &[e[0] / s, e[1] / s, e[2] / s, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        1e-6,
    );
    let ninf = f32::NEG_INFINITY;
    let l = vals(&log_softmax(&x, &t, true).unwrap());
    assert_close(
        "log_softmax",
        &l,
        &[
            1.0 - s.ln(),
            2.0 - s.ln(),
            6.0 - s.ln(),
            0.0,
            ninf,
            ninf,
            ninf,
            ninf,
            ninf,
        ],
        1e-6,
    );
}

#[test]
fn sequence_mask_and_where() {
    let t = time(&[2, 0, 1]);
    let m = sequence_mask(std::slice::from_ref(&t), &be()).unwrap();
    assert_eq!(names(&m), ["batch", "time"]);
    assert_eq!(
        (m.dtype(), vals(&m)),
        (RfDType::Bool, vec![1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    );
    let x = float(
        &[&t, &batch_dim()],
        &[2, 3],
        vec![1.0, 2.0, 3.0, 4.0, f32::NAN, 6.0],
    );
    let zero = float(&[], &[], vec![0.0]);
    let y = where_(&m, &x, &zero, false).unwrap();
    assert_eq!(names(&y), ["batch", "time"]);
    assert_eq!(vals(&y), [1.0, 4.0, 0.0, 0.0, 3.0, 0.0]);
    let r = range_over_dim(&t, &be()).unwrap();
    assert_eq!((r.dtype(), vals(&r)), (RfDType::Int32, vec![0.0, 1.0]));
}

#[test]
fn unary_ops_keep_dims_and_check_dtype() {
    let f = Dim::new_static(3, "feat");
    let x = float(&[&f], &[3], vec![-1.0, 0.0, 4.0]);
    assert_eq!(
        vals(&activation(&x, UnaryOp::Relu).unwrap()),
        [0.0, 0.0, 4.0]
    );
    let l = vals(&safe_log(&x, 1e-6).unwrap());
    assert!(l.iter().all(|v| v.is_finite()), "{l:?}");
    let err = activation(&lengths(&[1]), UnaryOp::Exp)
        .unwrap_err()
        .to_string();
    assert!(err.contains("exp") && err.contains("int32"), "{err}");
    let y = stop_gradient(&leaf(&[&f], &[3], vec![1.0, 2.0, 3.0]));
    assert!(!y.var().requires_grad());
}
