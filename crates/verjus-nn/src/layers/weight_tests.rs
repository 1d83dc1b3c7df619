//! Weight dropout and weight noise (`weight_param`) through whole networks:
//! inference is the plain layer; in training the derived weight has the
//! requested drop rate and noise; gradients match central differences with
//! the masks fixed by the seed; the same seed and step draw the same values;
//! bad settings are definition errors that name the layer.

use super::seq_tests::{check_mode, feed_floats, run, values, Feed};
use crate::{Network, NetworkDef};
use verjus_core::{ops, BackendRef, Tensor};

fn be() -> BackendRef {
    verjus_native::backend()
}

fn net(json: &str) -> Network {
    Network::build(NetworkDef::from_json(json).unwrap(), &*be(), 3).unwrap()
}

/// A one-input network of `layers` (a JSON list) on units of `shape`.
fn def(shape: &str, layers: &str) -> String {
    format!(r#"{{"inputs": [{{"name": "x", "shape": {shape}}}], "layers": {layers}}}"#)
}

/// Output 0 of a fresh context of `net` (training when `train`), then the
/// parameter gradients of `sum(output * r)`.
fn output_and_grads(net: &Network, x: &Tensor, train: bool) -> (Vec<f32>, Vec<Vec<f32>>) {
    let be = be();
    let mut ctx = net.new_context(&*be, x.dims()[0]).unwrap();
    ctx.set_train(train);
    net.compute_output(&*be, &mut ctx, &[x]).unwrap();
    let y = ctx.output(0).to_vec::<f32>().unwrap();
    let r = Tensor::from_vec(ctx.output(0).dims().to_vec(), values(y.len(), 5)).unwrap();
    net.compute_gradients(&*be, &mut ctx, &[&r]).unwrap();
    let g = ctx
        .param_grads()
        .iter()
        .map(|g| g.to_vec().unwrap())
        .collect();
    (y, g)
}

/// `[n, n]` identity: a bias-free Linear's output on it is its weight transposed.
fn identity(n: usize) -> Tensor {
    let v = (0..n * n)
        .map(|i| f32::from(u8::from(i % (n + 1) == 0)))
        .collect();
    Tensor::from_vec([n, n], v).unwrap()
}

/// The weight a bias-free Linear `in -> out` computes with, `[out, in]`, from
/// its output on the identity (exact: every sum adds zeros).
fn used_weight(net: &Network, train: bool, fan_in: usize) -> (Vec<f32>, Vec<f32>) {
    let (y, _) = output_and_grads(net, &identity(fan_in), train);
    let out = y.len() / fan_in;
    let used = (0..out * fan_in)
        .map(|k| y[(k % fan_in) * out + k / fan_in])
        .collect();
    let stored = net.parameters()[0].value.to_vec().unwrap();
    (used, stored)
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

const FC: &str = r#"{"name": "fc", "type": "Linear", "out_features": 256, "bias": false"#;

#[test]
fn inference_is_the_plain_layer() {
    let x = Tensor::from_vec([2, 3, 6, 6], values(216, 1)).unwrap();
    let conv = r#"[{"name": "conv", "type": "Conv2d", "out_channels": 4, "kernel": 3OPT},
        {"name": "flat", "type": "Flatten"},
        {"name": "fc", "type": "Linear", "out_features": 5OPT}]"#;
    let opt = r#", "weight_dropout": 0.5, "weight_noise": {"weight": 0.3, "bias": 0.2}"#;
    let plain = net(&def("[3, 6, 6]", &conv.replace("OPT", "")));
    let param = net(&def("[3, 6, 6]", &conv.replace("OPT", opt)));
    assert_eq!(
        output_and_grads(&plain, &x, false),
        output_and_grads(&param, &x, false)
    );
    // ... and in training it is not.
    assert_ne!(
        output_and_grads(&plain, &x, true).0,
        output_and_grads(&param, &x, true).0
    );
    let rnn = r#"[{"name": "rnn", "type": "LSTM", "hidden": 4, "num_layers": 2OPT}]"#;
    let opt = r#", "weight_dropout": {"weight_hh": 0.4}, "weight_noise": 0.2"#;
    let plain = net(&def("[null, 3]", &rnn.replace("OPT", "")));
    let param = net(&def("[null, 3]", &rnn.replace("OPT", opt)));
    let feed = feed_floats(3, 4, 3, vec![4, 2, 3]);
    let r = values(3 * 4 * 4, 2);
    assert_eq!(run(&plain, &feed, &r, false), run(&param, &feed, &r, false));
    assert_ne!(run(&plain, &feed, &r, true), run(&param, &feed, &r, true));
}

#[test]
fn weight_dropout_drops_at_its_rate_and_scales_the_rest() {
    let p = 0.3;
    let net = net(&def("[64]", &format!(r#"[{FC}, "weight_dropout": {p}}}]"#)));
    let (used, stored) = used_weight(&net, true, 64);
    let mut dropped = 0;
    for (u, w) in used.iter().zip(&stored) {
        if *u == 0.0 {
            dropped += 1;
        } else {
            let kept = w / (1.0 - p);
            assert!((u - kept).abs() <= 1e-6 * kept.abs(), "{u} vs {kept}");
        }
    }
    let rate = f64::from(dropped) / used.len() as f64;
    assert!((rate - f64::from(p)).abs() < 0.02, "drop rate {rate}");
    // Inference uses the stored weight.
    assert_eq!(used_weight(&net, false, 64).0, stored);
}

#[test]
fn weight_noise_adds_gaussian_noise_of_its_std() {
    let std = 0.1;
    let net = net(&def("[64]", &format!(r#"[{FC}, "weight_noise": {std}}}]"#)));
    let (used, stored) = used_weight(&net, true, 64);
    let noise: Vec<f64> = used
        .iter()
        .zip(&stored)
        .map(|(u, w)| f64::from(u - w))
        .collect();
    let (mean, sd) = mean_std(&noise);
    assert!(mean.abs() < 0.005, "noise mean {mean}");
    assert!((sd / std - 1.0).abs() < 0.05, "noise std {sd}");
}

#[test]
fn weight_dropout_applies_to_the_noisy_weight() {
    let (p, std) = (0.5f32, 0.2);
    let layers = format!(r#"[{FC}, "weight_dropout": {p}, "weight_noise": {std}}}]"#);
    let net = net(&def("[64]", &layers));
    let (used, stored) = used_weight(&net, true, 64);
    let kept: Vec<f64> = used
        .iter()
        .zip(&stored)
        .filter(|(u, _)| **u != 0.0)
        .map(|(u, w)| f64::from(u * (1.0 - p) - w))
        .collect();
    let rate = 1.0 - kept.len() as f64 / used.len() as f64;
    assert!((rate - f64::from(p)).abs() < 0.02, "drop rate {rate}");
    let (mean, sd) = mean_std(&kept);
    assert!(mean.abs() < 0.01, "noise mean {mean}");
    assert!((sd / std - 1.0).abs() < 0.05, "noise std {sd}");
}

#[test]
fn lstm_recurrent_weight_dropout_masks_only_its_gradient() {
    let p = 0.25;
    let json = def(
        "[null, 8]",
        &format!(
            r#"[{{"name": "rnn", "type": "LSTM", "hidden": 32, "weight_dropout": {{"weight_hh": {p}}}}}]"#
        ),
    );
    let net = net(&json);
    let be = be();
    let feed = feed_floats(4, 6, 8, vec![6, 5, 6, 3]);
    let mut ctx = net.new_context(&*be, 4).unwrap();
    ctx.set_train(true);
    net.compute_output_with_lengths(&*be, &mut ctx, &[&feed.x], Some(&feed.lengths))
        .unwrap();
    let r = Tensor::from_vec(
        ctx.output(0).dims().to_vec(),
        values(ctx.output(0).numel(), 9),
    )
    .unwrap();
    net.compute_gradients(&*be, &mut ctx, &[&r]).unwrap();
    let zeros = |i: usize| {
        let g = ctx.param_grads()[i].to_vec::<f32>().unwrap();
        g.iter().filter(|v| **v == 0.0).count() as f64 / g.len() as f64
    };
    let names: Vec<&str> = net.parameters().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names[..2], ["rnn.weight_ih_l0", "rnn.weight_hh_l0"]);
    assert!(zeros(0) < 0.01, "weight_ih gradient zeros {}", zeros(0));
    assert!((zeros(1) - p).abs() < 0.04, "weight_hh {}", zeros(1));
}

/// Central differences of `sum(output * r)` against the analytic gradients of
/// every parameter (at a spread of elements) and of the input, in training:
/// each evaluation is a fresh context, so it draws the same masks and noise.
fn check_fixed_input(json: &str, x: Tensor) {
    let be = be();
    let mut net = net(json);
    let mut ctx = net.new_context(&*be, x.dims()[0]).unwrap();
    ctx.set_train(true);
    ctx.set_input_grads(true);
    net.compute_output(&*be, &mut ctx, &[&x]).unwrap();
    let r = values(ctx.output(0).numel(), 11);
    let dy = Tensor::from_vec(ctx.output(0).dims().to_vec(), r.clone()).unwrap();
    net.compute_gradients(&*be, &mut ctx, &[&dy]).unwrap();
    let grads: Vec<Vec<f32>> = ctx
        .param_grads()
        .iter()
        .map(|g| g.to_vec().unwrap())
        .collect();
    let dx: Vec<f32> = ctx.input_grad(0).unwrap().to_vec().unwrap();
    let eval = |net: &Network, x: &Tensor| {
        let mut c = net.new_context(&*be, x.dims()[0]).unwrap();
        c.set_train(true);
        net.compute_output(&*be, &mut c, &[x]).unwrap();
        let y = c.output(0).to_vec::<f32>().unwrap();
        y.iter()
            .zip(&r)
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum::<f64>()
    };
    let eps = 1e-2f32;
    let close = |analytic: f32, plus: f64, minus: f64, what: &str| {
        let numeric = (plus - minus) / (2.0 * f64::from(eps));
        let tol = 1e-2 * (1.0 + numeric.abs());
        assert!(
            (f64::from(analytic) - numeric).abs() <= tol,
            "{what}: analytic {analytic}, numeric {numeric}"
        );
    };
    for (p, grad) in grads.iter().enumerate() {
        let n = grad.len();
        for i in (0..n).step_by((n / 9).max(1)) {
            let mut at = |delta: f32| {
                net.parameters_mut()[p].value.as_mut_slice::<f32>().unwrap()[i] += delta;
                eval(&net, &x)
            };
            let (plus, minus) = (at(eps), at(-2.0 * eps));
            at(eps);
            close(grad[i], plus, minus, &format!("parameter {p} [{i}]"));
        }
    }
    let mut x = x;
    for i in (0..x.numel()).step_by(3) {
        let mut at = |delta: f32| {
            x.as_mut_slice::<f32>().unwrap()[i] += delta;
            eval(&net, &x)
        };
        let (plus, minus) = (at(eps), at(-2.0 * eps));
        at(eps);
        close(dx[i], plus, minus, &format!("x[{i}]"));
    }
}

#[test]
fn linear_gradients_match_central_differences() {
    let layers = r#"[{"name": "fc", "type": "Linear", "out_features": 5,
        "weight_dropout": {"weight": 0.4, "bias": 0.3}, "weight_noise": {"weight": 0.2}},
        {"name": "act", "type": "Tanh"}]"#;
    let x = Tensor::from_vec([3, 7], values(21, 4)).unwrap();
    check_fixed_input(&def("[7]", layers), x);
    // Over leading axes too (the batched GEMM and its scratch).
    let x = Tensor::from_vec([2, 3, 7], values(42, 6)).unwrap();
    check_fixed_input(&def("[3, 7]", layers), x);
}

#[test]
fn conv2d_gradients_match_central_differences() {
    let layers = r#"[{"name": "conv", "type": "Conv2d", "out_channels": 3, "kernel": 3,
        "padding": 1, "weight_dropout": 0.3, "weight_noise": {"bias": 0.1}},
        {"name": "act", "type": "Tanh"}]"#;
    let x = Tensor::from_vec([2, 2, 5, 5], values(100, 8)).unwrap();
    check_fixed_input(&def("[2, 5, 5]", layers), x);
}

#[test]
fn lstm_gradients_match_central_differences() {
    let layers = r#"[{"name": "rnn", "type": "LSTM", "hidden": 4, "num_layers": 2,
        "bidirectional": true, "weight_dropout": {"weight_hh": 0.3, "weight_ih_l1": 0.2},
        "weight_noise": 0.1}]"#;
    check_mode(
        &def("[null, 3]", layers),
        feed_floats(3, 4, 3, vec![4, 1, 3]),
        true,
        true,
    );
}

#[test]
fn character_lm_gradients_match_central_differences() {
    // Embedding, LSTM and output layer, each with its own options.
    let layers = r#"[
        {"name": "embed", "type": "Embedding", "vocab": 5, "dim": 3, "weight_noise": 0.2},
        {"name": "rnn", "type": "LSTM", "hidden": 4,
         "weight_dropout": {"weight_hh": 0.3}, "weight_noise": {"weight_ih": 0.1}},
        {"name": "fc", "type": "Linear", "out_features": 5, "weight_dropout": 0.2}]"#;
    let json = format!(
        r#"{{"inputs": [{{"name": "chars", "shape": [null], "dtype": "int32"}}], "layers": {layers}}}"#
    );
    let feed = Feed {
        x: Tensor::from_vec([3, 4], vec![2, 0, 2, 1, 3, 4, 1, 2, 1, 1, 0, 3]).unwrap(),
        lengths: Tensor::from_vec([3], vec![4, 2, 3]).unwrap(),
    };
    check_mode(&json, feed, false, true);
}

