//! Gradients are summed where they meet: shared parameters, fan-outs, and an
//! output that also feeds another layer.

use crate::common::{assert_close, be, build, host, rand_tensor, set_param, tensor, zeros_like};
use verjus_core::Tensor;
use verjus_nn::{Loss, Network};

const SHARED: &str = r#"{"inputs": [{"name": "x", "shape": [4]}], "layers": [
    {"name": "fa", "type": "Linear", "out_features": 4},
    {"name": "act", "type": "Tanh"},
    {"name": "fb", "type": "Linear", "out_features": 4, "share": "fa"},
    {"name": "head", "type": "Linear", "out_features": 2}]}"#;

/// Forward, MSE loss against `target`, backward; returns the host gradients.
fn step(net: &Network, x: &Tensor, target: &Tensor) -> Vec<Vec<f32>> {
    let be = be();
    let mut ctx = net.new_context(&be, x.dims()[0]).unwrap();
    ctx.set_train(true);
    net.compute_output(&be, &mut ctx, &[x]).unwrap();
    let mut dy = zeros_like(&be, ctx.output(0));
    Loss::Mse
        .compute(&be, ctx.output(0), target, Some(&mut dy))
        .unwrap();
    net.compute_gradients(&be, &mut ctx, &[&dy]).unwrap();
    ctx.param_grads().iter().map(|g| host(&be, g)).collect()
}

fn sgd(net: &mut Network, i: usize, grad: &[f32], lr: f32, batch: usize) {
    let be = be();
    let v: Vec<f32> = host(&be, &net.parameters()[i].value)
        .iter()
        .zip(grad)
        .map(|(p, g)| p - lr * g / batch as f32)
        .collect();
    set_param(net, i, v);
}

