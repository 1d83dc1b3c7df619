//! Sequence networks end to end: definitions (version 3) and their build
//! errors, buffers that grow to the largest call and are reused, the Trainer
//! on sequence batches (per-frame loss, clipping), and bad input (lengths,
//! token ids, empty sequences) as clear errors.

use crate::common::{be, rand_vec};
use verjus_core::Tensor;
use verjus_native::NativeBackend;
use verjus_nn::solver::{Adam, Solver};
use verjus_nn::{Loss, Network, NetworkDef, Trainer};

const CHAR_LM: &str = r#"{"inputs": [{"name": "chars", "shape": [null], "dtype": "int32"}],
    "layers": [
        {"name": "embed", "type": "Embedding", "vocab": 4, "dim": 8},
        {"name": "rnn", "type": "LSTM", "hidden": 16},
        {"name": "fc", "type": "Linear", "out_features": 4}]}"#;

fn build(json: &str) -> Network {
    Network::build(NetworkDef::from_json(json).unwrap(), &be(), 0).unwrap()
}

fn ids(batch: usize, time: usize, f: impl Fn(usize, usize) -> i32) -> Tensor {
    let v = (0..batch * time).map(|i| f(i / time, i % time)).collect();
    Tensor::from_vec([batch, time], v).unwrap()
}

fn lens(v: &[i32]) -> Tensor {
    Tensor::from_vec([v.len()], v.to_vec()).unwrap()
}

#[test]
fn sequence_definitions_are_version_3_and_round_trip() {
    let def = NetworkDef::from_json(CHAR_LM).unwrap();
    assert_eq!(def.format_version, 3);
    assert!(def.inputs[0].sequence);
    let text = def.to_json();
    assert!(
        text.contains("null") && text.contains("\"int32\""),
        "{text}"
    );
    assert_eq!(NetworkDef::from_json(&text).unwrap(), def);
    let bad = CHAR_LM.replace("[null]", "[4, null]");
    let err = NetworkDef::from_json(&bad).unwrap_err().to_string();
    assert!(err.contains("only the first axis"), "{err}");
    let names: Vec<String> = build(CHAR_LM)
        .parameters()
        .iter()
        .map(|p| p.name.clone())
        .collect();
    assert!(names.contains(&"rnn.weight_ih_l0".to_string()), "{names:?}");
    assert!(names.contains(&"rnn.bias_hh_l0".to_string()), "{names:?}");
    let bi = CHAR_LM.replace(r#""hidden": 16"#, r#""hidden": 16, "bidirectional": true"#);
    let net = build(&bi);
    assert!(net
        .parameters()
        .iter()
        .any(|p| p.name == "rnn.weight_hh_l0_reverse"));
    assert_eq!(net.output_shapes()[0].1, vec![4]);
}

#[test]
fn build_errors_name_the_layer_and_the_shapes() {
    let be = be();
    let err = |json: &str| {
        Network::build(NetworkDef::from_json(json).unwrap(), &be, 0)
            .unwrap_err()
            .to_string()
    };
    let fixed = r#"{"inputs": [{"name": "x", "shape": [5]}], "layers": [
        {"name": "rnn", "type": "LSTM", "hidden": 3}]}"#;
    let e = err(fixed);
    assert!(e.contains("rnn") && e.contains("sequence input"), "{e}");
    let floats = CHAR_LM.replace(r#", "dtype": "int32""#, "");
    let e = err(&floats);
    assert!(e.contains("embed") && e.contains("int32"), "{e}");
    let frames = r#"{"inputs": [{"name": "x", "shape": [null, 2, 3]}], "layers": [
        {"name": "rnn", "type": "LSTM", "hidden": 3}]}"#;
    let e = err(frames);
    assert!(e.contains("rnn") && e.contains("[2, 3]"), "{e}");
    let mixed = r#"{"inputs": [{"name": "x", "shape": [null, 3]}, {"name": "z", "shape": [3]}],
        "layers": [{"name": "sum", "type": "Add", "inputs": ["x", "z"]}]}"#;
    let e = err(mixed);
    assert!(e.contains("sum") && e.contains("mixes"), "{e}");
}

