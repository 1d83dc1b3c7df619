//! CPU/GPU parity: the Fashion-MNIST CNN (examples/nets/fashion_cnn.json)
//! trained for the same steps from the same seed on the native backend and on
//! CUDA device 0 must follow the same loss curve.
//!
//! Both backends initialise the parameters from the same Philox stream and see
//! the same batches (Fashion-MNIST when `data/fashion-mnist` or
//! `$VERJUS_DATA` holds it, otherwise generated class-dependent images).
//! Full fp32 on both sides still rounds differently (cuDNN/cuBLAS summation
//! order), and training amplifies that slowly, so the tolerance widens with
//! the step: per step `|cpu - gpu| <= 0.02 + 0.02 * |cpu|` for the first 100
//! steps, and the mean loss of the last 50 steps within 5 % (plus 0.02).
//!
//! Skips (printing why) without a GPU; `VERJUS_REQUIRE_CUDA=1` makes that a failure.

use verjus_core::{rng, BackendRef, Tensor};
use verjus_nn::data::{load_fashion_mnist, Split};
use verjus_nn::def::NetworkDef;
use verjus_nn::solver::{Adam, Solver};
use verjus_nn::{Loss, Network, Trainer};

const STEPS: usize = 300;
const BATCH: usize = 64;
const SEED: u64 = 7;
const NET: &str = include_str!("../../../examples/nets/fashion_cnn.json");

/// `STEPS` batches `(x [BATCH, 1, 28, 28], labels [BATCH])`.
fn batches() -> Vec<(Tensor, Tensor)> {
    if let Ok(train) = load_fashion_mnist(Split::Train, None) {
        if let Ok(b) = train.batches(BATCH, Some(SEED)) {
            let real: Vec<_> = b
                .take(STEPS)
                .filter_map(|b| b.ok())
                .map(|b| (b.x, b.y))
                .collect();
            if real.len() == STEPS {
                eprintln!("parity: Fashion-MNIST");
                return real;
            }
        }
    }
    eprintln!("parity: generated data (Fashion-MNIST not found)");
    (0..STEPS)
        .map(|s| {
            let labels: Vec<i64> = (0..BATCH)
                .map(|i| i64::from(rng::word_at(SEED, s as u64, i) % 10))
                .collect();
            // Class c brightens rows 2c..2c+6; noise everywhere.
            let mut x = vec![0f32; BATCH * 784];
            for (i, &c) in labels.iter().enumerate() {
                for p in 0..784 {
                    let noise =
                        rng::unit_uniform(rng::word_at(SEED + 1, s as u64 * 1000, i * 784 + p));
                    let row = p / 28;
                    let on = row >= 2 * c as usize && row < 2 * c as usize + 6;
                    x[i * 784 + p] = 0.3 * noise + if on { 0.7 } else { 0.0 };
                }
            }
            (
                Tensor::from_vec([BATCH, 1, 28, 28], x).expect("sizes"),
                Tensor::from_vec([BATCH], labels).expect("sizes"),
            )
        })
        .collect()
}

fn losses(be: BackendRef, data: &[(Tensor, Tensor)]) -> Vec<f32> {
    let def = NetworkDef::from_json(NET).expect("fashion_cnn.json parses");
    let net = Network::build(def, &*be, SEED).expect("the network builds");
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    };
    let mut trainer = Trainer::new(net, Solver::new(Adam::new(1e-3)), loss, be);
    data.iter()
        .map(|(x, y)| trainer.train_minibatch(x, y).expect("a training step").0)
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored (docs/gpu.md)"]
fn cnn_loss_curves_match_cpu() {
    let made = verjus_cuda::backend(0).map_err(|e| e.to_string());
    let Some(gpu) = verjus_conformance::backend_or_skip("parity", made, "VERJUS_REQUIRE_CUDA")
    else {
        return;
    };
    let data = batches();
    let cpu = losses(verjus_native::backend(), &data);
    let gpu = losses(gpu, &data);
    for (step, (c, g)) in cpu.iter().zip(&gpu).enumerate().take(100) {
        assert!(
            (c - g).abs() <= 0.02 + 0.02 * c.abs(),
            "step {step}: cpu loss {c}, gpu loss {g}\ncpu {cpu:?}\ngpu {gpu:?}"
        );
    }
    let tail = |v: &[f32]| v[STEPS - 50..].iter().sum::<f32>() / 50.0;
    let (c, g) = (tail(&cpu), tail(&gpu));
    assert!(
        (c - g).abs() <= 0.02 + 0.05 * c,
        "mean loss of the last 50 steps: cpu {c}, gpu {g}"
    );
    assert!(
        c < cpu[0],
        "training should lower the loss: {} -> {c}",
        cpu[0]
    );
    eprintln!(
        "parity: first loss cpu {} gpu {}, last-50 mean cpu {c} gpu {g}",
        cpu[0], gpu[0]
    );
}
