//! Solver tests on the native backend (whose fused update kernels the
//! conformance suite checks against the PyTorch formulas independently).

use super::*;
use verjus_core::{rng, BackendRef};

fn native() -> BackendRef {
    verjus_native::backend()
}

/// `check` as a test on the native backend.
macro_rules! on_native {
    ($check:ident) => {
        mod $check {
            #[test]
            fn native() {
                super::$check(&*super::native());
            }
        }
    };
}

fn tensor(data: &[f32]) -> Tensor {
    Tensor::from_vec([data.len()], data.to_vec()).unwrap()
}

fn param(name: &str, data: &[f32]) -> (String, Tensor) {
    (name.to_owned(), tensor(data))
}

fn assert_close(got: &Tensor, want: &[f64], tol: f64) {
    let got = got.as_slice::<f32>().unwrap();
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((f64::from(g) - w).abs() <= tol, "[{i}]: got {g}, want {w}");
    }
}

/// Two steps from p = [1, -2] with summed gradients G1 = [0.4, 0.2] and
/// G2 = [-0.2, 0.6] over a batch of 2 (mean gradients [0.2, 0.1], [-0.1, 0.3]).
fn two_steps(be: &dyn Backend, rule: impl Into<UpdateRule>) -> [Vec<f32>; 2] {
    let mut solver = Solver::new(rule);
    let mut params = [param("w", &[1.0, -2.0])];
    let mut after = Vec::new();
    for g in [[0.4, 0.2], [-0.2, 0.6]] {
        solver.step(be, &mut params, &[tensor(&g)], 2).unwrap();
        after.push(params[0].1.to_vec::<f32>().unwrap());
    }
    [after[0].clone(), after[1].clone()]
}

fn check_two(got: [Vec<f32>; 2], want: [[f64; 2]; 2]) {
    for (g, w) in got.iter().zip(want) {
        assert_close(&tensor(g), &w, 1e-6);
    }
}

fn sgd_momentum_two_steps(be: &dyn Backend) {
    // lr 0.1, momentum 0.9, weight decay 0.01.
    // Step 1: g = [0.2 + 0.01, 0.1 - 0.02] = [0.21, 0.08]; v = g;
    //         p = [1 - 0.021, -2 - 0.008] = [0.979, -2.008].
    // Step 2: g = [-0.1 + 0.00979, 0.3 - 0.02008] = [-0.09021, 0.27992];
    //         v = 0.9 [0.21, 0.08] + g = [0.09879, 0.35192];
    //         p = [0.979 - 0.009879, -2.008 - 0.035192] = [0.969121, -2.043192].
    let sgd = Sgd {
        momentum: 0.9,
        weight_decay: 0.01,
        ..Sgd::new(0.1)
    };
    check_two(two_steps(be, sgd), [[0.979, -2.008], [0.969121, -2.043192]]);
    // Dampening 0.5, no decay: v1 = g1 = [0.2, 0.1]; p1 = [0.98, -2.01];
    // v2 = 0.9 v1 + 0.5 g2 = [0.13, 0.24]; p2 = [0.967, -2.034].
    let damped = Sgd {
        momentum: 0.9,
        dampening: 0.5,
        ..Sgd::new(0.1)
    };
    check_two(two_steps(be, damped), [[0.98, -2.01], [0.967, -2.034]]);
}
on_native!(sgd_momentum_two_steps);

fn sgd_nesterov_two_steps(be: &dyn Backend) {
    // As above with Nesterov: the step is g + 0.9 v.
    // Step 1: v = g = [0.21, 0.08]; p = [1, -2] - 0.1 * 1.9 g = [0.9601, -2.0152].
    // Step 2: g = [-0.1 + 0.009601, 0.3 - 0.020152] = [-0.090399, 0.279848];
    //         v = 0.9 [0.21, 0.08] + g = [0.098601, 0.351848];
    //         g + 0.9 v = [-0.0016581, 0.5965112];
    //         p = [0.96026581, -2.07485112].
    let sgd = Sgd {
        momentum: 0.9,
        nesterov: true,
        weight_decay: 0.01,
        ..Sgd::new(0.1)
    };
    check_two(
        two_steps(be, sgd),
        [[0.9601, -2.0152], [0.96026581, -2.07485112]],
    );
}
on_native!(sgd_nesterov_two_steps);