/// The address of the output's elements: unchanged when no buffer was allocated.
fn output_address(net: &Network, ctx: &mut verjus_nn::Context, b: usize, t: usize) -> usize {
    let be = be();
    let x = ids(b, t, |i, j| ((i + j) % 4) as i32);
    let l: Vec<i32> = (0..b).map(|i| (t - i % t) as i32).collect();
    net.compute_output_with_lengths(&be, ctx, &[&x], Some(&lens(&l)))
        .unwrap();
    assert_eq!(ctx.output(0).dims(), [t * b, 4]);
    ctx.output(0).as_slice::<f32>().unwrap().as_ptr() as usize
}

#[test]
fn buffers_grow_to_the_largest_call_and_are_reused() {
    let net = build(CHAR_LM);
    let mut ctx = net.new_context(&be(), 1).unwrap();
    let largest = output_address(&net, &mut ctx, 8, 12);
    for (b, t) in [(3, 5), (8, 1), (1, 12), (8, 12), (5, 7)] {
        assert_eq!(
            output_address(&net, &mut ctx, b, t),
            largest,
            "batch {b}, time {t} reallocated"
        );
    }
    // Results of a shorter call equal a fresh context's.
    let be = be();
    let x = ids(2, 3, |i, j| ((i * 3 + j) % 4) as i32);
    net.compute_output_with_lengths(&be, &mut ctx, &[&x], Some(&lens(&[3, 2])))
        .unwrap();
    let reused = ctx.output(0).to_vec::<f32>().unwrap();
    let mut fresh = net.new_context(&be, 2).unwrap();
    net.compute_output_with_lengths(&be, &mut fresh, &[&x], Some(&lens(&[3, 2])))
        .unwrap();
    assert_eq!(reused, fresh.output(0).to_vec::<f32>().unwrap());
}

#[test]
fn trainer_learns_a_periodic_sequence_with_clipping() {
    // Next-token prediction on "0 1 2 3 0 1 ...", each example from its own phase.
    let net = build(CHAR_LM);
    let solver = Solver::new(Adam::new(0.02)).with_clip_norm(1.0);
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    };
    let mut trainer = Trainer::new(net, solver, loss, verjus_native::backend());
    let (batch, time) = (6, 10);
    let x = ids(batch, time, |b, t| ((b + t) % 4) as i32);
    let y = ids(batch, time, |b, t| ((b + t + 1) % 4) as i32);
    let l = lens(&[10, 9, 1, 10, 5, 7]);
    let first = trainer.train_sequences(&x, &l, &y).unwrap().0;
    let mut last = first;
    for _ in 0..60 {
        last = trainer.train_sequences(&x, &l, &y).unwrap().0;
    }
    assert!(first > 1.0 && last < 0.1, "loss {first} -> {last}");
    let (eval, frames) = trainer.evaluate_sequences(&x, &l, &y).unwrap();
    assert_eq!(frames, 10 + 9 + 1 + 10 + 5 + 7);
    assert!(eval < 0.1, "evaluation loss {eval}");
}