#[test]
fn the_seed_and_step_decide_the_draw() {
    let layers = format!(r#"[{FC}, "weight_dropout": 0.5, "weight_noise": 0.1}}]"#);
    let net = net(&def("[64]", &layers));
    let be = be();
    let x = identity(64);
    let out = |seed: u64, step: u64| {
        let mut ctx = net.new_context(&*be, 64).unwrap();
        ctx.set_train(true);
        ctx.set_seed(seed);
        ctx.set_step(step);
        net.compute_output(&*be, &mut ctx, &[&x]).unwrap();
        ctx.output(0).to_vec::<f32>().unwrap()
    };
    let first = out(7, 0);
    assert_eq!(first, out(7, 0));
    assert_ne!(first, out(8, 0));
    assert_ne!(first, out(7, 1));
    // Within one context every training step draws afresh.
    let mut ctx = net.new_context(&*be, 64).unwrap();
    ctx.set_train(true);
    ctx.set_seed(7);
    net.compute_output(&*be, &mut ctx, &[&x]).unwrap();
    assert_eq!(ctx.output(0).to_vec::<f32>().unwrap(), first);
    net.compute_output(&*be, &mut ctx, &[&x]).unwrap();
    assert_ne!(ctx.output(0).to_vec::<f32>().unwrap(), first);
}

#[test]
fn bad_settings_are_errors_naming_the_layer() {
    let build = |layer: &str| {
        let json = def(
            "[4]",
            &format!(r#"[{{"name": "act", "type": "ReLU"}}, {layer}]"#),
        );
        match NetworkDef::from_json(&json) {
            Ok(d) => Network::build(d, &*be(), 0).map(|_| ()),
            Err(e) => Err(e),
        }
        .unwrap_err()
        .to_string()
    };
    let fc = r#""name": "fc2", "type": "Linear", "out_features": 2"#;
    for (option, words) in [
        (
            r#""weight_dropout": -0.1"#,
            &["fc2", "weight_dropout of weight", "-0.1"][..],
        ),
        (r#""weight_dropout": 1.0"#, &["fc2", "[0, 1)", "got 1"]),
        (
            r#""weight_dropout": {"bias": 1.5}"#,
            &["fc2", "of bias", "1.5"],
        ),
        (
            r#""weight_noise": -1"#,
            &["fc2", "weight_noise of weight", "-1"],
        ),
        (
            r#""weight_noise": {"wieght": 0.1}"#,
            &["fc2", "\"wieght\"", "weight, bias"],
        ),
        (r#""weight_noise": "0.1""#, &["fc2", "weight_noise"]),
    ] {
        let e = build(&format!("{{{fc}, {option}}}"));
        for w in words {
            assert!(e.contains(w), "{option}: {e:?} lacks {w:?}");
        }
    }
    let e = build(r#"{"name": "act2", "type": "ReLU", "weight_dropout": 0.1}"#);
    assert!(e.contains("act2") && e.contains("ReLU has none"), "{e}");
    let e = build(r#"{"name": "pool", "type": "Sequential", "weight_noise": 0.1, "layers": []}"#);
    assert!(e.contains("pool") && e.contains("container"), "{e}");
}

#[test]
fn definitions_round_trip_without_a_new_format_version() {
    let json = def(
        "[4]",
        r#"[{"name": "fc", "type": "Linear", "out_features": 2,
            "weight_dropout": {"weight": 0.25}, "weight_noise": 0.5}]"#,
    );
    let d = NetworkDef::from_json(&json).unwrap();
    assert_eq!(d.format_version, 1);
    let text = d.to_json();
    assert_eq!(NetworkDef::from_json(&text).unwrap(), d);
    assert!(text.contains("\"weight_dropout\"") && text.contains("\"weight_noise\": 0.5"));
    // A definition without them writes neither.
    let plain = NetworkDef::from_json(&def(
        "[4]",
        r#"[{"name": "fc", "type": "Linear", "out_features": 2}]"#,
    ))
    .unwrap()
    .to_json();
    assert!(!plain.contains("weight_"), "{plain}");
    // The parameters are the plain layer's: same names, shapes and initial values.
    let a = net(&json);
    let b = net(&def(
        "[4]",
        r#"[{"name": "fc", "type": "Linear", "out_features": 2}]"#,
    ));
    for (p, q) in a.parameters().iter().zip(b.parameters()) {
        assert_eq!(p.name, q.name);
        let host = |t: &Tensor| ops::download(&*be(), t).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(host(&p.value), host(&q.value));
    }
    assert_eq!(a.parameters().len(), b.parameters().len());
}
