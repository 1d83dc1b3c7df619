//! One network and one context serve batches of 1, 7 and 128; results per
//! example do not depend on the batch, and gradients are sums over the batch.

use crate::common::{assert_close, be, build, host, rand_vec, tensor};

const MLP: &str = r#"{"inputs": [{"name": "x", "shape": [6]}], "layers": [
    {"name": "fc1", "type": "Linear", "out_features": 5},
    {"name": "act", "type": "ReLU"},
    {"name": "fc2", "type": "Linear", "out_features": 3}]}"#;

#[test]
fn batch_sizes_change_without_rebuilding() {
    let be = be();
    let net = build(MLP, 2);
    let mut ctx = net.new_context(&be, 128).unwrap();
    let data = rand_vec(128 * 6, 3);
    let single: Vec<Vec<f32>> = (0..128)
        .map(|i| {
            let x = tensor(&be, &[1, 6], data[i * 6..(i + 1) * 6].to_vec());
            host(&be, &net.transform(&be, &[&x]).unwrap()[0])
        })
        .collect();
    for batch in [128, 7, 1, 128, 7] {
        let x = tensor(&be, &[batch, 6], data[..batch * 6].to_vec());
        net.compute_output(&be, &mut ctx, &[&x]).unwrap();
        assert_eq!(ctx.batch(), batch);
        assert_eq!(ctx.output(0).dims(), &[batch, 3]);
        let y = host(&be, ctx.output(0));
        for i in 0..batch {
            assert_close("row", &y[i * 3..(i + 1) * 3], &single[i], 1e-5);
        }
        let dy = tensor(&be, &[batch, 3], vec![1.0; batch * 3]);
        net.compute_gradients(&be, &mut ctx, &[&dy]).unwrap();
        assert_eq!(ctx.param_grads().len(), 4);
    }
}

#[test]
fn parameter_gradients_are_sums_over_the_batch() {
    let be = be();
    let net = build(MLP, 2);
    let data = rand_vec(7 * 6, 4);
    let dys = rand_vec(7 * 3, 5);
    let grads = |rows: std::ops::Range<usize>| {
        let n = rows.len();
        let x = tensor(&be, &[n, 6], data[rows.start * 6..rows.end * 6].to_vec());
        let dy = tensor(&be, &[n, 3], dys[rows.start * 3..rows.end * 3].to_vec());
        let mut ctx = net.new_context(&be, n).unwrap();
        net.compute_output(&be, &mut ctx, &[&x]).unwrap();
        net.compute_gradients(&be, &mut ctx, &[&dy]).unwrap();
        ctx.param_grads()
            .iter()
            .map(|g| host(&be, g))
            .collect::<Vec<_>>()
    };
    let whole = grads(0..7);
    let mut sum: Vec<Vec<f32>> = whole.iter().map(|g| vec![0.0; g.len()]).collect();
    for i in 0..7 {
        for (s, g) in sum.iter_mut().zip(grads(i..i + 1)) {
            s.iter_mut().zip(g).for_each(|(a, b)| *a += b);
        }
    }
    for (w, s) in whole.iter().zip(&sum) {
        assert_close("batch sum", w, s, 1e-5);
    }
}

#[test]
fn wrong_input_shape_is_an_error() {
    let be = be();
    let net = build(MLP, 2);
    let mut ctx = net.new_context(&be, 4).unwrap();
    let x = tensor(&be, &[4, 5], vec![0.0; 20]);
    let err = net
        .compute_output(&be, &mut ctx, &[&x])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"x\"") && err.contains("[4, 6]") && err.contains("[4, 5]"),
        "{err}"
    );
    let err = net
        .compute_gradients(&be, &mut ctx, &[&x])
        .unwrap_err()
        .to_string();
    assert!(err.contains("compute_output first"), "{err}");
}

#[test]
fn network_is_send_and_sync_and_context_is_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<verjus_nn::Network>();
    send::<verjus_nn::Context>();
}
