//! Hot-swapping the network that serves inference, under load.
//!
//! Trains the MLP and the CNN of `examples/nets/` briefly on Fashion-MNIST
//! (other layers, one interface: input `image` [1, 28, 28], output `logits`
//! [10], from `fc3` in one and `fc2` in the other), saves both as checkpoints, then serves the test images from four threads
//! while the main thread swaps between the two checkpoints several times and
//! offers one network that does not fit (another input shape), which is
//! refused while the old network keeps serving. Prints the requests served,
//! the failures (zero) and the accuracy on the first 2000 test images before
//! and after each swap.
//!
//! `cargo run --release --example hot_swap [-- --mlp-steps N --cnn-steps N --out DIR --device cpu|cuda|cuda:N]`
//!
//! `--device` picks where training and serving compute (`verjus::backend`); the
//! requests are host batches uploaded to it and the logits are downloaded, as a
//! server would. Without a GPU, `--device cuda` exits with an error naming what
//! is missing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use verjus::nn::data::{load_fashion_mnist, Dataset, Split};
use verjus::nn::def::NetworkDef;
use verjus::nn::solver::{Adam, Solver};
use verjus::nn::{Loss, Network, Runner, Trainer};
use verjus::{ops, BackendRef, Device, Error, Result, Tensor};

const BATCH: usize = 128;
const SERVE_BATCH: usize = 32;
const THREADS: usize = 4;
const SWAPS: usize = 6;
/// Test images the accuracy is measured on (the first ones), to keep the
/// example quick while four threads keep the cores busy.
const ACCURACY_EXAMPLES: usize = 2000;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

struct Args {
    mlp_steps: usize,
    cnn_steps: usize,
    out: PathBuf,
    device: Device,
}

fn args() -> Result<Args> {
    let mut args = Args {
        mlp_steps: 469,
        cnn_steps: 150,
        out: PathBuf::from("runs/hot_swap"),
        device: Device::Cpu,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            println!("options: --mlp-steps N  --cnn-steps N  --out DIR  --device cpu|cuda|cuda:N");
            std::process::exit(0);
        }
        let value = it
            .next()
            .ok_or_else(|| Error::invalid("arguments", format!("{flag} needs a value")))?;
        let number = || {
            value
                .parse()
                .map_err(|_| Error::invalid("arguments", format!("{flag}: not a number: {value}")))
        };
        match flag.as_str() {
            "--mlp-steps" => args.mlp_steps = number()?,
            "--cnn-steps" => args.cnn_steps = number()?,
            "--out" => args.out = value.into(),
            "--device" => args.device = value.parse()?,
            other => {
                return Err(Error::invalid(
                    "arguments",
                    format!("unknown option {other:?} (try --help)"),
                ))
            }
        }
    }
    Ok(args)
}

/// The definition in `examples/nets/{file}`, as shipped.
fn definition(file: &str) -> Result<NetworkDef> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/nets")
        .join(file);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::file(&path, e.to_string()))?;
    NetworkDef::from_json(&text).map_err(|e| e.in_file(&path))
}

