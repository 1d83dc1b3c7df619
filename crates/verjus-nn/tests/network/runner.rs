//! The hot-swap Runner: compatible swaps switch atomically under load, and
//! incompatible ones are refused while the old network keeps serving.

use crate::common::{build, host, rand_tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use verjus_core::{BackendRef, Tensor};
use verjus_native::NativeBackend;
use verjus_nn::{Network, Runner};

const MLP: &str = r#"{
    "inputs": [{"name": "x", "shape": [12]}],
    "layers": [
        {"name": "fc1", "type": "Linear", "out_features": 16},
        {"name": "act", "type": "Tanh"},
        {"name": "fc2", "type": "Linear", "out_features": 4}
    ]
}"#;

/// The same interface as MLP (input x [12], output "fc2" [4]), another body.
const WIDE: &str = r#"{
    "inputs": [{"name": "x", "shape": [12]}],
    "layers": [
        {"name": "fc1", "type": "Linear", "out_features": 40},
        {"name": "act", "type": "ReLU"},
        {"name": "fc2", "type": "Linear", "out_features": 4}
    ]
}"#;

fn backend() -> BackendRef {
    Arc::new(NativeBackend::new())
}

fn outputs_of(net: &Network, x: &Tensor) -> Vec<f32> {
    let be = NativeBackend::new();
    host(&be, &net.transform(&be, &[x]).unwrap()[0])
}

#[test]
fn swap_changes_the_outputs_and_counts_generations() {
    let be = NativeBackend::new();
    let x = rand_tensor(&be, &[3, 12], 1);
    let runner = Runner::new(build(MLP, 1), backend()).unwrap();
    let (before, generation) = runner.infer(&[&x]).unwrap();
    assert_eq!(generation, 0);
    assert_eq!(host(&be, &before[0]), outputs_of(&build(MLP, 1), &x));
    assert_eq!(runner.swap(build(WIDE, 2)).unwrap(), 1);
    let (after, generation) = runner.infer(&[&x]).unwrap();
    assert_eq!(generation, 1);
    assert_eq!(host(&be, &after[0]), outputs_of(&build(WIDE, 2), &x));
}

#[test]
fn incompatible_swaps_are_refused_and_the_old_network_keeps_serving() {
    let be = NativeBackend::new();
    let x = rand_tensor(&be, &[2, 12], 3);
    let runner = Runner::new(build(MLP, 1), backend()).unwrap();
    let want = outputs_of(&build(MLP, 1), &x);
    let cases = [
        (MLP.replace("\"shape\": [12]", "\"shape\": [13]"), "[12]"),
        (
            MLP.replace("\"name\": \"x\"", "\"name\": \"image\""),
            "\"image\"",
        ),
        (
            MLP.replace("\"out_features\": 4", "\"out_features\": 5"),
            "[5]",
        ),
        (MLP.replace("\"fc2\"", "\"head\""), "\"head\""),
    ];
    for (json, named) in cases {
        let err = runner.swap(build(&json, 1)).unwrap_err().to_string();
        assert!(err.contains("refused") && err.contains(named), "{err}");
        let (out, generation) = runner.infer(&[&x]).unwrap();
        assert_eq!(generation, 0);
        assert_eq!(host(&be, &out[0]), want);
    }
}

#[test]
fn a_bad_request_is_an_error_for_that_call_only() {
    let be = NativeBackend::new();
    let runner = Runner::new(build(MLP, 1), backend()).unwrap();
    let wrong = rand_tensor(&be, &[2, 11], 1);
    let err = runner.infer(&[&wrong]).unwrap_err().to_string();
    assert!(err.contains("[2, 12]") && err.contains("[2, 11]"), "{err}");
    let right = rand_tensor(&be, &[2, 12], 1);
    assert!(runner.infer(&[&right]).is_ok());
}

/// 4 threads x 2,000 inferences while 50 swaps happen: no errors, and every
/// output is exactly the output of one of the networks that was served.
#[test]
fn stress_four_threads_while_fifty_swaps_happen() {
    const THREADS: usize = 4;
    const CALLS: usize = 2_000;
    const SWAPS: usize = 50;
    let be = NativeBackend::new();
    let x = Arc::new(rand_tensor(&be, &[4, 12], 9));
    // Candidates cycle through three definitions/seeds; their outputs differ.
    let candidate = |i: usize| match i % 3 {
        0 => build(MLP, 1),
        1 => build(WIDE, 2),
        _ => build(MLP, 3),
    };
    let expected: Vec<Vec<f32>> = (0..3).map(|i| outputs_of(&candidate(i), &x)).collect();
    assert!(expected[0] != expected[1] && expected[1] != expected[2]);

    let runner = Arc::new(Runner::new(candidate(0), backend()).unwrap());
    // Calls made so far: the swapper spreads its swaps over the workers' run.
    let done = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (runner, x, expected) = (Arc::clone(&runner), Arc::clone(&x), expected.clone());
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let be = NativeBackend::new();
                let mut seen = [0usize; 3];
                for _ in 0..CALLS {
                    let (out, generation) = runner.infer(&[&*x]).expect("inference failed");
                    let got = host(&be, &out[0]);
                    let k = (generation % 3) as usize;
                    assert_eq!(
                        got, expected[k],
                        "generation {generation} gave another output"
                    );
                    seen[k] += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                seen
            })
        })
        .collect();
    let swapper = {
        let (runner, done) = (Arc::clone(&runner), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut during = 0;
            for i in 1..=SWAPS {
                while done.load(Ordering::Relaxed) < i * THREADS * CALLS / (SWAPS + 1) {
                    std::thread::yield_now();
                }
                during += usize::from(done.load(Ordering::Relaxed) < THREADS * CALLS);
                assert_eq!(runner.swap(candidate(i)).unwrap(), i as u64);
            }
            during
        })
    };
    let mut total = [0usize; 3];
    for w in workers {
        let seen = w.join().expect("a worker panicked");
        for (t, s) in total.iter_mut().zip(seen) {
            *t += s;
        }
    }
    let swaps_during_calls = swapper.join().expect("the swapper panicked");
    assert_eq!(total.iter().sum::<usize>(), THREADS * CALLS);
    assert!(
        swaps_during_calls >= SWAPS / 2,
        "only {swaps_during_calls} swaps overlapped calls"
    );
    assert!(
        total.iter().all(|&n| n > 0),
        "not every network served: {total:?}"
    );
    assert_eq!(runner.generation(), SWAPS as u64);
}

