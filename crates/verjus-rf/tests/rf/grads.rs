//! Each differentiable op's gradient through the tape against central
//! finite differences, including the masked versions over a dynamic dim.

use crate::common::*;
use verjus_core::ops::{BinaryOp, UnaryOp};
use verjus_rf::*;

type Input = (Vec<Dim>, Vec<usize>, Vec<f32>);

fn input(dims: &[&Dim], sizes: &[usize], seed: u64) -> Input {
    let n = sizes.iter().product();
    (
        dims.iter().map(|d| (*d).clone()).collect(),
        sizes.to_vec(),
        uniform(seed, n, -1.0, 1.0),
    )
}

/// Values in [0.5, 1.5): away from 0 for div, log, sqrt.
fn positive(dims: &[&Dim], sizes: &[usize], seed: u64) -> Input {
    let (d, s, v) = input(dims, sizes, seed);
    (d, s, v.into_iter().map(|x| x * 0.5 + 1.0).collect())
}

#[test]
fn binary_ops_with_broadcast_and_transpose() {
    let (b, t, f) = (
        batch_dim(),
        Dim::new_static(2, "t"),
        Dim::new_static(3, "f"),
    );
    for op in [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
    ] {
        gradcheck(
            op.name(),
            &[
                positive(&[&b, &t, &f], &[2, 2, 3], 1),
                positive(&[&f, &b], &[3, 2], 2),
            ],
            |x| combine(&x[0], op, &x[1], false).unwrap(),
        );
    }
    gradcheck("scalar ops", &[positive(&[&f], &[3], 3)], |x| {
        let y = combine_scalar(&x[0], BinaryOp::Div, 2.0, true).unwrap();
        combine_scalar(&y, BinaryOp::Pow, 2.0, false).unwrap()
    });
}

#[test]
fn matmul_in_every_layout() {
    let (b, i, j, k) = (
        batch_dim(),
        Dim::new_static(3, "i"),
        Dim::new_static(2, "j"),
        Dim::new_static(4, "k"),
    );
    gradcheck(
        "matmul batched",
        &[
            input(&[&b, &i, &k], &[2, 3, 4], 1),
            input(&[&k, &j, &b], &[4, 2, 2], 2),
        ],
        |x| matmul(&x[0], &x[1], std::slice::from_ref(&k), true).unwrap(),
    );
    gradcheck(
        "matmul shared weight",
        &[
            input(&[&b, &i, &k], &[2, 3, 4], 3),
            input(&[&j, &k], &[2, 4], 4),
        ],
        |x| matmul(&x[0], &x[1], std::slice::from_ref(&k), true).unwrap(),
    );
    let t = time(&[3, 1]);
    gradcheck(
        "matmul masked",
        &[
            input(&[&b, &t, &i], &[2, 3, 3], 5),
            input(&[&t, &b], &[3, 2], 6),
        ],
        |x| matmul(&x[0], &x[1], std::slice::from_ref(&t), true).unwrap(),
    );
}

#[test]
fn masked_reductions_and_softmax() {
    let (b, f) = (batch_dim(), Dim::new_static(2, "f"));
    let t = time(&[3, 2, 0]);
    let x = || input(&[&b, &t, &f], &[3, 3, 2], 7);
    for mode in [
        ReduceMode::Sum,
        ReduceMode::Mean,
        ReduceMode::Max,
        ReduceMode::Min,
        ReduceMode::LogSumExp,
    ] {
        gradcheck(mode.name(), &[x()], |x| {
            reduce(&x[0], mode, std::slice::from_ref(&t), true).unwrap()
        });
    }
    gradcheck("mean over [time, f]", &[x()], |x| {
        reduce(&x[0], ReduceMode::Mean, &[t.clone(), f.clone()], true).unwrap()
    });
    gradcheck("softmax", &[x()], |x| softmax(&x[0], &t, true).unwrap());
    gradcheck("log_softmax", &[x()], |x| {
        log_softmax(&x[0], &t, true).unwrap()
    });
    gradcheck("softmax static", &[x()], |x| {
        softmax(&x[0], &f, true).unwrap()
    });
}

#[test]
fn unary_ops_and_where() {
    let f = Dim::new_static(4, "f");
    for op in [
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Abs,
        UnaryOp::Square,
        UnaryOp::Neg,
    ] {
        let (d, s, v) = positive(&[&f], &[4], 8);
        // Values on both sides of the kinks of relu and abs (away from them),
        // positive for the functions defined only there.
        let positive_only = matches!(op, UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt);
        let v = v
            .iter()
            .enumerate()
            .map(|(i, x)| if i % 2 == 0 || positive_only { *x } else { -x })
            .collect();
        gradcheck(op.name(), &[(d, s, v)], |x| activation(&x[0], op).unwrap());
    }
    gradcheck("safe_log", &[positive(&[&f], &[4], 9)], |x| {
        safe_log(&x[0], 1e-6).unwrap()
    });
    let t = time(&[2, 1]);
    let b = batch_dim();
    gradcheck(
        "where",
        &[input(&[&b, &t], &[2, 2], 10), input(&[&t], &[2], 11)],
        |x| {
            let m = sequence_mask(std::slice::from_ref(&t), &be()).unwrap();
            where_(&m, &x[0], &x[1], false).unwrap()
        },
    );
}

#[test]
fn gradient_by_dims() {
    let (b, f) = (batch_dim(), Dim::new_static(3, "f"));
    let x = leaf(&[&b, &f], &[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let sq = activation(&x, UnaryOp::Square).unwrap();
    let y = reduce(&sq, ReduceMode::Sum, &[b.clone(), f.clone()], true).unwrap();
    let g = gradient(&y, &x).unwrap();
    assert_eq!(names(&g), ["batch", "f"]);
    assert_eq!(vals(&g), [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
    let unrelated = leaf(&[&f], &[3], vec![0.0; 3]);
    assert_eq!(vals(&gradient(&y, &unrelated).unwrap()), [0.0; 3]);
    let y = stop_gradient(&y);
    assert!(gradient(&y, &x).is_err(), "a stopped gradient has no tape");
}