/// Trains `def` for `steps` minibatches of Adam and saves a checkpoint.
fn train(def: NetworkDef, steps: usize, data: &Dataset, be: &BackendRef, out: &Path) -> Result<()> {
    let net = Network::build(def, &**be, 0)?;
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    };
    let mut trainer = Trainer::new(
        net,
        Solver::new(Adam::new(1e-3)),
        loss,
        BackendRef::clone(be),
    );
    let start = Instant::now();
    let mut epoch = 0;
    let mut done = 0;
    while done < steps {
        epoch += 1;
        for batch in data.batches(BATCH, Some(epoch))?.take(steps - done) {
            let batch = batch?;
            trainer.train_minibatch(&batch.x, &batch.y)?;
            done += 1;
        }
    }
    trainer.save_checkpoint(out)?;
    println!(
        "trained {} for {steps} steps in {:.1} s",
        out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Examples `start..start + n` of `data` as a batch on `be`'s device.
fn rows(be: &BackendRef, data: &Dataset, start: usize, n: usize) -> Result<Tensor> {
    let unit: usize = data.examples().dims()[1..].iter().product();
    let values = data.examples().as_slice::<f32>()?[start * unit..(start + n) * unit].to_vec();
    let mut dims = data.examples().dims().to_vec();
    dims[0] = n;
    ops::upload(&**be, &Tensor::from_vec(dims, values)?)
}

/// The runner's accuracy on the first [`ACCURACY_EXAMPLES`] of `data`.
fn accuracy(runner: &Runner, data: &Dataset) -> Result<f64> {
    let labels = data.labels().as_slice::<i64>()?;
    let total = ACCURACY_EXAMPLES.min(data.len());
    let mut correct = 0;
    for start in (0..total).step_by(500) {
        let n = 500.min(total - start);
        let be = runner.backend();
        let (out, _) = runner.infer(&[&rows(be, data, start, n)?])?;
        let logits = ops::download(&**be, &out[0])?;
        let logits = logits.as_slice::<f32>()?;
        for (i, row) in logits.chunks_exact(10).enumerate() {
            let best = (0..10).fold(0, |b, k| if row[k] > row[b] { k } else { b });
            correct += usize::from(best as i64 == labels[start + i]);
        }
    }
    Ok(correct as f64 / total as f64)
}

fn run() -> Result<()> {
    let args = args()?;
    let be = verjus::backend(args.device)?;
    let train_set = load_fashion_mnist(Split::Train, None)?;
    let test = Arc::new(load_fashion_mnist(Split::Test, None)?);
    let (mlp, cnn) = (args.out.join("mlp"), args.out.join("cnn"));
    train(
        definition("fashion_mlp.json")?,
        args.mlp_steps,
        &train_set,
        &be,
        &mlp,
    )?;
    train(
        definition("fashion_cnn.json")?,
        args.cnn_steps,
        &train_set,
        &be,
        &cnn,
    )?;

    let runner = Arc::new(Runner::from_checkpoint(&mlp, BackendRef::clone(&be))?);
    let (requests, failures) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let servers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (runner, test, be) = (Arc::clone(&runner), Arc::clone(&test), be.clone());
            let (requests, failures, stop) = (
                Arc::clone(&requests),
                Arc::clone(&failures),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let mut start = t * 997;
                while !stop.load(Ordering::Relaxed) {
                    start = (start + SERVE_BATCH) % (test.len() - SERVE_BATCH);
                    let ok = rows(&be, &test, start, SERVE_BATCH)
                        .and_then(|x| runner.infer(&[&x]))
                        .is_ok_and(|(out, _)| out[0].dims() == [SERVE_BATCH, 10]);
                    requests.fetch_add(1, Ordering::Relaxed);
                    failures.fetch_add(u64::from(!ok), Ordering::Relaxed);
                }
            })
        })
        .collect();

    println!(
        "serving {} with {THREADS} threads: test accuracy {:.4}",
        mlp.display(),
        accuracy(&runner, &test)?
    );
    for i in 0..SWAPS {
        std::thread::sleep(Duration::from_millis(300));
        let target = if i % 2 == 0 { &cnn } else { &mlp };
        let before = accuracy(&runner, &test)?;
        let generation = runner.swap_from(target)?;
        let after = accuracy(&runner, &test)?;
        println!(
            "swap {}: generation {generation} serves {}: accuracy {before:.4} -> {after:.4} \
             ({} requests so far)",
            i + 1,
            target.display(),
            requests.load(Ordering::Relaxed)
        );
    }
    // A network that takes flat [784] inputs does not fit: refused.
    let flat = definition("fashion_mlp.json")?;
    let text = flat.to_json().replace("\"Flatten\"", "\"ReLU\"");
    let mut bad = NetworkDef::from_json(&text)?;
    bad.inputs[0].shape = vec![784];
    let bad_folder = args.out.join("incompatible");
    Network::build(bad, &*be, 0)?.save(&bad_folder, &*be)?;
    let generation = runner.generation();
    match runner.swap_from(&bad_folder) {
        Ok(_) => {
            return Err(Error::invalid(
                "hot_swap",
                "the incompatible network was accepted",
            ))
        }
        Err(e) => println!("offered {}: {e}", bad_folder.display()),
    }
    std::thread::sleep(Duration::from_millis(300));
    println!(
        "still generation {generation}: accuracy {:.4}",
        accuracy(&runner, &test)?
    );
    stop.store(true, Ordering::Relaxed);
    for s in servers {
        s.join()
            .map_err(|_| Error::invalid("hot_swap", "a serving thread panicked"))?;
    }
    let failures = failures.load(Ordering::Relaxed);
    println!(
        "requests served: {}, failures: {failures}, swaps: {}",
        requests.load(Ordering::Relaxed),
        runner.generation()
    );
    if failures > 0 {
        return Err(Error::invalid(
            "hot_swap",
            format!("{failures} requests failed"),
        ));
    }
    Ok(())
}
