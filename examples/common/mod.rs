//! The training loop the Fashion-MNIST examples share.
//!
//! Reads a network definition from `examples/nets/`, trains it on the 60 000
//! training images with Adam (lr 1e-3, batch 128, a new shuffle each epoch), and
//! after every epoch reports the training loss and the loss and accuracy on the
//! 10 000 *test* images (inputs scaled to [0, 1]). A progress bar shows each
//! epoch's steps, running loss and examples per second when stderr is a terminal.
//!
//! Options: `--epochs N`, `--seed N` (initialisation and shuffling),
//! `--data DIR` (else `$VERJUS_FASHION_MNIST`, else Debian's install directory),
//! `--device cpu|cuda|cuda:N` (default `cpu`).
//!
//! The device is chosen with a value, not a type: `verjus::backend(device)`
//! gives its backend (or, without a GPU, an error naming what is missing, which
//! is reported before any data is read). The network is built on that device,
//! and the trainer uploads each host minibatch there; the same code runs on
//! every device.

mod args;

use args::{device, value, AnyResult};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use verjus::nn::data::{load_fashion_mnist, Split};
use verjus::nn::def::NetworkDef;
use verjus::nn::solver::{Adam, Solver};
use verjus::nn::{Loss, Network, Trainer};
use verjus::{Device, Error, Tensor};

const BATCH: usize = 128;
const EVAL_BATCH: usize = 1000;
const LR: f32 = 1e-3;

/// Trains the network of `examples/nets/{net_file}` for `default_epochs` (unless
/// `--epochs` says otherwise) and reports; errors go to stderr. Each image is
/// reshaped to `unit` first when given (`[28, 28]`: a sequence of 28 rows, for
/// a network whose input has a time axis).
pub fn main(net_file: &str, default_epochs: usize, unit: Option<&[usize]>) -> ExitCode {
    match run(net_file, default_epochs, unit) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

struct Args {
    epochs: usize,
    seed: u64,
    data: Option<PathBuf>,
    device: Device,
}

fn parse_args(default_epochs: usize) -> AnyResult<Args> {
    let mut args = Args {
        epochs: default_epochs,
        seed: 0,
        data: None,
        device: Device::Cpu,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--epochs" => args.epochs = value(&flag, it.next())?,
            "--seed" => args.seed = value(&flag, it.next())?,
            "--data" => args.data = Some(value::<String>(&flag, it.next())?.into()),
            "--device" => args.device = device(&flag, it.next())?,
            "-h" | "--help" => {
                println!("options: --epochs N  --seed N  --data DIR  --device cpu|cuda|cuda:N");
                std::process::exit(0);
            }
            other => {
                return Err(Error::invalid(
                    "arguments",
                    format!("unknown option {other:?} (try --help)"),
                )
                .into())
            }
        }
    }
    Ok(args)
}

/// `x` (`[batch, ...]`) with each example reshaped to `unit` (no copy), or `x` itself.
fn as_unit(x: Tensor, unit: Option<&[usize]>) -> AnyResult<Tensor> {
    Ok(match unit {
        Some(unit) => {
            let dims: Vec<usize> = x.dims()[..1].iter().chain(unit).copied().collect();
            x.reshape(dims)?
        }
        None => x,
    })
}

fn run(net_file: &str, default_epochs: usize, unit: Option<&[usize]>) -> AnyResult<()> {
    let args = parse_args(default_epochs)?;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/nets")
        .join(net_file);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::file(&path, e.to_string()))?;
    let def = NetworkDef::from_json(&text)?;
    // The device first: a missing GPU is reported before the data loads.
    let be = verjus::backend(args.device)?;

    let train = load_fashion_mnist(Split::Train, args.data.as_deref())?;
    let test = load_fashion_mnist(Split::Test, args.data.as_deref())?;

    let net = Network::build(def, &*be, args.seed)?;
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    };
    let mut trainer = Trainer::new(net, Solver::new(Adam::new(LR)), loss, be);
    println!(
        "{net_file}: {} training and {} test images, Adam lr {LR}, batch {BATCH}, {} epoch{}, \
         device {}",
        train.len(),
        test.len(),
        args.epochs,
        if args.epochs == 1 { "" } else { "s" },
        args.device
    );

    let style = ProgressStyle::with_template(
        "{prefix} [{bar:30}] {pos}/{len} steps, {msg}, {elapsed_precise} (eta {eta})",
    )?
    .progress_chars("=> ");
    // The test images, reshaped once (a copy only when they are).
    let test_x = match unit {
        Some(_) => Some(as_unit(test.examples().try_clone_host()?, unit)?),
        None => None,
    };
    let test_x = test_x.as_ref().unwrap_or(test.examples());
    let mut accuracy = None;
    for epoch in 1..=args.epochs {
        let batches = train.batches(BATCH, Some(args.seed.wrapping_add(epoch as u64)))?;
        let bar = ProgressBar::with_draw_target(Some(batches.len() as u64), draw_target())
            .with_style(style.clone())
            .with_prefix(format!("epoch {epoch}/{}", args.epochs));
        let (start, mut shown) = (Instant::now(), Instant::now());
        let (mut loss_sum, mut seen) = (0.0f64, 0usize);
        for batch in batches {
            let batch = batch?;
            let n = batch.y.numel();
            let x = as_unit(batch.x, unit)?;
            let (loss, _) = trainer.train_minibatch(&x, &batch.y)?;
            loss_sum += f64::from(loss) * n as f64;
            seen += n;
            bar.inc(1);
            if shown.elapsed().as_millis() >= 200 {
                shown = Instant::now();
                bar.set_message(format!(
                    "loss {:.4}, {:.0} examples/s",
                    loss_sum / seen as f64,
                    seen as f64 / start.elapsed().as_secs_f64()
                ));
            }
        }
        bar.finish_and_clear();
        let secs = start.elapsed().as_secs_f64();
        let m = trainer.evaluate(test_x, test.labels(), EVAL_BATCH)?;
        let acc = m
            .accuracy
            .ok_or_else(|| Error::invalid("evaluate", "no accuracy for class labels"))?;
        println!(
            "epoch {epoch}/{}: train loss {:.4}, test loss {:.4}, test accuracy {:.4} \
             ({secs:.1} s, {:.0} examples/s)",
            args.epochs,
            loss_sum / seen.max(1) as f64,
            m.loss,
            acc,
            seen as f64 / secs
        );
        accuracy = Some(acc);
    }
    match accuracy {
        Some(acc) => println!("final test accuracy: {acc:.4}"),
        None => println!("no epochs run"),
    }
    Ok(())
}

/// The progress bar draws on stderr, and only when it is a terminal.
fn draw_target() -> ProgressDrawTarget {
    if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}
