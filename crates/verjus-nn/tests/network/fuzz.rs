//! Fuzzing every loader of untrusted input: each must return `Ok` or `Err`
//! and never panic (proptest reports a panic as a failure).
//!
//! - definitions: random JSON trees over the definition's own vocabulary (so
//!   many reach `Network::build`), and bit flips and truncations of real
//!   definitions;
//! - weights: bit flips, truncations and random bytes through
//!   `weights::decode` and `Network::load_parameters`;
//! - checkpoints: one file of a real checkpoint mutated, with the manifest
//!   rewritten to match so the damage reaches the parsers, through
//!   `Trainer::resume`.
//!
//! The case count is proptest's (`PROPTEST_CASES`, 256 by default), so CI
//! runs a bounded version and a long run is one environment variable away.

use crate::checkpoint::{rewrite, trainer, DROPOUT_MLP};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::sync::{Arc, OnceLock};
use verjus_native::NativeBackend;
use verjus_nn::checkpoint::{
    DEFINITION_FILE, MANIFEST_FILE, SOLVER_FILE, TRAINER_FILE, WEIGHTS_FILE,
};
use verjus_nn::{weights, Network, NetworkDef, Trainer};

const KEYS: &[&str] = &[
    "format_version",
    "inputs",
    "layers",
    "outputs",
    "name",
    "shape",
    "type",
    "inputs",
    "share",
    "out_features",
    "bias",
    "out_channels",
    "kernel",
    "stride",
    "padding",
    "p",
    "shape",
    "axis",
];
const TYPES: &[&str] = &[
    "Linear",
    "Conv2d",
    "ReLU",
    "Tanh",
    "Sigmoid",
    "MaxPool2d",
    "AvgPool2d",
    "Dropout",
    "Flatten",
    "Reshape",
    "Add",
    "Concat",
    "Softmax",
    "LogSoftmax",
    "Sequential",
    "Graph",
];

/// Small JSON leaves: sizes stay small so a valid draw builds quickly.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..40).prop_map(Value::from),
        (-2.0f64..2.0).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
        prop::sample::select(TYPES).prop_map(Value::from),
        prop::sample::select(&["x", "fc1", "a", "b", ""][..]).prop_map(Value::from),
    ]
}

fn tree() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

/// A layer-shaped object: a real type with a few settings drawn from the
/// vocabulary, so that some draws build.
fn layer() -> impl Strategy<Value = Value> {
    let setting = prop_oneof![
        (1u64..9).prop_map(Value::from),
        (0.0f64..1.0).prop_map(Value::from),
        leaf(),
        prop::collection::vec(1u64..5, 1..3).prop_map(|v| json!(v)),
    ];
    (
        prop::sample::select(TYPES),
        prop::collection::vec((prop::sample::select(KEYS), setting), 0..3),
    )
        .prop_map(|(kind, settings)| {
            let mut layer: Map<String, Value> = settings
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            layer.insert("type".into(), kind.into());
            Value::Object(layer)
        })
}

/// A definition-shaped tree: real inputs, mostly layer-shaped layers (named
/// `l0`, `l1`, ... unless the draw named them).
fn definition() -> impl Strategy<Value = Value> {
    let item = prop_oneof![4 => layer(), 1 => tree()];
    (
        prop::collection::vec(item, 0..5),
        prop::collection::vec(1u64..9, 1..4),
    )
        .prop_map(|(mut layers, shape)| {
            for (i, layer) in layers.iter_mut().enumerate() {
                if let Value::Object(fields) = layer {
                    fields
                        .entry("name")
                        .or_insert_with(|| format!("l{i}").into());
                }
            }
            json!({"inputs": [{"name": "x", "shape": shape}], "layers": layers})
        })
}

fn try_build(text: &str) {
    if let Ok(def) = NetworkDef::from_json(text) {
        let be = NativeBackend::new();
        if let Ok(net) = Network::build(def.clone(), &be, 0) {
            assert_eq!(net.def(), &def);
        }
    }
}

fn mutate(bytes: &mut Vec<u8>, flips: &[(usize, u8)], cut: Option<usize>) {
    if bytes.is_empty() {
        return;
    }
    for &(at, bit) in flips {
        let i = at % bytes.len();
        bytes[i] ^= 1 << (bit % 8);
    }
    if let Some(cut) = cut {
        bytes.truncate(cut % (bytes.len() + 1));
    }
}

fn flips() -> impl Strategy<Value = Vec<(usize, u8)>> {
    prop::collection::vec((any::<usize>(), any::<u8>()), 0..4)
}

/// A checkpoint's folder (kept alive) and its files' bytes.
type Saved = (tempfile::TempDir, Vec<(&'static str, Vec<u8>)>);

/// A saved checkpoint of the dropout MLP after one step, made once.
fn checkpoint() -> &'static Saved {
    static CKPT: OnceLock<Saved> = OnceLock::new();
    CKPT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("ckpt");
        let mut t = trainer(5);
        let be = NativeBackend::new();
        let x = crate::common::rand_tensor(&be, &[4, 12], 9);
        let y = verjus_core::Tensor::from_vec([4], vec![0i64, 1, 2, 3]).unwrap();
        t.train_minibatch(&x, &y).unwrap();
        t.save_checkpoint(&folder).unwrap();
        let files = [
            DEFINITION_FILE,
            WEIGHTS_FILE,
            TRAINER_FILE,
            SOLVER_FILE,
            MANIFEST_FILE,
        ]
        .into_iter()
        .map(|f| (f, std::fs::read(folder.join(f)).unwrap()))
        .collect();
        (dir, files)
    })
}

proptest! {
    #[test]
    fn random_definitions_never_panic(def in definition()) {
        try_build(&def.to_string());
    }

    #[test]
    fn mutated_definitions_never_panic(flips in flips(), cut in prop::option::of(any::<usize>())) {
        for text in [DROPOUT_MLP, include_str!("../../../../examples/nets/fashion_cnn.json")] {
            let mut bytes = text.as_bytes().to_vec();
            mutate(&mut bytes, &flips, cut);
            if let Ok(text) = std::str::from_utf8(&bytes) {
                try_build(text);
            }
        }
    }

    #[test]
    fn mutated_weights_never_panic(
        flips in flips(),
        cut in prop::option::of(any::<usize>()),
        junk in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let (_, files) = checkpoint();
        let mut bytes = files[1].1.clone();
        mutate(&mut bytes, &flips, cut);
        let be = NativeBackend::new();
        let mut net = Network::build(NetworkDef::from_json(DROPOUT_MLP).unwrap(), &be, 0).unwrap();
        for input in [bytes, junk] {
            if let Ok(named) = weights::decode(std::path::Path::new("fuzz.safetensors"), &input) {
                let _ = net.load_parameters(&be, named, true);
            }
        }
    }

    #[test]
    fn mutated_checkpoints_never_panic(
        file in 0usize..5,
        flips in flips(),
        cut in prop::option::of(any::<usize>()),
    ) {
        let (dir, files) = checkpoint();
        let folder = tempfile::tempdir_in(dir.path()).unwrap();
        for (name, bytes) in files {
            std::fs::write(folder.path().join(name), bytes).unwrap();
        }
        let (name, original) = &files[file];
        let mut bytes = original.clone();
        mutate(&mut bytes, &flips, cut);
        if *name == MANIFEST_FILE {
            std::fs::write(folder.path().join(name), &bytes).unwrap();
        } else {
            rewrite(folder.path(), name, &bytes);
        }
        let _ = Trainer::resume(folder.path(), Arc::new(NativeBackend::new()));
        let _ = Network::load(folder.path(), &NativeBackend::new());
    }
}
