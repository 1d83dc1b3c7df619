//! Finite-difference checks of the sequence layers (Embedding, LSTM incl.
//! bidirectional and stacked, per-frame Linear, the time reductions) and of
//! the per-frame cross-entropy, through whole networks with mixed lengths
//! `{1, T-1, T}`: the analytic gradients of `L = sum(output * R)` for a fixed
//! random `R` (and of the per-frame loss) must match central differences,
//! and the LSTM layer's gradients the eager tape's of the same op.

use crate::{Loss, Network, NetworkDef};
use verjus_core::{ops, BackendRef, Tensor};

fn be() -> BackendRef {
    verjus_native::backend()
}

/// Deterministic values in `[-1, 1)` (xorshift).
pub(super) fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// What a network is fed.
pub(super) struct Feed {
    pub(super) x: Tensor,
    pub(super) lengths: Tensor,
}

pub(super) fn feed_floats(batch: usize, time: usize, features: usize, lengths: Vec<i32>) -> Feed {
    let n = batch * time * features;
    Feed {
        x: Tensor::from_vec([batch, time, features], values(n, 7)).unwrap(),
        lengths: Tensor::from_vec([batch], lengths).unwrap(),
    }
}

/// `sum(output * r)` in f64.
fn weighted(out: &Tensor, r: &[f32]) -> f64 {
    let y = out.to_vec::<f32>().unwrap();
    y.iter()
        .zip(r)
        .map(|(a, b)| f64::from(*a) * f64::from(*b))
        .sum()
}

pub(super) fn run(net: &Network, feed: &Feed, r: &[f32], train: bool) -> f64 {
    let be = be();
    let mut ctx = net.new_context(&*be, feed.x.dims()[0]).unwrap();
    // In training, every forward draws the same dropout masks.
    ctx.set_train(train);
    net.compute_output_with_lengths(&*be, &mut ctx, &[&feed.x], Some(&feed.lengths))
        .unwrap();
    weighted(ctx.output(0), r)
}

/// Analytic gradients (parameters, then the float input when `input_grad`)
/// against central differences at a spread of elements, in inference mode.
fn check(json: &str, feed: Feed, input_grad: bool) {
    check_mode(json, feed, input_grad, false)
}

/// [`check`], in training mode when `train` (dropout active, the same masks
/// at every evaluation).
pub(super) fn check_mode(json: &str, feed: Feed, input_grad: bool, train: bool) {
    let be = be();
    let def = NetworkDef::from_json(json).unwrap();
    let mut net = Network::build(def, &*be, 3).unwrap();
    let batch = feed.x.dims()[0];
    let mut ctx = net.new_context(&*be, batch).unwrap();
    ctx.set_input_grads(input_grad);
    ctx.set_train(train);
    net.compute_output_with_lengths(&*be, &mut ctx, &[&feed.x], Some(&feed.lengths))
        .unwrap();
    let r = values(ctx.output(0).numel(), 11);
    let dy = Tensor::from_vec(ctx.output(0).dims().to_vec(), r.clone()).unwrap();
    net.compute_gradients(&*be, &mut ctx, &[&dy]).unwrap();
    let grads: Vec<Vec<f32>> = ctx
        .param_grads()
        .iter()
        .map(|g| g.to_vec::<f32>().unwrap())
        .collect();
    let dx = input_grad.then(|| ctx.input_grad(0).unwrap().to_vec::<f32>().unwrap());
    let eps = 1e-2f32;
    let close = |analytic: f32, numeric: f64, what: &str| {
        let tol = 2e-2 * (1.0 + numeric.abs());
        assert!(
            (f64::from(analytic) - numeric).abs() <= tol,
            "{what}: analytic {analytic}, numeric {numeric}"
        );
    };
    for (p, grad) in grads.iter().enumerate() {
        let n = net.parameters()[p].value.numel();
        let name = net.parameters()[p].name.clone();
        for i in (0..n).step_by((n / 7).max(1)) {
            let mut at = |delta: f32| {
                let v = net.parameters_mut()[p].value.as_mut_slice::<f32>().unwrap();
                v[i] += delta;
                run(&net, &feed, &r, train)
            };
            let plus = at(eps);
            let minus = at(-2.0 * eps);
            at(eps);
            close(
                grad[i],
                (plus - minus) / (2.0 * f64::from(eps)),
                &format!("{name}[{i}]"),
            );
        }
    }
    if let Some(dx) = dx {
        let n = feed.x.numel();
        let &[b_n, t_n, f_n] = feed.x.dims() else {
            panic!("float inputs here are [B, T, F]")
        };
        let mut feed = feed;
        for i in 0..n {
            // The input gradient is time-major: row t * B + b.
            let (b, t, f) = (i / (t_n * f_n), i / f_n % t_n, i % f_n);
            let j = (t * b_n + b) * f_n + f;
            let mut at = |delta: f32| {
                feed.x.as_mut_slice::<f32>().unwrap()[i] += delta;
                run(&net, &feed, &r, train)
            };
            let plus = at(eps);
            let minus = at(-2.0 * eps);
            at(eps);
            close(
                dx[j],
                (plus - minus) / (2.0 * f64::from(eps)),
                &format!("x[{i}]"),
            );
        }
    }
}