fn adam_two_steps(be: &dyn Backend) {
    // Step 1 of Adam moves each coordinate by lr against the gradient's sign
    // (m̂ = g, v̂ = g², so m̂ / sqrt(v̂) = ±1, up to eps): [0.9, -2.1].
    // Step 2 (t = 2), for coordinate 0: m = 0.9 * 0.02 - 0.01 = 0.008,
    // v = 0.999 * 4e-5 + 0.001 * 0.01 = 4.996e-5; m̂ = 0.008 / 0.19,
    // v̂ = 4.996e-5 / 0.001999; p = 0.9 - 0.1 * m̂ / (sqrt(v̂) + 1e-8) = 0.873366.
    check_two(
        two_steps(be, Adam::new(0.1)),
        [[0.9, -2.1], [0.8733663027, -2.1917780978]],
    );
    // Adam's L2 term: g = ĝ + 0.1 p flips coordinate 1's gradient sign
    // (0.1 - 0.2 = -0.1), so step 1 is [0.9, -1.9].
    let l2 = Adam {
        weight_decay: 0.1,
        ..Adam::new(0.1)
    };
    check_two(
        two_steps(be, l2),
        [[0.9, -1.9], [0.8355117308, -1.9100134863]],
    );
    // AdamW decays first: p = (1 - 0.01) p, then the Adam step: [0.89, -2.08].
    check_two(
        two_steps(be, Adam::adamw(0.1, 0.1)),
        [[0.89, -2.08], [0.8544663027, -2.1509780979]],
    );
}
on_native!(adam_two_steps);

fn update_uses_actual_batch_size(be: &dyn Backend) {
    let mut solver = Solver::new(Sgd::new(1.0));
    let mut params = [param("w", &[0.0, 0.0])];
    // Summed over 4 examples: the mean is [1, 2].
    solver
        .step(be, &mut params, &[tensor(&[4.0, 8.0])], 4)
        .unwrap();
    assert_close(&params[0].1, &[-1.0, -2.0], 1e-6);
    // A short last batch of 3: the mean is [1, 1], not [0.75, 0.75].
    solver
        .step(be, &mut params, &[tensor(&[3.0, 3.0])], 3)
        .unwrap();
    assert_close(&params[0].1, &[-2.0, -3.0], 1e-6);
}
on_native!(update_uses_actual_batch_size);

fn clipping_by_global_norm(be: &dyn Backend) {
    // Two parameters; mean gradients [3] and [4] (summed over 2): global norm 5.
    let mut solver = Solver::new(Sgd::new(1.0)).with_clip_norm(1.0);
    let mut params = [param("a", &[0.0]), param("b", &[0.0])];
    let grads = [tensor(&[6.0]), tensor(&[8.0])];
    let stats = solver.step(be, &mut params, &grads, 2).unwrap();
    let norm = stats.grad_norm.unwrap();
    assert!((norm - 5.0).abs() < 1e-5, "{norm}");
    // Clipped to norm 1: [0.6] and [0.8].
    assert_close(&params[0].1, &[-0.6], 1e-5);
    assert_close(&params[1].1, &[-0.8], 1e-5);
    // Under the limit nothing changes: mean [0.3, 0.4] has norm 0.5.
    let mut params = [param("a", &[0.0, 0.0])];
    solver
        .step(be, &mut params, &[tensor(&[0.6, 0.8])], 2)
        .unwrap();
    assert_close(&params[0].1, &[-0.3, -0.4], 1e-6);
    // A rank-0 and a rank-2 gradient take part in the norm too.
    let mut params = [
        (
            "s".to_owned(),
            Tensor::from_vec(Vec::new(), vec![0.0f32]).unwrap(),
        ),
        (
            "m".to_owned(),
            Tensor::from_vec([2, 2], vec![0.0f32; 4]).unwrap(),
        ),
    ];
    let grads = [
        Tensor::from_vec(Vec::new(), vec![3.0f32]).unwrap(),
        Tensor::from_vec([2, 2], vec![2.0f32; 4]).unwrap(),
    ];
    let stats = solver.step(be, &mut params, &grads, 1).unwrap();
    assert!((stats.grad_norm.unwrap() - 5.0).abs() < 1e-5);
    assert_close(&params[0].1, &[-0.6], 1e-5);
}
on_native!(clipping_by_global_norm);