#[test]
fn bad_sequence_input_is_a_clear_error() {
    let be = NativeBackend::new();
    let net = build(CHAR_LM);
    let mut ctx = net.new_context(&be, 2).unwrap();
    let x = ids(2, 3, |_, _| 1);
    let run = |ctx: &mut verjus_nn::Context, x: &Tensor, l: &[i32]| {
        net.compute_output_with_lengths(&be, ctx, &[x], Some(&lens(l)))
            .unwrap_err()
            .to_string()
    };
    let e = run(&mut ctx, &x, &[3, 4]);
    assert!(e.contains("lengths[1] = 4") && e.contains("0..=3"), "{e}");
    let e = run(&mut ctx, &x, &[3, -1]);
    assert!(e.contains("lengths[1] = -1"), "{e}");
    let e = run(&mut ctx, &x, &[3]);
    assert!(e.contains("lengths") && e.contains("[2]"), "{e}");
    let bad = ids(2, 3, |b, t| if (b, t) == (1, 1) { 7 } else { 0 });
    let e = run(&mut ctx, &bad, &[3, 3]);
    assert!(
        e.contains("example 1, frame 1") && e.contains("token id 7") && e.contains("0..4"),
        "{e}"
    );
    // The same id in a padding frame is never read.
    net.compute_output_with_lengths(&be, &mut ctx, &[&bad], Some(&lens(&[3, 1])))
        .unwrap();

    // LastFrame of an empty sequence, and a per-frame loss without frames.
    let last = r#"{"inputs": [{"name": "x", "shape": [null, 2]}], "layers": [
        {"name": "rnn", "type": "LSTM", "hidden": 3},
        {"name": "last", "type": "LastFrame"}]}"#;
    let net2 = build(last);
    let mut ctx2 = net2.new_context(&be, 2).unwrap();
    let xf = Tensor::from_vec([2, 3, 2], rand_vec(12, 1)).unwrap();
    let e = net2
        .compute_output_with_lengths(&be, &mut ctx2, &[&xf], Some(&lens(&[2, 0])))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("last") && e.contains("example 1 has length 0"),
        "{e}"
    );
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    };
    let mut trainer = Trainer::new(
        build(CHAR_LM),
        Solver::new(Adam::new(0.01)),
        loss,
        verjus_native::backend(),
    );
    let e = trainer
        .train_sequences(&x, &lens(&[0, 0]), &x)
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs at least one frame"), "{e}");
    // A target outside the classes at a real frame names it.
    let y = ids(2, 3, |b, t| if (b, t) == (0, 2) { 9 } else { 0 });
    let e = trainer
        .train_sequences(&x, &lens(&[3, 1]), &y)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("example 0, frame 2") && e.contains("target 9"),
        "{e}"
    );
}

const STACKED: &str = r#"{"inputs": [{"name": "chars", "shape": [null], "dtype": "int32"}],
    "layers": [
        {"name": "embed", "type": "Embedding", "vocab": 4, "dim": 5},
        {"name": "rnn", "type": "LSTM", "hidden": 6, "num_layers": 2},
        {"name": "fc", "type": "Linear", "out_features": 4}]}"#;

fn close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() < 1e-5, "{what}[{i}]: {x} vs {y}");
    }
}