#[test]
fn stacked_bidirectional_lstm_with_per_frame_linear() {
    let json = r#"{"inputs": [{"name": "x", "shape": [null, 3]}], "layers": [
        {"name": "rnn", "type": "LSTM", "hidden": 4, "num_layers": 2, "bidirectional": true},
        {"name": "fc", "type": "Linear", "out_features": 2}]}"#;
    check(json, feed_floats(3, 4, 3, vec![1, 3, 4]), true);
}

#[test]
fn stacked_lstm_with_dropout_between_layers_in_training() {
    let json = r#"{"inputs": [{"name": "x", "shape": [null, 3]}], "layers": [
        {"name": "rnn", "type": "LSTM", "hidden": 4, "num_layers": 3, "dropout": 0.4}]}"#;
    check_mode(json, feed_floats(3, 4, 3, vec![4, 3, 1]), true, true);
    // The masks do change the output in training (and not in inference).
    let be = be();
    let net = Network::build(NetworkDef::from_json(json).unwrap(), &*be, 3).unwrap();
    let feed = feed_floats(3, 4, 3, vec![4, 3, 1]);
    let r = values(3 * 4 * 4, 2);
    assert_ne!(run(&net, &feed, &r, true), run(&net, &feed, &r, false));
}

#[test]
fn lstm_layer_matches_the_tape() {
    use verjus_core::autograd::{LstmVars, Var};
    let be = be();
    let json = r#"{"inputs": [{"name": "x", "shape": [null, 3]}], "layers": [
        {"name": "rnn", "type": "LSTM", "hidden": 4}]}"#;
    let net = Network::build(NetworkDef::from_json(json).unwrap(), &*be, 5).unwrap();
    let (b, t, f, h) = (3usize, 5usize, 3usize, 4usize);
    let feed = feed_floats(b, t, f, vec![5, 1, 4]);
    let mut ctx = net.new_context(&*be, b).unwrap();
    ctx.set_input_grads(true);
    net.compute_output_with_lengths(&*be, &mut ctx, &[&feed.x], Some(&feed.lengths))
        .unwrap();
    let r = values(t * b * h, 4);
    let dy = Tensor::from_vec([t * b, h], r.clone()).unwrap();
    net.compute_gradients(&*be, &mut ctx, &[&dy]).unwrap();

    // The tape: the same op on time-major x, seeded with the same dy.
    let host = feed.x.to_vec::<f32>().unwrap();
    let mut tm = vec![0f32; host.len()];
    for (i, v) in host.iter().enumerate() {
        let (bi, ti, fi) = (i / (t * f), i / f % t, i % f);
        tm[(ti * b + bi) * f + fi] = *v;
    }
    let leaf = |t: &Tensor| Var::leaf(t.try_clone_host().unwrap(), be.clone()).unwrap();
    let x = leaf(&Tensor::from_vec([t, b, f], tm).unwrap());
    let lengths = Var::constant(feed.lengths.try_clone_host().unwrap(), be.clone()).unwrap();
    let p: Vec<Var> = net.parameters().iter().map(|p| leaf(&p.value)).collect();
    let (y, _, _) = Var::lstm_sequence(&LstmVars {
        x: &x,
        lengths: Some(&lengths),
        h0: None,
        c0: None,
        w_ih: &p[0],
        w_hh: &p[1],
        b_ih: Some(&p[2]),
        b_hh: Some(&p[3]),
    })
    .unwrap();
    assert_eq!(
        y.value().to_vec::<f32>().unwrap(),
        ctx.output(0).to_vec::<f32>().unwrap()
    );
    y.backward_with(Tensor::from_vec([t, b, h], r).unwrap())
        .unwrap();
    for (k, v) in p.iter().enumerate() {
        let tape = v.grad().unwrap().to_vec::<f32>().unwrap();
        let layer = ctx.param_grads()[k].to_vec::<f32>().unwrap();
        for (a, c) in tape.iter().zip(&layer) {
            assert!(
                (a - c).abs() <= 1e-6,
                "{}: {a} vs {c}",
                net.parameters()[k].name
            );
        }
    }
    let dx = x.grad().unwrap().to_vec::<f32>().unwrap();
    let layer_dx = ctx.input_grad(0).unwrap().to_vec::<f32>().unwrap();
    for (a, c) in dx.iter().zip(&layer_dx) {
        assert!((a - c).abs() <= 1e-6, "dx: {a} vs {c}");
    }
}