fn schedule_sets_the_step_lr(be: &dyn Backend) {
    let mut solver = Solver::new(Sgd::new(1.0)).with_schedule(LrSchedule::Step {
        step_size: 2,
        gamma: 0.5,
    });
    let mut params = [param("w", &[0.0])];
    let mut lrs = Vec::new();
    for _ in 0..5 {
        lrs.push(
            solver
                .step(be, &mut params, &[tensor(&[1.0])], 1)
                .unwrap()
                .lr,
        );
    }
    assert_eq!(lrs, [1.0, 1.0, 0.5, 0.5, 0.25]);
    assert_close(&params[0].1, &[-3.25], 1e-6);
    assert_eq!(solver.state().step(), 5);
    assert_eq!(solver.lr(), 0.25);
}
on_native!(schedule_sets_the_step_lr);

fn state_survives_rebuild(be: &dyn Backend) {
    let grads = |k: f32| [tensor(&[k, -k]), tensor(&[2.0 * k])];
    // One network stepped three times...
    let mut straight = Solver::new(Adam::new(0.1));
    let mut params = [param("fc.weight", &[1.0, 2.0]), param("fc.bias", &[0.5])];
    for k in [1.0, 0.5, -1.0] {
        straight.step(be, &mut params, &grads(k), 1).unwrap();
    }
    // ...and one rebuilt (new tensors, same names, other order) after each step.
    let mut rebuilt = Solver::new(Adam::new(0.1));
    let mut values = (tensor(&[1.0, 2.0]), tensor(&[0.5]));
    for k in [1.0, 0.5, -1.0] {
        let mut fresh = [("fc.bias", &mut values.1), ("fc.weight", &mut values.0)];
        let g = grads(k);
        rebuilt.step(be, &mut fresh, &[&g[1], &g[0]], 1).unwrap();
        values = (
            values.0.try_clone_host().unwrap(),
            values.1.try_clone_host().unwrap(),
        );
    }
    assert_eq!(
        values.0.to_vec::<f32>().unwrap(),
        params[0].1.to_vec::<f32>().unwrap()
    );
    assert_eq!(
        values.1.to_vec::<f32>().unwrap(),
        params[1].1.to_vec::<f32>().unwrap()
    );
    assert_eq!(rebuilt.state().get("fc.weight").unwrap().steps, 3);
    let names: Vec<String> = rebuilt
        .state_tensors()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        ["fc.bias.m", "fc.bias.v", "fc.weight.m", "fc.weight.v"]
    );
}
on_native!(state_survives_rebuild);

fn state_restores_from_tensors(be: &dyn Backend) {
    // Train two steps, "checkpoint" the state by name, restore it into a new
    // solver, and take a third step with both: the results agree.
    let grads = |k: f32| [tensor(&[k, 1.0 - k])];
    let mut first = Solver::new(Adam::adamw(0.05, 0.01));
    let mut params = [param("w", &[0.5, -0.5])];
    for k in [1.0, -2.0] {
        first.step(be, &mut params, &grads(k), 1).unwrap();
    }
    let mut second = Solver::new(Adam::adamw(0.05, 0.01));
    second.state_mut().set_step(first.state().step());
    for (name, st) in first.state().entries() {
        let slots = st
            .slots
            .iter()
            .map(|t| t.try_clone_host().unwrap())
            .collect();
        second
            .state_mut()
            .insert(name, ParamState::new(st.steps, slots));
    }
    let mut copy = [param("w", &params[0].1.to_vec::<f32>().unwrap())];
    first.step(be, &mut params, &grads(0.25), 1).unwrap();
    second.step(be, &mut copy, &grads(0.25), 1).unwrap();
    assert_eq!(
        params[0].1.to_vec::<f32>().unwrap(),
        copy[0].1.to_vec::<f32>().unwrap()
    );
    assert_eq!(second.state().get("w").unwrap().steps, 3);
    assert_eq!(second.state().len(), 1);
}
on_native!(state_restores_from_tensors);

