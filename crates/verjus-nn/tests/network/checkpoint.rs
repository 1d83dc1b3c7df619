//! Checkpoints: exact resume, round trips, atomic replacement that keeps
//! foreign files, and refusal of broken folders without touching anything.

use crate::common::{param_values as params, rand_tensor};
use std::path::Path;
use std::sync::Arc;
use verjus_core::{BackendRef, Tensor};
use verjus_native::NativeBackend;
use verjus_nn::checkpoint::{MANIFEST_FILE, SOLVER_FILE, TRAINER_FILE, WEIGHTS_FILE};
use verjus_nn::solver::{Adam, LrSchedule, Solver};
use verjus_nn::{Loss, Network, NetworkDef, Trainer};

pub const DROPOUT_MLP: &str = r#"{
    "inputs": [{"name": "x", "shape": [12]}],
    "layers": [
        {"name": "fc1", "type": "Linear", "out_features": 32},
        {"name": "act", "type": "ReLU"},
        {"name": "drop", "type": "Dropout", "p": 0.3},
        {"name": "fc2", "type": "Linear", "out_features": 5}
    ]
}"#;

fn backend() -> BackendRef {
    Arc::new(NativeBackend::new())
}

pub fn trainer(seed: u64) -> Trainer {
    let be = backend();
    let net = Network::build(NetworkDef::from_json(DROPOUT_MLP).unwrap(), &*be, seed).unwrap();
    let solver = Solver::new(Adam::new(0.01)).with_schedule(LrSchedule::Step {
        step_size: 3,
        gamma: 0.5,
    });
    Trainer::new(
        net,
        solver,
        Loss::SoftmaxCrossEntropy {
            label_smoothing: 0.0,
        },
        be,
    )
}

/// Batch `i` of a fixed stream (sizes vary, so several contexts are used).
fn batch(i: usize) -> (Tensor, Tensor) {
    let be = NativeBackend::new();
    let n = [8, 5, 8][i % 3];
    let x = rand_tensor(&be, &[n, 12], 100 + i as u64);
    let y: Vec<i64> = (0..n).map(|k| ((k * 7 + i) % 5) as i64).collect();
    (x, Tensor::from_vec([n], y).unwrap())
}

fn run(t: &mut Trainer, steps: std::ops::Range<usize>) -> Vec<f32> {
    steps
        .map(|i| {
            let (x, y) = batch(i);
            t.train_minibatch(&x, &y).unwrap().0
        })
        .collect()
}

#[test]
fn resume_continues_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("ckpt");
    let mut straight = trainer(7);
    let mut losses = run(&mut straight, 0..10);

    let mut first = trainer(7);
    let mut resumed_losses = run(&mut first, 0..4);
    first.save_checkpoint(&folder).unwrap();
    drop(first);
    let mut resumed = Trainer::resume(&folder, backend()).unwrap();
    assert_eq!(resumed.solver().state().step(), 4);
    assert_eq!(resumed.dropout_step(), 4);
    resumed_losses.extend(run(&mut resumed, 4..10));
    assert_eq!(
        losses.iter().map(|l| l.to_bits()).collect::<Vec<_>>(),
        resumed_losses
            .iter()
            .map(|l| l.to_bits())
            .collect::<Vec<_>>()
    );
    assert_eq!(params(straight.network()), params(resumed.network()));
    // Without the dropout position the run diverges: the test can fail.
    let mut wrong = Trainer::resume(&folder, backend()).unwrap();
    wrong.set_dropout_step(0);
    losses.truncate(5);
    assert_ne!(run(&mut wrong, 4..5), losses[4..5]);
}