#[test]
fn single_lstm_then_last_frame() {
    let json = r#"{"inputs": [{"name": "x", "shape": [null, 3]}], "layers": [
        {"name": "rnn", "type": "LSTM", "hidden": 5, "bias": false},
        {"name": "last", "type": "LastFrame"},
        {"name": "fc", "type": "Linear", "out_features": 3}]}"#;
    check(json, feed_floats(3, 4, 3, vec![4, 1, 3]), true);
}

#[test]
fn mean_and_max_over_time_respect_lengths() {
    for kind in ["MeanOverTime", "MaxOverTime"] {
        let json = format!(
            r#"{{"inputs": [{{"name": "x", "shape": [null, 3]}}], "layers": [
            {{"name": "fc", "type": "Linear", "out_features": 4}},
            {{"name": "act", "type": "Tanh"}},
            {{"name": "pool", "type": "{kind}"}}]}}"#
        );
        check(&json, feed_floats(3, 5, 3, vec![5, 1, 4]), true);
    }
}

#[test]
fn embedding_lstm_gradients_scatter_add_repeated_tokens() {
    let json = r#"{"inputs": [{"name": "chars", "shape": [null], "dtype": "int32"}], "layers": [
        {"name": "embed", "type": "Embedding", "vocab": 5, "dim": 3},
        {"name": "rnn", "type": "LSTM", "hidden": 4},
        {"name": "fc", "type": "Linear", "out_features": 5}]}"#;
    // Token 2 appears several times (its row sums their gradients); token 4 never.
    let ids = vec![2, 0, 2, 1, 3, 9, 7, 2, 1, 1, 0, 7];
    let feed = Feed {
        x: Tensor::from_vec([3, 4], ids).unwrap(),
        lengths: Tensor::from_vec([3], vec![4, 1, 3]).unwrap(),
    };
    check(json, feed, false);
}

#[test]
fn padding_frames_do_not_change_the_outputs_of_real_frames() {
    let be = be();
    let nets = [
        r#"{"inputs": [{"name": "x", "shape": [null, 2]}], "layers": [
            {"name": "rnn", "type": "LSTM", "hidden": 3, "bidirectional": true},
            {"name": "mean", "type": "MeanOverTime"}]}"#,
        r#"{"inputs": [{"name": "x", "shape": [null, 2]}], "layers": [
            {"name": "fc", "type": "Linear", "out_features": 3},
            {"name": "mean", "type": "MeanOverTime"}]}"#,
        r#"{"inputs": [{"name": "x", "shape": [null, 2]}], "layers": [
            {"name": "fc", "type": "Linear", "out_features": 3},
            {"name": "max", "type": "MaxOverTime"}]}"#,
        r#"{"inputs": [{"name": "x", "shape": [null, 2]}], "layers": [
            {"name": "fc", "type": "Linear", "out_features": 3},
            {"name": "last", "type": "LastFrame"}]}"#,
    ];
    for json in nets {
        let net = Network::build(NetworkDef::from_json(json).unwrap(), &*be, 1).unwrap();
        let mut feed = feed_floats(2, 4, 2, vec![2, 4]);
        let out = |feed: &Feed| {
            let mut ctx = net.new_context(&*be, 2).unwrap();
            net.compute_output_with_lengths(&*be, &mut ctx, &[&feed.x], Some(&feed.lengths))
                .unwrap();
            ctx.output(0).to_vec::<f32>().unwrap()
        };
        let before = out(&feed);
        // Example 0's frames 2 and 3 are padding: not even a NaN there is read.
        let x = feed.x.as_mut_slice::<f32>().unwrap();
        x[4..8].copy_from_slice(&[f32::NAN, -50.0, f32::INFINITY, 9.0]);
        let after = out(&feed);
        assert!(after.iter().all(|v| v.is_finite()), "{json}: {after:?}");
        assert_eq!(after, before, "{json}");
    }
}