/// Linear regression `y = x·w* + b*` on 32 points, full batch, loss
/// `½ Σ (x·w + b − y)²`; gradients summed over the batch as a network gives them.
fn fit_linear_regression(be: &dyn Backend, solver: &mut Solver, steps: usize) -> Vec<f32> {
    const N: usize = 32;
    let (w_star, b_star) = ([1.5f32, -2.0, 0.5], 0.3f32);
    let x: Vec<[f32; 3]> = (0..N)
        .map(|i| {
            std::array::from_fn(|j| 2.0 * rng::unit_uniform(rng::word_at(9, 0, 3 * i + j)) - 1.0)
        })
        .collect();
    let y: Vec<f32> = x
        .iter()
        .map(|xi| xi.iter().zip(&w_star).map(|(a, b)| a * b).sum::<f32>() + b_star)
        .collect();
    let mut params = [param("w", &[0.0; 3]), param("b", &[0.0])];
    for _ in 0..steps {
        let w = params[0].1.to_vec::<f32>().unwrap();
        let b = params[1].1.as_slice::<f32>().unwrap()[0];
        let (mut gw, mut gb) = ([0.0f32; 3], 0.0f32);
        for (xi, yi) in x.iter().zip(&y) {
            let r = xi.iter().zip(&w).map(|(a, b)| a * b).sum::<f32>() + b - yi;
            for j in 0..3 {
                gw[j] += r * xi[j];
            }
            gb += r;
        }
        solver
            .step(be, &mut params, &[tensor(&gw), tensor(&[gb])], N)
            .unwrap();
    }
    let mut fitted = params[0].1.to_vec::<f32>().unwrap();
    fitted.extend(params[1].1.as_slice::<f32>().unwrap());
    fitted
}

fn sgd_converges(be: &dyn Backend) {
    let mut solver = Solver::new(Sgd {
        momentum: 0.9,
        nesterov: true,
        ..Sgd::new(0.2)
    });
    let fitted = fit_linear_regression(be, &mut solver, 300);
    assert_close(&tensor(&fitted), &[1.5, -2.0, 0.5, 0.3], 1e-3);
}
on_native!(sgd_converges);

fn adam_converges(be: &dyn Backend) {
    let mut solver = Solver::new(Adam::new(0.1)).with_schedule(LrSchedule::Cosine {
        warmup_steps: 10,
        total_steps: 500,
        min_lr: 0.0,
    });
    let fitted = fit_linear_regression(be, &mut solver, 500);
    assert_close(&tensor(&fitted), &[1.5, -2.0, 0.5, 0.3], 1e-3);
}
on_native!(adam_converges);

// The checks below fail before any kernel runs, so they need no backend kernels.

#[test]
fn state_is_allocated_lazily_per_rule() {
    let be = native();
    let mut params = [param("w", &[1.0])];
    let mut plain = Solver::new(Sgd::new(0.1));
    plain.step(&*be, &mut params, &[tensor(&[1.0])], 1).unwrap();
    assert!(plain.state().get("w").unwrap().slots.is_empty());
    assert!(plain.state_tensors().is_empty());
    let mut momentum = Solver::new(Sgd {
        momentum: 0.5,
        ..Sgd::new(0.1)
    });
    assert!(momentum.state().is_empty());
    momentum
        .step(&*be, &mut params, &[tensor(&[1.0])], 1)
        .unwrap();
    assert_eq!(momentum.state_tensors()[0].0, "w.velocity");
}