#[test]
fn network_folders_round_trip_and_keep_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("net");
    let be = NativeBackend::new();
    let def = NetworkDef::from_json(DROPOUT_MLP).unwrap();
    let net = Network::build(def.clone(), &be, 3).unwrap();
    net.save(&folder, &be).unwrap();
    std::fs::write(folder.join("metrics.jsonl"), "{\"epoch\": 1}\n").unwrap();
    let loaded = Network::load(&folder, &be).unwrap();
    assert_eq!(loaded.def(), &def);
    assert_eq!(loaded.seed(), 3);
    assert_eq!(params(&loaded), params(&net));
    // A training checkpoint over it keeps metrics.jsonl; a network save over
    // that drops the trainer's files.
    trainer(3).save_checkpoint(&folder).unwrap();
    assert!(folder.join(TRAINER_FILE).exists());
    net.save(&folder, &be).unwrap();
    assert!(!folder.join(TRAINER_FILE).exists() && !folder.join(SOLVER_FILE).exists());
    assert_eq!(
        std::fs::read_to_string(folder.join("metrics.jsonl")).unwrap(),
        "{\"epoch\": 1}\n"
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [".net.lock", "net"], "no temporary folder is left");
    // A network folder is no training checkpoint.
    let err = Trainer::resume(&folder, backend())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains(MANIFEST_FILE) && err.contains(TRAINER_FILE),
        "{err}"
    );
}

fn broken(folder: &Path, file: &str, edit: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut bytes = std::fs::read(folder.join(file)).unwrap();
    edit(&mut bytes);
    std::fs::write(folder.join(file), bytes).unwrap();
    Trainer::resume(folder, backend())
        .err()
        .unwrap()
        .to_string()
}

#[test]
fn broken_checkpoints_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = trainer(1);
    run(&mut t, 0..2);
    let fresh = |name: &str| {
        let folder = dir.path().join(name);
        t.save_checkpoint(&folder).unwrap();
        folder
    };
    let err = broken(&fresh("a"), WEIGHTS_FILE, |b| b[100] ^= 1);
    assert!(
        err.contains(WEIGHTS_FILE) && err.contains("CRC-32"),
        "{err}"
    );
    let err = broken(&fresh("b"), SOLVER_FILE, |b| b.truncate(b.len() / 2));
    assert!(err.contains(SOLVER_FILE) && err.contains("bytes"), "{err}");
    let err = broken(&fresh("c"), MANIFEST_FILE, |b| b.truncate(5));
    assert!(
        err.contains(MANIFEST_FILE) && err.contains("invalid"),
        "{err}"
    );
    // Consistent but wrong states: trainer.json edited and the manifest
    // rewritten to match, so only the contents' checks can catch them.
    let resume_edited = |name: &str, from: &str, to: &str| {
        let folder = fresh(name);
        let text = std::fs::read_to_string(folder.join(TRAINER_FILE)).unwrap();
        let edited = text.replace(from, to);
        assert_ne!(text, edited);
        rewrite(&folder, TRAINER_FILE, edited.as_bytes());
        Trainer::resume(&folder, backend())
            .err()
            .unwrap()
            .to_string()
    };
    let err = resume_edited("d", "\"fc1.bias\"", "\"fc9.bias\"");
    assert!(
        err.contains("fc9.bias") && err.contains(TRAINER_FILE),
        "{err}"
    );
    // A loss setting the first step would refuse is refused on resume.
    let err = resume_edited("e", "\"label_smoothing\": 0.0", "\"label_smoothing\": 5.0");
    assert!(
        err.contains("label_smoothing") && err.contains(TRAINER_FILE),
        "{err}"
    );
}

