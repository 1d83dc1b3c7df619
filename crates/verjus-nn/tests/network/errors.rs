//! Every definition mistake is an error at build time that names the layer
//! and, for shape problems, the expected and the actual shape.

use crate::common::be;
use verjus_nn::{Network, NetworkDef};

/// Builds a one-input (`x`, shape `[4]` unless given) network and returns the error text.
fn error(json: &str) -> String {
    let def = NetworkDef::from_json(json).unwrap();
    let err = Network::build(def, &be(), 0).unwrap_err();
    assert!(
        matches!(err, verjus_core::Error::Definition { .. }),
        "not a definition error: {err}"
    );
    err.to_string()
}

fn layers(list: &str) -> String {
    format!(r#"{{"inputs": [{{"name": "x", "shape": [4]}}], "layers": [{list}]}}"#)
}

fn assert_mentions(err: &str, parts: &[&str]) {
    for p in parts {
        assert!(err.contains(p), "{err:?} does not mention {p:?}");
    }
}

#[test]
fn unknown_input() {
    let e = error(&layers(
        r#"{"name": "fc", "type": "Linear", "out_features": 2, "inputs": ["nope"]}"#,
    ));
    assert_mentions(&e, &["\"fc\"", "\"nope\"", "x"]);
}

#[test]
fn duplicate_name() {
    let e = error(&layers(
        r#"{"name": "a", "type": "ReLU"}, {"name": "a", "type": "Tanh"}"#,
    ));
    assert_mentions(&e, &["\"a\"", "duplicate"]);
}

#[test]
fn cycle() {
    let e = error(&layers(
        r#"{"name": "a", "type": "Add", "inputs": ["x", "c"]},
           {"name": "b", "type": "ReLU", "inputs": ["a"]},
           {"name": "c", "type": "Tanh", "inputs": ["b"]}"#,
    ));
    assert_mentions(&e, &["cycle", "a -> b -> c -> a"]);
}

#[test]
fn linear_on_a_wrong_size() {
    let e = error(&layers(
        r#"{"name": "fc", "type": "Linear", "in_features": 784, "out_features": 2}"#,
    ));
    assert_mentions(&e, &["\"fc\"", "[*, 784]", "[4]"]);
}

#[test]
fn add_of_different_shapes() {
    let e = error(&layers(
        r#"{"name": "fc", "type": "Linear", "out_features": 3},
           {"name": "sum", "type": "Add", "inputs": ["fc", "x"]}"#,
    ));
    assert_mentions(&e, &["\"sum\"", "[3]", "[4]"]);
}

#[test]
fn bad_kernel_size() {
    let json = r#"{"inputs": [{"name": "img", "shape": [1, 5, 5]}], "layers": [
        {"name": "block", "type": "Sequential", "layers": [
            {"name": "conv", "type": "Conv2d", "out_channels": 2, "kernel": 7}]}]}"#;
    let e = error(json);
    assert_mentions(&e, &["\"block.conv\"", "[1, 5, 5]", "7"]);
    let e = error(&layers(
        r#"{"name": "conv", "type": "Conv2d", "out_channels": 2, "kernel": 3}"#,
    ));
    assert_mentions(&e, &["\"conv\"", "[C, H, W]", "[4]"]);
    let e = error(
        r#"{"inputs": [{"name": "img", "shape": [1, 4, 4]}], "layers": [
            {"name": "pool", "type": "MaxPool2d", "kernel": 0}]}"#,
    );
    assert_mentions(&e, &["\"pool\"", "[1, 4, 4]"]);
}

#[test]
fn concat_axis_out_of_range() {
    let e = error(&layers(
        r#"{"name": "cat", "type": "Concat", "axis": 1, "inputs": ["x", "x"]}"#,
    ));
    assert_mentions(&e, &["\"cat\"", "axis 1", "[4]"]);
    let e = error(
        r#"{"inputs": [{"name": "a", "shape": [2, 3]}, {"name": "b", "shape": [3, 3]}],
            "layers": [{"name": "cat", "type": "Concat", "axis": 1, "inputs": ["a", "b"]}]}"#,
    );
    assert_mentions(&e, &["\"cat\"", "[3, 3]", "[2, *]"]);
}

