//! The batched-vs-single-entry check for each op: every batch entry, run
//! alone (batch of 1, time cut to its own length), must give the batched
//! result's slice. This is what catches masking bugs.

use crate::common::*;
use verjus_core::ops::{BinaryOp, UnaryOp};
use verjus_rf::*;

const LENS: [i32; 4] = [4, 1, 0, 3];

struct Setup {
    t: Dim,
    f: Dim,
    /// x over [batch, time, f].
    x: (Vec<Dim>, Vec<usize>, Vec<f32>),
    /// y over [f, time, batch] (another order).
    y: (Vec<Dim>, Vec<usize>, Vec<f32>),
}

fn setup() -> Setup {
    let (t, f, b) = (time(&LENS), Dim::new_static(3, "f"), batch_dim());
    let x = (
        vec![b.clone(), t.clone(), f.clone()],
        vec![4, 4, 3],
        uniform(1, 48, -2.0, 2.0),
    );
    let y = (
        vec![f.clone(), t.clone(), b],
        vec![3, 4, 4],
        uniform(2, 48, 0.5, 2.0),
    );
    Setup { t, f, x, y }
}

fn check(name: &str, two: bool, f: impl Fn(&[RfTensor], &Dim, &Dim) -> RfTensor) {
    let s = setup();
    let inputs = if two { vec![s.x, s.y] } else { vec![s.x] };
    let feat = s.f.clone();
    check_single_entry(name, &LENS, &inputs, &s.t, |x, t| f(x, t, &feat));
}

#[test]
fn binary_and_unary_ops() {
    for op in [BinaryOp::Add, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Lt] {
        check(op.name(), true, |x, _, _| {
            combine(&x[0], op, &x[1], false).unwrap()
        });
    }
    check("scalar", false, |x, _, _| {
        combine_scalar(&x[0], BinaryOp::Sub, 1.0, true).unwrap()
    });
    for op in [UnaryOp::Relu, UnaryOp::Tanh, UnaryOp::Exp] {
        check(op.name(), false, |x, _, _| activation(&x[0], op).unwrap());
    }
    check("cast", false, |x, _, _| {
        cast(&x[0], RfDType::Int32).unwrap()
    });
    check("where", true, |x, t, _| {
        let m = sequence_mask(std::slice::from_ref(t), &be()).unwrap();
        let c = combine(&x[0], BinaryOp::Gt, &x[1], false).unwrap();
        let c = combine(&c, BinaryOp::Mul, &m, false).unwrap();
        where_(&c, &x[0], &x[1], false).unwrap()
    });
}

#[test]
fn reductions_over_time() {
    for mode in [
        ReduceMode::Sum,
        ReduceMode::Mean,
        ReduceMode::Max,
        ReduceMode::Min,
        ReduceMode::LogSumExp,
    ] {
        check(mode.name(), false, |x, t, _| {
            reduce(&x[0], mode, std::slice::from_ref(t), true).unwrap()
        });
        check(mode.name(), false, |x, t, f| {
            reduce(&x[0], mode, &[f.clone(), t.clone()], true).unwrap()
        });
    }
    check("reduce over f", false, |x, _, f| {
        reduce(&x[0], ReduceMode::Mean, std::slice::from_ref(f), true).unwrap()
    });
    check("argmax", false, |x, t, _| argmax(&x[0], t, true).unwrap());
}

#[test]
fn softmax_and_matmul() {
    check("softmax", false, |x, t, _| softmax(&x[0], t, true).unwrap());
    check("log_softmax", false, |x, t, _| {
        log_softmax(&x[0], t, true).unwrap()
    });
    check("softmax over f", false, |x, _, f| {
        softmax(&x[0], f, true).unwrap()
    });
    check("matmul over time", true, |x, t, _| {
        matmul(&x[0], &x[1], std::slice::from_ref(t), true).unwrap()
    });
    check("matmul over f", true, |x, _, f| {
        matmul(&x[0], &x[1], std::slice::from_ref(f), true).unwrap()
    });
}