#[test]
fn per_frame_cross_entropy_is_the_mean_over_real_frames() {
    let be = be();
    let (batch, time, classes) = (3usize, 4usize, 5usize);
    let lengths = [1i32, 3, 4];
    let logits = Tensor::from_vec([time * batch, classes], values(60, 5)).unwrap();
    // Padding targets are arbitrary (99 is no class): they must not be read.
    let targets =
        Tensor::from_vec([batch, time], vec![1, 99, 99, 99, 0, 4, 2, 99, 3, 3, 1, 0]).unwrap();
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    };
    let mut grad = ops::zeros(&*be, logits.shape(), verjus_core::DType::F32).unwrap();
    let (value, frames) = loss
        .compute_frames(&*be, &logits, &targets, &lengths, Some(&mut grad))
        .unwrap();
    assert_eq!(frames, 8);
    // The reference: -log softmax at each real frame, by hand.
    let l = logits.to_vec::<f32>().unwrap();
    let t = targets.to_vec::<i32>().unwrap();
    let mut sum = 0f64;
    for b in 0..batch {
        for f in 0..lengths[b] as usize {
            let row = &l[(f * batch + b) * classes..][..classes];
            let lse = row.iter().map(|&v| f64::from(v).exp()).sum::<f64>().ln();
            sum += lse - f64::from(row[t[b * time + f] as usize]);
        }
    }
    assert!(
        (f64::from(value) - sum / 8.0).abs() < 1e-5,
        "{value} vs {}",
        sum / 8.0
    );
    // Finite differences of the summed loss.
    let g = grad.to_vec::<f32>().unwrap();
    let eps = 1e-2f32;
    for i in 0..l.len() {
        let at = |delta: f32| {
            let mut v = l.clone();
            v[i] += delta;
            let x = Tensor::from_vec([time * batch, classes], v).unwrap();
            let (m, n) = loss
                .compute_frames(&*be, &x, &targets, &lengths, None)
                .unwrap();
            f64::from(m) * n as f64
        };
        let numeric = (at(eps) - at(-eps)) / (2.0 * f64::from(eps));
        assert!(
            (f64::from(g[i]) - numeric).abs() < 1e-2,
            "dlogits[{i}]: {} vs {numeric}",
            g[i]
        );
    }
}

#[test]
fn non_finite_padding_leaves_the_gradients_finite() {
    let be = be();
    let json = r#"{"inputs": [{"name": "x", "shape": [null, 2]}], "layers": [
        {"name": "fc", "type": "Linear", "out_features": 3},
        {"name": "rnn", "type": "LSTM", "hidden": 3, "num_layers": 2, "bidirectional": true},
        {"name": "mean", "type": "MeanOverTime"}]}"#;
    let net = Network::build(NetworkDef::from_json(json).unwrap(), &*be, 1).unwrap();
    let mut feed = feed_floats(2, 4, 2, vec![2, 4]);
    feed.x.as_mut_slice::<f32>().unwrap()[4..8].copy_from_slice(&[
        f32::NAN,
        1.0,
        f32::INFINITY,
        2.0,
    ]);
    let mut ctx = net.new_context(&*be, 2).unwrap();
    ctx.set_input_grads(true);
    net.compute_output_with_lengths(&*be, &mut ctx, &[&feed.x], Some(&feed.lengths))
        .unwrap();
    let dy = Tensor::from_vec([2, 6], values(12, 3)).unwrap();
    net.compute_gradients(&*be, &mut ctx, &[&dy]).unwrap();
    for (p, g) in net.parameters().iter().zip(ctx.param_grads()) {
        let g = g.to_vec::<f32>().unwrap();
        assert!(g.iter().all(|v| v.is_finite()), "{}: {g:?}", p.name);
    }
}