#[test]
fn carried_state_steps_frame_by_frame_like_the_whole_sequence() {
    let be = be();
    let net = build(STACKED);
    let (batch, time, v) = (2, 6, 4);
    let x = ids(batch, time, |b, t| ((b * 3 + t * t) % 4) as i32);
    let whole = net.transform(&be, &[&x]).unwrap()[0]
        .to_vec::<f32>()
        .unwrap();
    let host = x.to_vec::<i32>().unwrap();
    let frame = |t: usize| ids(batch, 1, |b, _| host[b * time + t]);

    let mut ctx = net.new_context(&be, batch).unwrap();
    ctx.set_carry_state(true);
    for t in 0..time {
        net.compute_output(&be, &mut ctx, &[&frame(t)]).unwrap();
        let step = ctx.output(0).to_vec::<f32>().unwrap();
        close(
            &step,
            &whole[t * batch * v..][..batch * v],
            &format!("frame {t}"),
        );
        if t == 2 {
            // Hand the prefix's state to another context: it continues alike.
            let state: Vec<(String, Tensor)> = net
                .state(&ctx)
                .unwrap()
                .into_iter()
                .map(|(n, s)| (n, s.try_clone_host().unwrap()))
                .collect();
            let names: Vec<&str> = state.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, ["rnn.h_l0", "rnn.c_l0", "rnn.h_l1", "rnn.c_l1"]);
            let mut other = net.new_context(&be, batch).unwrap();
            other.set_carry_state(true);
            for (name, s) in &state {
                net.set_state(&be, &mut other, name, s).unwrap();
            }
            net.compute_output(&be, &mut other, &[&frame(3)]).unwrap();
            let next = other.output(0).to_vec::<f32>().unwrap();
            close(
                &next,
                &whole[3 * batch * v..][..batch * v],
                "continued frame 3",
            );
            let wrong = Tensor::from_vec([3, 6], vec![0f32; 18]).unwrap();
            let e = net
                .set_state(&be, &mut other, "rnn.h_l0", &wrong)
                .unwrap_err()
                .to_string();
            assert!(e.contains("rnn.h_l0") && e.contains("[2, 6]"), "{e}");
        }
    }
    // A reset starts a new sequence: frame 0 again.
    net.reset_state(&be, &mut ctx).unwrap();
    net.compute_output(&be, &mut ctx, &[&frame(0)]).unwrap();
    close(
        &ctx.output(0).to_vec::<f32>().unwrap(),
        &whole[..batch * v],
        "after reset",
    );

    let bi = STACKED.replace(r#""num_layers": 2"#, r#""bidirectional": true"#);
    let net = build(&bi);
    let mut ctx = net.new_context(&be, batch).unwrap();
    ctx.set_carry_state(true);
    let e = net
        .compute_output(&be, &mut ctx, &[&frame(0)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("rnn") && e.contains("bidirectional"), "{e}");
}

#[test]
fn runner_serves_variable_length_requests_and_refuses_another_vocabulary() {
    let be = verjus_native::backend();
    let net = build(CHAR_LM);
    let reference = build(CHAR_LM);
    let runner = std::sync::Arc::new(verjus_nn::Runner::new(net, be.clone()).unwrap());
    let handles: Vec<_> = (1..=6)
        .map(|time| {
            let runner = std::sync::Arc::clone(&runner);
            std::thread::spawn(move || {
                let mut outs = Vec::new();
                for round in 0..5 {
                    let x = ids(2, time, |b, t| ((b + t + round) % 4) as i32);
                    let l = lens(&[time as i32, 1]);
                    let (y, _) = runner.infer_with_lengths(&[&x], Some(&l)).unwrap();
                    outs.push((x, l, y[0].to_vec::<f32>().unwrap()));
                }
                outs
            })
        })
        .collect();
    for h in handles {
        for (x, l, y) in h.join().unwrap() {
            let expected = reference
                .transform_with_lengths(&*be, &[&x], Some(&l))
                .unwrap();
            assert_eq!(y, expected[0].to_vec::<f32>().unwrap());
        }
    }
    let other_vocab = CHAR_LM.replace(r#""vocab": 4"#, r#""vocab": 6"#);
    let e = runner.swap(build(&other_vocab)).unwrap_err().to_string();
    assert!(
        e.contains("vocabulary") && e.contains('4') && e.contains('6') && e.contains("embed"),
        "{e}"
    );
    assert_eq!(runner.generation(), 0);
    let retrained = Network::build(NetworkDef::from_json(CHAR_LM).unwrap(), &*be, 9).unwrap();
    assert_eq!(runner.swap(retrained).unwrap(), 1);
}

#[test]
fn a_saved_sequence_model_loads_and_computes_the_same() {
    let be = be();
    let net = build(STACKED);
    let dir = tempfile::tempdir().unwrap();
    net.save(dir.path(), &be).unwrap();
    let loaded = Network::load(dir.path(), &be).unwrap();
    assert_eq!(loaded.def(), net.def());
    let x = ids(3, 4, |b, t| ((b + 2 * t) % 4) as i32);
    let l = lens(&[4, 2, 1]);
    let a = net.transform_with_lengths(&be, &[&x], Some(&l)).unwrap();
    let b = loaded.transform_with_lengths(&be, &[&x], Some(&l)).unwrap();
    assert_eq!(a[0].to_vec::<f32>().unwrap(), b[0].to_vec::<f32>().unwrap());
}