#[test]
fn shared_linear_trains_like_two_equal_linears() {
    let be = be();
    let mut shared = build(SHARED, 3);
    let mut twin = build(&SHARED.replace(r#", "share": "fa""#, ""), 3);
    assert_eq!(shared.parameters().len(), 4);
    assert_eq!(twin.parameters().len(), 6);
    assert_eq!(shared.descriptors()[2].shares.as_deref(), Some("fa"));
    assert_eq!(shared.descriptors()[2].params[0].name, "fa.weight");
    // twin: fa (0, 1), fb (2, 3), head (4, 5) start equal to shared: fa (0, 1), head (2, 3).
    for (t, s) in [(0, 0), (1, 1), (2, 0), (3, 1), (4, 2), (5, 3)] {
        set_param(&mut twin, t, host(&be, &shared.parameters()[s].value));
    }
    let batch = 6;
    let x = rand_tensor(&be, &[batch, 4], 1);
    let target = rand_tensor(&be, &[batch, 2], 2);
    for it in 0..5 {
        let gs = step(&shared, &x, &target);
        let gt = step(&twin, &x, &target);
        for (s, (a, b)) in [(0, (0, 2)), (1, (1, 3))] {
            let sum: Vec<f32> = gt[a].iter().zip(&gt[b]).map(|(x, y)| x + y).collect();
            assert_close(
                &format!("step {it}: shared gradient {s}"),
                &gs[s],
                &sum,
                1e-5,
            );
            sgd(&mut shared, s, &gs[s], 0.5, batch);
            sgd(&mut twin, a, &sum, 0.5, batch);
            sgd(&mut twin, b, &sum, 0.5, batch);
        }
        for (s, t) in [(2, 4), (3, 5)] {
            assert_close(&format!("step {it}: head gradient"), &gs[s], &gt[t], 1e-5);
            sgd(&mut shared, s, &gs[s], 0.5, batch);
            sgd(&mut twin, t, &gt[t], 0.5, batch);
        }
    }
    let ys = shared.transform(&be, &[&x]).unwrap();
    let yt = twin.transform(&be, &[&x]).unwrap();
    assert_close(
        "trained outputs",
        &host(&be, &ys[0]),
        &host(&be, &yt[0]),
        1e-5,
    );
}

#[test]
fn fan_out_sums_the_consumers() {
    let be = be();
    // fc1 feeds three consumers; the reference has three equal copies of fc1.
    let fan = build(
        r#"{"inputs": [{"name": "x", "shape": [5]}], "layers": [
            {"name": "fc1", "type": "Linear", "out_features": 4},
            {"name": "r", "type": "ReLU", "inputs": ["fc1"]},
            {"name": "t", "type": "Tanh", "inputs": ["fc1"]},
            {"name": "sum", "type": "Add", "inputs": ["r", "t", "fc1"]}]}"#,
        4,
    );
    let mut reference = build(
        r#"{"inputs": [{"name": "x", "shape": [5]}], "layers": [
            {"name": "a", "type": "Linear", "out_features": 4},
            {"name": "b", "type": "Linear", "out_features": 4, "inputs": ["x"]},
            {"name": "c", "type": "Linear", "out_features": 4, "inputs": ["x"]},
            {"name": "r", "type": "ReLU", "inputs": ["a"]},
            {"name": "t", "type": "Tanh", "inputs": ["b"]},
            {"name": "sum", "type": "Add", "inputs": ["r", "t", "c"]}]}"#,
        4,
    );
    for r in 0..6 {
        set_param(&mut reference, r, host(&be, &fan.parameters()[r % 2].value));
    }
    let x = rand_tensor(&be, &[3, 5], 5);
    let dy = rand_tensor(&be, &[3, 4], 6);
    let run = |net: &Network| {
        let mut ctx = net.new_context(&be, 3).unwrap();
        ctx.set_input_grads(true);
        net.compute_output(&be, &mut ctx, &[&x]).unwrap();
        let y = host(&be, ctx.output(0));
        net.compute_gradients(&be, &mut ctx, &[&dy]).unwrap();
        let g: Vec<Vec<f32>> = ctx.param_grads().iter().map(|g| host(&be, g)).collect();
        (y, g, host(&be, ctx.input_grad(0).unwrap()))
    };
    let (yf, gf, dxf) = run(&fan);
    let (yr, gr, dxr) = run(&reference);
    assert_close("output", &yf, &yr, 1e-6);
    assert_close("input gradient", &dxf, &dxr, 1e-5);
    for p in 0..2 {
        let sum: Vec<f32> = (0..gr[p].len())
            .map(|i| gr[p][i] + gr[p + 2][i] + gr[p + 4][i])
            .collect();
        assert_close("fc1 gradient", &gf[p], &sum, 1e-5);
    }
}

#[test]
fn output_that_feeds_a_layer_gets_both_gradients() {
    let be = be();
    let net = build(
        r#"{"inputs": [{"name": "x", "shape": [3]}], "outputs": ["out", "h"], "layers": [
            {"name": "h", "type": "Linear", "out_features": 3},
            {"name": "act", "type": "Sigmoid"},
            {"name": "out", "type": "Linear", "out_features": 2}]}"#,
        8,
    );
    let x = rand_tensor(&be, &[4, 3], 1);
    let d_out = rand_tensor(&be, &[4, 2], 2);
    let d_h = rand_tensor(&be, &[4, 3], 3);
    let z_out = tensor(&be, &[4, 2], vec![0.0; 8]);
    let z_h = tensor(&be, &[4, 3], vec![0.0; 12]);
    let grads = |a: &Tensor, b: &Tensor| {
        let mut ctx = net.new_context(&be, 4).unwrap();
        net.compute_output(&be, &mut ctx, &[&x]).unwrap();
        net.compute_gradients(&be, &mut ctx, &[a, b]).unwrap();
        host(&be, &ctx.param_grads()[0])
    };
    let both = grads(&d_out, &d_h);
    let only_out = grads(&d_out, &z_h);
    let only_h = grads(&z_out, &d_h);
    let sum: Vec<f32> = only_out.iter().zip(&only_h).map(|(a, b)| a + b).collect();
    assert_close("h.weight gradient", &both, &sum, 1e-5);
    assert!(only_h.iter().any(|&g| g != 0.0));
}
