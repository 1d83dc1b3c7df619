//! Finite-difference checks of every layer's parameter and input gradients.

use crate::common::{be, build, check_gradients, rand_tensor, tensor};

const EPS: f32 = 1e-2;
const TOL: f32 = 2e-2;

/// A network of one input `x` of `shape` and the given layers (JSON).
fn net(shape: &str, layers: &str) -> verjus_nn::Network {
    build(
        &format!(r#"{{"inputs": [{{"name": "x", "shape": {shape}}}], "layers": [{layers}]}}"#),
        7,
    )
}

/// Values in ±[0.2, 1.0]: away from the kinks of ReLU.
fn away_from_zero(dims: &[usize], seed: u64) -> verjus_core::Tensor {
    let be = be();
    let n = dims.iter().product();
    let v = crate::common::rand_vec(n, seed)
        .into_iter()
        .map(|x| x.signum() * (0.2 + 0.8 * x.abs()))
        .collect();
    tensor(&be, dims, v)
}

/// Distinct values spaced well beyond `EPS`, so no pooling window has a near tie.
fn distinct(dims: &[usize], seed: u64) -> verjus_core::Tensor {
    let be = be();
    let n: usize = dims.iter().product();
    let mut order: Vec<(f32, usize)> = crate::common::rand_vec(n, seed)
        .into_iter()
        .zip(0..n)
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut v = vec![0.0; n];
    for (rank, (_, i)) in order.into_iter().enumerate() {
        v[i] = (rank as f32 - n as f32 / 2.0) * 0.05;
    }
    tensor(&be, dims, v)
}

#[test]
fn linear() {
    let n = net(
        "[5]",
        r#"{"name": "fc", "type": "Linear", "out_features": 3}"#,
    );
    check_gradients(n, vec![rand_tensor(&be(), &[4, 5], 1)], None, EPS, TOL);
}

#[test]
fn linear_without_bias() {
    let n = net(
        "[5]",
        r#"{"name": "fc", "type": "Linear", "out_features": 3, "bias": false}"#,
    );
    check_gradients(n, vec![rand_tensor(&be(), &[4, 5], 2)], None, EPS, TOL);
}

#[test]
fn linear_with_leading_axes() {
    let n = net(
        "[3, 5]",
        r#"{"name": "fc", "type": "Linear", "out_features": 4}"#,
    );
    let out = n.output_shapes();
    assert_eq!(out[0].1, vec![3, 4]);
    check_gradients(n, vec![rand_tensor(&be(), &[2, 3, 5], 3)], None, EPS, TOL);
}

#[test]
fn conv2d() {
    let n = net(
        "[2, 6, 5]",
        r#"{"name": "conv", "type": "Conv2d", "out_channels": 3, "kernel": [3, 2], "stride": [2, 1], "padding": 1}"#,
    );
    check_gradients(
        n,
        vec![rand_tensor(&be(), &[2, 2, 6, 5], 4)],
        None,
        EPS,
        TOL,
    );
}

#[test]
fn max_pool() {
    let n = net(
        "[2, 4, 4]",
        r#"{"name": "pool", "type": "MaxPool2d", "kernel": 2}"#,
    );
    check_gradients(n, vec![distinct(&[2, 2, 4, 4], 5)], None, EPS, TOL);
}

#[test]
fn avg_pool() {
    let n = net(
        "[2, 5, 5]",
        r#"{"name": "pool", "type": "AvgPool2d", "kernel": 3, "stride": 2, "padding": 1}"#,
    );
    check_gradients(
        n,
        vec![rand_tensor(&be(), &[2, 2, 5, 5], 6)],
        None,
        EPS,
        TOL,
    );
}

#[test]
fn activations() {
    for kind in ["ReLU", "Sigmoid", "Tanh", "GELU"] {
        let n = net("[6]", &format!(r#"{{"name": "act", "type": "{kind}"}}"#));
        check_gradients(n, vec![away_from_zero(&[3, 6], 7)], None, EPS, TOL);
    }
}

#[test]
fn softmax_and_log_softmax() {
    for kind in ["Softmax", "LogSoftmax"] {
        let n = net(
            "[4, 3]",
            &format!(r#"{{"name": "sm", "type": "{kind}", "axis": 0}}"#),
        );
        check_gradients(n, vec![rand_tensor(&be(), &[2, 4, 3], 8)], None, EPS, TOL);
        let n = net("[5]", &format!(r#"{{"name": "sm", "type": "{kind}"}}"#));
        check_gradients(n, vec![rand_tensor(&be(), &[3, 5], 9)], None, EPS, TOL);
    }
}

#[test]
fn dropout_in_training() {
    let n = net("[8]", r#"{"name": "drop", "type": "Dropout", "p": 0.5}"#);
    check_gradients(n, vec![rand_tensor(&be(), &[4, 8], 10)], Some(3), EPS, TOL);
}

#[test]
fn flatten_and_reshape() {
    let n = net(
        "[2, 3, 2]",
        r#"{"name": "flat", "type": "Flatten"},
           {"name": "fc", "type": "Linear", "out_features": 3},
           {"name": "re", "type": "Reshape", "shape": [3, 1]}"#,
    );
    assert_eq!(n.output_shapes()[0].1, vec![3, 1]);
    check_gradients(
        n,
        vec![rand_tensor(&be(), &[2, 2, 3, 2], 11)],
        None,
        EPS,
        TOL,
    );
}

#[test]
fn add_of_three() {
    let n = build(
        r#"{"inputs": [{"name": "a", "shape": [4]}, {"name": "b", "shape": [4]}],
            "layers": [
              {"name": "fa", "type": "Linear", "out_features": 4, "inputs": ["a"]},
              {"name": "sum", "type": "Add", "inputs": ["fa", "b", "a"]}
            ]}"#,
        5,
    );
    let be = be();
    check_gradients(
        n,
        vec![rand_tensor(&be, &[3, 4], 12), rand_tensor(&be, &[3, 4], 13)],
        None,
        EPS,
        TOL,
    );
}

#[test]
fn concat() {
    let n = build(
        r#"{"inputs": [{"name": "a", "shape": [2, 3]}, {"name": "b", "shape": [2, 5]}],
            "layers": [
              {"name": "fa", "type": "Linear", "out_features": 4, "inputs": ["a"]},
              {"name": "cat", "type": "Concat", "axis": -1, "inputs": ["fa", "b"]},
              {"name": "fc", "type": "Linear", "out_features": 2}
            ]}"#,
        5,
    );
    assert_eq!(n.descriptors()[1].output_shape, vec![2, 9]);
    let be = be();
    check_gradients(
        n,
        vec![
            rand_tensor(&be, &[3, 2, 3], 14),
            rand_tensor(&be, &[3, 2, 5], 15),
        ],
        None,
        EPS,
        TOL,
    );
}

#[test]
fn nested_scopes() {
    let n = build(
        r#"{"inputs": [{"name": "x", "shape": [4]}],
            "layers": [
              {"name": "block", "type": "Sequential", "layers": [
                 {"name": "fc", "type": "Linear", "out_features": 4},
                 {"name": "act", "type": "Tanh"}]},
              {"name": "res", "type": "Graph", "outputs": ["sum"], "layers": [
                 {"name": "fc", "type": "Linear", "out_features": 4, "inputs": ["block"]},
                 {"name": "sum", "type": "Add", "inputs": ["fc", "block.act", "x"]}]},
              {"name": "head", "type": "Linear", "out_features": 2}
            ]}"#,
        5,
    );
    let names: Vec<&str> = n.parameters().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "block.fc.weight",
            "block.fc.bias",
            "res.fc.weight",
            "res.fc.bias",
            "head.weight",
            "head.bias"
        ]
    );
    check_gradients(n, vec![rand_tensor(&be(), &[3, 4], 16)], None, EPS, TOL);
}

#[test]
fn input_gradients_can_be_switched_on_one_context() {
    // Concat with one input needing no gradient takes the split's scratch path.
    let n = build(
        r#"{"inputs": [{"name": "a", "shape": [3]}, {"name": "b", "shape": [2]}],
            "layers": [
              {"name": "fa", "type": "Linear", "out_features": 4, "inputs": ["a"]},
              {"name": "cat", "type": "Concat", "axis": 0, "inputs": ["fa", "b"]},
              {"name": "fc", "type": "Linear", "out_features": 2}
            ]}"#,
        5,
    );
    let be = be();
    let (a, b) = (rand_tensor(&be, &[3, 3], 1), rand_tensor(&be, &[3, 2], 2));
    let dy = rand_tensor(&be, &[3, 2], 3);
    let mut ctx = n.new_context(&be, 3).unwrap();
    let mut grads = Vec::new();
    for on in [false, true, false] {
        ctx.set_input_grads(on);
        n.compute_output(&be, &mut ctx, &[&a, &b]).unwrap();
        n.compute_gradients(&be, &mut ctx, &[&dy]).unwrap();
        assert_eq!(ctx.input_grad(1).is_some(), on);
        grads.push(crate::common::host(&be, &ctx.param_grads()[0]));
    }
    assert_eq!(grads[0], grads[1]);
    assert_eq!(grads[0], grads[2]);
}
