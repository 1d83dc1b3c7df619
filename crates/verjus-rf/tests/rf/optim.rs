//! The optimizers: hand-worked SGD steps (plain, then scheduled and clipped),
//! per-parameter step counts, and each rule fitting a linear map (the loss
//! must fall by orders of magnitude).

use crate::common::*;
use verjus_core::ops::BinaryOp;
use verjus_core::optim::{Adam, LrSchedule, Sgd, SolverConfig, UpdateRule};
use verjus_rf::*;

fn config(rule: impl Into<UpdateRule>) -> SolverConfig {
    SolverConfig::from(rule.into())
}

/// `sum(w^2)` over `f`, whose gradient is `2w`.
fn backward_sum_of_squares(w: &RfTensor, f: &Dim) {
    let sq = combine(w, BinaryOp::Mul, w, false).unwrap();
    reduce(&sq, ReduceMode::Sum, std::slice::from_ref(f), true)
        .unwrap()
        .var()
        .backward()
        .unwrap();
}

#[test]
fn sgd_step_by_hand_and_refusals() {
    let f = Dim::new_static(2, "f");
    let w = leaf(&[&f], &[2], vec![1.0, -2.0]);
    let mut opt = Optimizer::new(vec![w.clone()], config(Sgd::new(0.1))).unwrap();
    // L = sum(w^2): dL/dw = 2w.
    backward_sum_of_squares(&w, &f);
    opt.step().unwrap();
    assert_close("sgd", &vals(&w), &[0.8, -1.6], 1e-6);
    assert_eq!(opt.steps(), 1);
    opt.zero_grad();
    assert!(w.var().grad().is_none());
    let x = float(&[&f], &[2], vec![0.0; 2]);
    assert!(Optimizer::new(vec![x], config(Sgd::new(0.1))).is_err());
    let bad = Sgd {
        momentum: 1.5,
        ..Sgd::new(0.1)
    };
    let err = Optimizer::new(vec![w.clone()], config(bad)).err().unwrap();
    assert!(err.to_string().contains("momentum"), "{err}");
    let mut clip = config(Sgd::new(0.1));
    clip.clip_norm = Some(0.0);
    let err = Optimizer::new(vec![w], clip).err().unwrap();
    assert!(err.to_string().contains("clip_norm"), "{err}");
}

#[test]
fn schedule_and_clipping_shape_the_steps() {
    let f = Dim::new_static(2, "f");
    let w = leaf(&[&f], &[2], vec![3.0, 4.0]);
    let settings = SolverConfig {
        rule: Sgd::new(0.1).into(),
        schedule: LrSchedule::Step {
            step_size: 1,
            gamma: 0.5,
        },
        clip_norm: Some(1.0),
    };
    let mut opt = Optimizer::new(vec![w.clone()], settings).unwrap();
    // Step 0: g = 2w = [6, 8] of norm 10, clipped to norm 1: w -= 0.1 * g / 10.
    backward_sum_of_squares(&w, &f);
    opt.step().unwrap();
    let w1 = [3.0 * 0.98, 4.0 * 0.98];
    assert_close("step 0", &vals(&w), &w1, 1e-5);
    // Step 1 at half the learning rate: g = 2 w1 of norm 9.8.
    opt.zero_grad();
    backward_sum_of_squares(&w, &f);
    opt.step().unwrap();
    let keep = 1.0 - 0.05 * 2.0 / 9.8;
    assert_close("step 1", &vals(&w), &[w1[0] * keep, w1[1] * keep], 1e-5);
}

#[test]
fn each_parameter_counts_its_own_steps() {
    // Adam's first update of a parameter moves it by about lr (the bias
    // correction of t = 1), also when the parameter joins on the second step.
    let f = Dim::new_static(2, "f");
    let a = leaf(&[&f], &[2], vec![1.0, 1.0]);
    let b = leaf(&[&f], &[2], vec![1.0, -1.0]);
    let mut opt = Optimizer::new(vec![a.clone(), b.clone()], config(Adam::new(0.01))).unwrap();
    backward_sum_of_squares(&a, &f);
    opt.step().unwrap();
    assert_close("a after step 0", &vals(&a), &[0.99, 0.99], 1e-5);
    assert_close("b without a gradient", &vals(&b), &[1.0, -1.0], 0.0);
    opt.zero_grad();
    backward_sum_of_squares(&b, &f);
    opt.step().unwrap();
    assert_close("b's first update", &vals(&b), &[0.99, -0.99], 1e-5);
    assert_close("a without a gradient", &vals(&a), &[0.99, 0.99], 0.0);
    assert_eq!(opt.steps(), 2);
}

#[test]
fn every_rule_fits_a_linear_map() {
    let (b, i, j) = (
        Dim::new_static(16, "b"),
        Dim::new_static(3, "i"),
        Dim::new_static(2, "j"),
    );
    let x = float(&[&b, &i], &[16, 3], uniform(1, 48, -1.0, 1.0));
    let truth = float(&[&i, &j], &[3, 2], vec![1.0, -1.0, 0.5, 2.0, -0.5, 0.0]);
    let y = matmul(&x, &truth, std::slice::from_ref(&i), true).unwrap();
    let rules: [UpdateRule; 4] = [
        Sgd::new(0.3).into(),
        Sgd {
            momentum: 0.9,
            nesterov: true,
            ..Sgd::new(0.1)
        }
        .into(),
        Adam::new(0.05).into(),
        Adam::adamw(0.05, 1e-4).into(),
    ];
    for rule in rules {
        let w = leaf(&[&i, &j], &[3, 2], vec![0.0; 6]);
        let mut opt = Optimizer::new(vec![w.clone()], config(rule)).unwrap();
        let loss = || {
            let d = combine(
                &matmul(&x, &w, std::slice::from_ref(&i), true).unwrap(),
                BinaryOp::Sub,
                &y,
                false,
            )
            .unwrap();
            let sq = combine(&d, BinaryOp::Mul, &d, false).unwrap();
            reduce(&sq, ReduceMode::Mean, &[b.clone(), j.clone()], true).unwrap()
        };
        let first = vals(&loss())[0];
        for _ in 0..300 {
            opt.zero_grad();
            loss().var().backward().unwrap();
            opt.step().unwrap();
        }
        let last = vals(&loss())[0];
        assert!(last < first * 1e-3, "{rule:?}: loss {first} -> {last}");
    }
}