#[test]
fn bad_dropout_probability() {
    for p in ["1.0", "-0.1", "1.5"] {
        let e = error(&layers(&format!(
            r#"{{"name": "drop", "type": "Dropout", "p": {p}}}"#
        )));
        assert_mentions(&e, &["\"drop\"", "[0, 1)"]);
    }
}

#[test]
fn share_target_missing_or_mismatched() {
    let e = error(&layers(
        r#"{"name": "fc", "type": "Linear", "out_features": 4, "share": "ghost"}"#,
    ));
    assert_mentions(&e, &["\"fc\"", "\"ghost\""]);
    let e = error(&layers(
        r#"{"name": "a", "type": "Linear", "out_features": 3},
           {"name": "b", "type": "Linear", "out_features": 3, "share": "a"}"#,
    ));
    assert_mentions(&e, &["\"b\"", "\"a\"", "weight [3, 4]", "weight [3, 3]"]);
    let e = error(&layers(
        r#"{"name": "a", "type": "Linear", "out_features": 4},
           {"name": "b", "type": "ReLU", "share": "a"}"#,
    ));
    assert_mentions(&e, &["\"b\"", "ReLU", "Linear"]);
}

#[test]
fn reshape_and_inputs() {
    let e = error(&layers(
        r#"{"name": "re", "type": "Reshape", "shape": [3, 2]}"#,
    ));
    assert_mentions(&e, &["\"re\"", "[4]", "[3, 2]"]);
    let e = error(
        r#"{"inputs": [{"name": "a", "shape": [2]}, {"name": "b", "shape": [2]}],
            "layers": [{"name": "act", "type": "ReLU"}]}"#,
    );
    assert_mentions(&e, &["\"act\"", "2 inputs"]);
    let e = error(&layers(
        r#"{"name": "act", "type": "ReLU", "inputs": ["x", "x"]}"#,
    ));
    assert_mentions(&e, &["\"act\"", "1 input"]);
}

#[test]
fn absurd_sizes_are_errors_not_panics() {
    let e = error(&layers(
        r#"{"name": "re", "type": "Reshape", "shape": [1099511627776, 1099511627776]}"#,
    ));
    assert_mentions(&e, &["\"re\""]);
    let e = error(&layers(
        r#"{"name": "fc", "type": "Linear", "out_features": 1099511627776}"#,
    ));
    assert_mentions(&e, &["\"fc\"", "too large"]);
    let e = error(
        r#"{"inputs": [{"name": "img", "shape": [1, 4, 4]}], "layers": [
            {"name": "conv", "type": "Conv2d", "out_channels": 2, "kernel": 3, "padding": 4611686018427387904}]}"#,
    );
    assert_mentions(&e, &["\"conv\""]);
}

#[test]
fn a_trainer_refuses_a_network_of_two_outputs_before_its_step() {
    use verjus_core::Tensor;
    use verjus_nn::solver::{Sgd, Solver};
    use verjus_nn::{Loss, Trainer};
    let def = NetworkDef::from_json(
        r#"{"inputs": [{"name": "x", "shape": [4]}], "outputs": ["f", "g"], "layers": [
            {"name": "f", "type": "Linear", "out_features": 3, "inputs": ["x"]},
            {"name": "g", "type": "Linear", "out_features": 2, "inputs": ["x"]}]}"#,
    )
    .unwrap();
    let net = Network::build(def, &be(), 0).unwrap();
    let e = Trainer::check_network(&net).unwrap_err().to_string();
    assert_mentions(&e, &["one input and one output", "[\"f\", \"g\"]"]);
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    };
    let mut trainer = Trainer::new(
        net,
        Solver::new(Sgd::new(0.1)),
        loss,
        std::sync::Arc::new(be()),
    );
    let x = Tensor::from_vec([2, 4], vec![0.5f32; 8]).unwrap();
    let y = Tensor::from_vec([2], vec![0i64, 1]).unwrap();
    let e = trainer.train_minibatch(&x, &y).unwrap_err().to_string();
    assert_mentions(&e, &["one input and one output"]);
}