#[test]
fn bad_calls_change_nothing() {
    let be = native();
    let mut solver = Solver::new(Adam::new(0.1));
    let mut params = [param("a", &[1.0, 2.0]), param("b", &[3.0])];
    let g = [tensor(&[1.0, 1.0]), tensor(&[1.0])];
    let err = |r: Result<StepStats>| r.unwrap_err().to_string();

    let e = err(solver.step(&*be, &mut params, &g[..1], 1));
    assert!(e.contains("1 gradients for 2 parameters"), "{e}");
    let e = err(solver.step(&*be, &mut params, &g, 0));
    assert!(e.contains("empty"), "{e}");
    let e = err(solver.step(&*be, &mut params, &[tensor(&[1.0]), tensor(&[1.0])], 1));
    assert!(
        e.contains("\"a\"") && e.contains("[2]") && e.contains("[1]"),
        "{e}"
    );

    let mut twins = [param("a", &[1.0]), param("a", &[2.0])];
    let e = err(solver.step(&*be, &mut twins, &[tensor(&[1.0]), tensor(&[1.0])], 1));
    assert!(e.contains("two parameters are named \"a\""), "{e}");

    // The definition changed: "a" now has another shape than its state.
    let mut other = [param("a", &[1.0, 2.0, 3.0])];
    let e = err(solver.step(&*be, &mut other, &[tensor(&[1.0; 3])], 1));
    assert!(e.contains("state of parameter \"a\""), "{e}");
    solver.state_mut().remove("a");
    assert!(solver.state().get("a").is_none());

    for rule in [
        UpdateRule::from(Sgd {
            momentum: 1.5,
            ..Sgd::new(0.1)
        }),
        Sgd {
            nesterov: true,
            ..Sgd::new(0.1)
        }
        .into(),
        Sgd::new(f32::NAN).into(),
        Adam {
            beta2: 1.0,
            ..Adam::new(0.1)
        }
        .into(),
        Adam::adamw(0.1, -1.0).into(),
    ] {
        let mut bad = Solver::new(rule);
        assert!(bad.step(&*be, &mut params, &g, 1).is_err(), "{rule:?}");
    }
    let mut bad = Solver::new(Sgd::new(0.1)).with_clip_norm(0.0);
    let e = err(bad.step(&*be, &mut params, &g, 1));
    assert!(e.contains("clip_norm"), "{e}");

    assert_eq!(params[0].1.to_vec::<f32>().unwrap(), [1.0, 2.0]);
    assert_eq!(params[1].1.to_vec::<f32>().unwrap(), [3.0]);
    assert_eq!(solver.state().step(), 0);
}

#[test]
fn solver_config_round_trips_through_json() {
    let rule = UpdateRule::from(Adam::adamw(1e-3, 0.01));
    let json = serde_json::to_string(&rule).unwrap();
    assert_eq!(serde_json::from_str::<UpdateRule>(&json).unwrap(), rule);
    let schedule = LrSchedule::Cosine {
        warmup_steps: 100,
        total_steps: 1000,
        min_lr: 1e-5,
    };
    let json = serde_json::to_string(&schedule).unwrap();
    assert_eq!(serde_json::from_str::<LrSchedule>(&json).unwrap(), schedule);
}

#[test]
fn solver_from_config_checks_and_gives_it_back() {
    let sgd: SolverConfig = serde_json::from_str(
        r#"{"rule": {"Sgd": {"lr": 0.1, "momentum": 0.9}},
            "schedule": {"Step": {"step_size": 10, "gamma": 0.5}}, "clip_norm": 1.0}"#,
    )
    .unwrap();
    let solver = Solver::from_config(sgd).unwrap();
    assert_eq!(
        solver.rule,
        UpdateRule::Sgd(Sgd {
            momentum: 0.9,
            ..Sgd::new(0.1)
        })
    );
    assert_eq!(solver.clip_norm, Some(1.0));
    assert_eq!(solver.config(), sgd);
    let bad = |json: &str| {
        let cfg: SolverConfig = serde_json::from_str(json).unwrap();
        Solver::from_config(cfg).unwrap_err().to_string()
    };
    let err = bad(r#"{"rule": {"Adam": {"lr": 0.01, "beta1": 1.5}}}"#);
    assert!(err.contains("beta1"), "{err}");
    let err = bad(r#"{"rule": {"Sgd": {"lr": 0.1}}, "clip_norm": -1.0}"#);
    assert!(err.contains("clip_norm"), "{err}");
    let err = bad(
        r#"{"rule": {"Sgd": {"lr": 0.1}}, "schedule": {"Step": {"step_size": 0, "gamma": 0.5}}}"#,
    );
    assert!(err.contains("step_size"), "{err}");
}