#[test]
fn forged_solver_states_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = trainer(1);
    run(&mut t, 0..2);
    let resume_forged = |name: &str, file: &str, forge: &dyn Fn(&mut Vec<u8>)| {
        let folder = dir.path().join(name);
        t.save_checkpoint(&folder).unwrap();
        let mut bytes = std::fs::read(folder.join(file)).unwrap();
        forge(&mut bytes);
        rewrite(&folder, file, &bytes);
        Trainer::resume(&folder, backend())
            .err()
            .unwrap()
            .to_string()
    };
    // Step counts past what a run reaches: the next step's count would overflow.
    let err = resume_forged("a", TRAINER_FILE, &|b| {
        replace_once(b, "\"step\": 2", "\"step\": 99999999999999999")
    });
    assert!(
        err.contains("step is 99999999999999999") && err.contains(TRAINER_FILE),
        "{err}"
    );
    let err = resume_forged("b", TRAINER_FILE, &|b| {
        replace_once(b, "\"fc1.bias\": 2", "\"fc1.bias\": 18446744073709551615")
    });
    assert!(
        err.contains("steps of \"fc1.bias\"") && err.contains("2^53"),
        "{err}"
    );
    // Adam's second moment is a mean of squares: a negative one makes NaN.
    let set_first = |key: &'static str, value: f32| {
        move |b: &mut Vec<u8>| {
            let at = tensor_offset(b, key);
            b[at..at + 4].copy_from_slice(&value.to_le_bytes());
        }
    };
    let err = resume_forged("c", SOLVER_FILE, &set_first("fc2.weight.v", -1.0));
    assert!(
        err.contains("\"fc2.weight.v\" holds -1 at index 0") && err.contains(SOLVER_FILE),
        "{err}"
    );
    let err = resume_forged("d", SOLVER_FILE, &set_first("fc1.bias.m", f32::NAN));
    assert!(err.contains("\"fc1.bias.m\" holds NaN"), "{err}");
    // A negative first moment is an ordinary state.
    let folder = dir.path().join("e");
    t.save_checkpoint(&folder).unwrap();
    let mut bytes = std::fs::read(folder.join(SOLVER_FILE)).unwrap();
    set_first("fc2.weight.m", -1.0)(&mut bytes);
    rewrite(&folder, SOLVER_FILE, &bytes);
    Trainer::resume(&folder, backend()).unwrap();
}

/// Replaces the first `from` in the text `bytes` by `to`.
fn replace_once(bytes: &mut Vec<u8>, from: &str, to: &str) {
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.contains(from), "{text}");
    *bytes = text.replacen(from, to, 1).into_bytes();
}

/// Where the data of tensor `key` starts in safetensors `bytes`.
fn tensor_offset(bytes: &[u8], key: &str) -> usize {
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let start = header[key]["data_offsets"][0].as_u64().unwrap() as usize;
    8 + header_len + start
}

/// Replaces `file` and updates the manifest to match, as a careful forger would.
pub fn rewrite(folder: &Path, file: &str, bytes: &[u8]) {
    std::fs::write(folder.join(file), bytes).unwrap();
    let path = folder.join(MANIFEST_FILE);
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut crc = flate2::Crc::new();
    crc.update(bytes);
    manifest["files"][file] = serde_json::json!({"bytes": bytes.len(), "crc32": crc.sum()});
    std::fs::write(path, manifest.to_string()).unwrap();
}

#[test]
fn deep_and_huge_definitions_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let be = NativeBackend::new();
    let folder = dir.path().join("net");
    Network::build(NetworkDef::from_json(DROPOUT_MLP).unwrap(), &be, 0)
        .unwrap()
        .save(&folder, &be)
        .unwrap();
    std::fs::remove_file(folder.join(MANIFEST_FILE)).unwrap();
    let def = folder.join(verjus_nn::checkpoint::DEFINITION_FILE);
    let deep = format!(
        "{{\"inputs\": [], \"layers\": [{{\"type\": \"ReLU\", \"x\": {}{}}}]}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    std::fs::write(&def, deep).unwrap();
    let err = Network::load(&folder, &be).unwrap_err().to_string();
    assert!(
        err.contains("network.json") && err.contains("recursion"),
        "{err}"
    );
    // Over the cap: refused from the file's size, before it is read.
    let file = std::fs::File::create(&def).unwrap();
    file.set_len(verjus_nn::checkpoint::MAX_JSON_BYTES + 1)
        .unwrap();
    let err = Network::load(&folder, &be).unwrap_err().to_string();
    assert!(
        err.contains("network.json") && err.contains("limit"),
        "{err}"
    );
}
