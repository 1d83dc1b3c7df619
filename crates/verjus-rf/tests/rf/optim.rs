//! The optimizers: a hand-worked SGD step, and each rule fitting a linear
//! map (the loss must fall by orders of magnitude).

use crate::common::*;
use verjus_core::ops::BinaryOp;
use verjus_rf::*;

#[test]
fn sgd_step_by_hand_and_refusals() {
    let f = Dim::new_static(2, "f");
    let w = leaf(&[&f], &[2], vec![1.0, -2.0]);
    let mut opt = Optimizer::new(
        vec![w.clone()],
        Rule::Sgd {
            lr: 0.1,
            momentum: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        },
    )
    .unwrap();
    // L = sum(w^2): dL/dw = 2w.
    let sq = combine(&w, BinaryOp::Mul, &w, false).unwrap();
    reduce(&sq, ReduceMode::Sum, std::slice::from_ref(&f), true)
        .unwrap()
        .var()
        .backward()
        .unwrap();
    opt.step().unwrap();
    assert_close("sgd", &vals(&w), &[0.8, -1.6], 1e-6);
    assert_eq!(opt.steps(), 1);
    opt.zero_grad();
    assert!(w.var().grad().is_none());
    let x = float(&[&f], &[2], vec![0.0; 2]);
    assert!(Optimizer::new(
        vec![x],
        Rule::Sgd {
            lr: 0.1,
            momentum: 0.0,
            nesterov: false,
            weight_decay: 0.0
        }
    )
    .is_err());
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
    let rules = [
        Rule::Sgd {
            lr: 0.3,
            momentum: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        },
        Rule::Sgd {
            lr: 0.1,
            momentum: 0.9,
            nesterov: true,
            weight_decay: 0.0,
        },
        Rule::Adam {
            lr: 0.05,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
        },
        Rule::Adam {
            lr: 0.05,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 1e-4,
            decoupled: true,
        },
    ];
    for rule in rules {
        let w = leaf(&[&i, &j], &[3, 2], vec![0.0; 6]);
        let mut opt = Optimizer::new(vec![w.clone()], rule).unwrap();
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