#[test]
fn swap_from_and_watch_load_checkpoints_and_refuse_bad_ones() {
    use std::sync::mpsc;
    use std::time::Duration;
    use verjus_nn::WatchEvent;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("serving");
    let native = NativeBackend::new();
    let x = rand_tensor(&native, &[3, 12], 4);
    let (a, b) = (build(MLP, 1), build(WIDE, 2));
    a.save(&folder, &native).unwrap();
    let runner = Arc::new(Runner::from_checkpoint(&folder, backend()).unwrap());
    assert_eq!(
        host(&native, &runner.infer(&[&x]).unwrap().0[0]),
        outputs_of(&a, &x)
    );

    let (tx, rx) = mpsc::channel();
    let watcher = runner
        .watch(&folder, Duration::from_millis(10), move |e| {
            tx.send(e).unwrap();
        })
        .unwrap();
    b.save(&folder, &native).unwrap();
    let event = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        matches!(event, WatchEvent::Swapped { generation: 1 }),
        "{event:?}"
    );
    assert_eq!(
        host(&native, &runner.infer(&[&x]).unwrap().0[0]),
        outputs_of(&b, &x)
    );

    // A network that does not fit is refused, and b keeps serving.
    let other = build(
        r#"{"inputs": [{"name": "x", "shape": [12]}],
            "layers": [{"name": "fc2", "type": "Linear", "out_features": 3}]}"#,
        3,
    );
    other.save(&folder, &native).unwrap();
    match rx.recv_timeout(Duration::from_secs(10)).unwrap() {
        WatchEvent::Refused { error } => assert!(error.to_string().contains("[4]"), "{error}"),
        e => panic!("{e:?}"),
    }
    assert_eq!(runner.generation(), 1);
    drop(watcher);
    let err = runner.swap_from(&dir.path().join("missing")).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    assert_eq!(
        runner.swap_from(&folder).unwrap_err().to_string(),
        runner
            .swap(build(
                r#"{"inputs": [{"name": "x", "shape": [12]}],
            "layers": [{"name": "fc2", "type": "Linear", "out_features": 3}]}"#,
                3,
            ))
            .unwrap_err()
            .to_string()
    );
}

/// A character model for the kept-context test: a sequence in, one output per frame.
const SEQ: &str = r#"{
    "format_version": 3,
    "inputs": [{"name": "ids", "shape": [null], "dtype": "int32"}],
    "layers": [
        {"name": "embed", "type": "Embedding", "vocab": 9, "dim": 4},
        {"name": "rnn", "type": "LSTM", "hidden": 5},
        {"name": "fc", "type": "Linear", "out_features": 9}
    ]
}"#;

#[test]
fn kept_contexts_serve_requests_of_any_size_as_fresh_ones() {
    let be = NativeBackend::new();
    let runner = Runner::new(build(MLP, 1), backend()).unwrap();
    for (batch, seed) in [(5, 1), (2, 2), (7, 3), (1, 4), (5, 5)] {
        let x = rand_tensor(&be, &[batch, 12], seed);
        let (out, _) = runner.infer(&[&x]).unwrap();
        assert_eq!(
            host(&be, &out[0]),
            outputs_of(&build(MLP, 1), &x),
            "batch {batch}"
        );
    }
    // Sequences: a long request, then shorter ones with lengths below their
    // padded length (frames of the earlier request must not show through).
    let net = build(SEQ, 2);
    let runner = Runner::new(build(SEQ, 2), backend()).unwrap();
    for (batch, time, lens) in [
        (3, 6, vec![6, 2, 5]),
        (2, 4, vec![1, 4]),
        (3, 2, vec![2, 1, 2]),
    ] {
        let ids: Vec<i32> = (0..batch * time).map(|i| (i * 7 % 9) as i32).collect();
        let ids = Tensor::from_vec([batch, time], ids).unwrap();
        let lengths = Tensor::from_vec([batch], lens.clone()).unwrap();
        let (out, _) = runner.infer_with_lengths(&[&ids], Some(&lengths)).unwrap();
        let fresh = net
            .transform_with_lengths(&be, &[&ids], Some(&lengths))
            .unwrap();
        assert_eq!(host(&be, &out[0]), host(&be, &fresh[0]), "lengths {lens:?}");
    }
}
