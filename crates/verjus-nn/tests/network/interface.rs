//! Named outputs: a network's interface is its input names and its output
//! names (not the layers that compute them). Old definitions (bare layer
//! names) still build; hot swaps match by interface name and unit shape, and
//! a checkpoint keeps the names.

use crate::common::{be, build, host, rand_tensor};
use std::sync::Arc;
use verjus_core::BackendRef;
use verjus_native::NativeBackend;
use verjus_nn::{Network, NetworkDef, OutputDef, Runner};

const MLP: &str = include_str!("../../../../examples/nets/fashion_mlp.json");
const CNN: &str = include_str!("../../../../examples/nets/fashion_cnn.json");

/// Two layers, output "scores" from "fc2".
const SMALL: &str = r#"{
    "inputs": [{"name": "x", "shape": [6]}],
    "layers": [
        {"name": "fc1", "type": "Linear", "out_features": 8},
        {"name": "act", "type": "Tanh"},
        {"name": "fc2", "type": "Linear", "out_features": 3}
    ],
    "outputs": [{"name": "scores", "from": "fc2"}]
}"#;

/// One layer more, other names, the same interface as SMALL.
const DEEPER: &str = r#"{
    "inputs": [{"name": "x", "shape": [6]}],
    "layers": [
        {"name": "hidden1", "type": "Linear", "out_features": 8},
        {"name": "relu1", "type": "ReLU"},
        {"name": "hidden2", "type": "Linear", "out_features": 8},
        {"name": "relu2", "type": "ReLU"},
        {"name": "head", "type": "Linear", "out_features": 3}
    ],
    "outputs": [{"name": "scores", "from": "head"}]
}"#;

fn backend() -> BackendRef {
    Arc::new(NativeBackend::new())
}

#[test]
fn the_shipped_networks_share_one_interface_and_swap_both_ways() {
    for json in [MLP, CNN] {
        let net = build(json, 0);
        assert_eq!(net.output_shapes(), [("logits".to_string(), vec![10])]);
        assert_eq!(net.def().format_version, 2);
    }
    let runner = Runner::new(build(MLP, 0), backend()).unwrap();
    assert_eq!(runner.swap(build(CNN, 1)).unwrap(), 1);
    let x = rand_tensor(&be(), &[2, 1, 28, 28], 5);
    let (out, generation) = runner.infer(&[&x]).unwrap();
    assert_eq!((out[0].dims(), generation), (&[2, 10][..], 1));
    assert_eq!(runner.swap(build(MLP, 2)).unwrap(), 2);
}

#[test]
fn a_swap_matches_outputs_by_name_across_different_layers() {
    let runner = Runner::new(build(SMALL, 0), backend()).unwrap();
    assert_eq!(runner.swap(build(DEEPER, 1)).unwrap(), 1);
    let x = rand_tensor(&be(), &[4, 6], 2);
    let (out, _) = runner.infer(&[&x]).unwrap();
    let deeper = build(DEEPER, 1);
    assert_eq!(
        host(&be(), &out[0]),
        host(&be(), &deeper.transform(&be(), &[&x]).unwrap()[0])
    );
}

#[test]
fn a_real_mismatch_is_refused_naming_both_sides() {
    let runner = Runner::new(build(SMALL, 0), backend()).unwrap();
    let cases = [
        // Another output name.
        (
            DEEPER.replace(r#""name": "scores""#, r#""name": "logits""#),
            vec!["\"scores\"", "\"logits\""],
        ),
        // The bare (version 1) form names the output after its layer.
        (
            DEEPER.replace(r#"{"name": "scores", "from": "head"}"#, r#""head""#),
            vec!["\"scores\"", "\"head\""],
        ),
        // Same name, another shape.
        (
            DEEPER.replace(r#""out_features": 3"#, r#""out_features": 4"#),
            vec!["\"scores\"", "[3]", "[4]"],
        ),
        // Another input name.
        (
            DEEPER.replace(r#""name": "x""#, r#""name": "image""#),
            vec!["\"x\"", "\"image\""],
        ),
    ];
    for (json, parts) in cases {
        let err = runner.swap(build(&json, 1)).unwrap_err().to_string();
        assert!(err.contains("refused"), "{err}");
        for part in parts {
            assert!(err.contains(part), "{err:?} does not name {part}");
        }
        assert_eq!(runner.generation(), 0);
    }
}

#[test]
fn old_definitions_with_bare_layer_names_still_build_and_write_version_1() {
    let old = SMALL.replace(r#"{"name": "scores", "from": "fc2"}"#, r#""fc2""#);
    let net = build(&old, 0);
    assert_eq!(net.output_shapes(), [("fc2".to_string(), vec![3])]);
    assert_eq!(net.def().outputs, [OutputDef::layer("fc2")]);
    let written = net.def().to_json();
    assert!(written.contains("\"format_version\": 1"), "{written}");
    assert!(written.contains("\"fc2\""), "{written}");
    // No outputs at all: the last layer, named after it.
    let implicit = SMALL.replace(r#""outputs": [{"name": "scores", "from": "fc2"}]"#, "");
    let implicit = implicit.replace("],\n    \n}", "]\n}");
    assert_eq!(
        build(&implicit, 0).output_shapes(),
        [("fc2".to_string(), vec![3])]
    );
}

#[test]
fn named_output_mistakes_are_definition_errors() {
    let error = |json: String| {
        let def = NetworkDef::from_json(&json).unwrap();
        Network::build(def, &be(), 0).unwrap_err().to_string()
    };
    let err = error(SMALL.replace(r#""from": "fc2""#, r#""from": "fc9""#));
    assert!(err.contains("fc9") && err.contains("scores"), "{err}");
    let err = error(SMALL.replace(
        r#"[{"name": "scores", "from": "fc2"}]"#,
        r#"[{"name": "scores", "from": "fc2"}, {"name": "scores", "from": "act"}]"#,
    ));
    assert!(err.contains("scores") && err.contains("act"), "{err}");
    let err = error(SMALL.replace(r#""name": "scores""#, r#""name": """#));
    assert!(err.contains("non-empty"), "{err}");
    // The same output listed twice is still allowed, as before.
    let twice = build(
        &SMALL.replace(
            r#""outputs": [{"name": "scores", "from": "fc2"}]"#,
            r#""outputs": ["fc2", "fc2"]"#,
        ),
        0,
    );
    assert_eq!(twice.output_shapes().len(), 2);
}

#[test]
fn checkpoints_and_runners_keep_the_interface_names() {
    let dir = tempfile::tempdir().unwrap();
    let native = NativeBackend::new();
    let (small, deeper) = (dir.path().join("small"), dir.path().join("deeper"));
    build(SMALL, 0).save(&small, &native).unwrap();
    build(DEEPER, 1).save(&deeper, &native).unwrap();
    let loaded = Network::load(&small, &native).unwrap();
    assert_eq!(loaded.output_shapes(), [("scores".to_string(), vec![3])]);
    assert_eq!(loaded.def(), build(SMALL, 0).def());
    let text = std::fs::read_to_string(small.join("network.json")).unwrap();
    assert!(text.contains(r#""from": "fc2""#), "{text}");

    let runner = Runner::from_checkpoint(&small, backend()).unwrap();
    assert_eq!(runner.swap_from(&deeper).unwrap(), 1);
    let served = runner.current();
    assert_eq!(
        served.network.output_shapes(),
        [("scores".to_string(), vec![3])]
    );
}
