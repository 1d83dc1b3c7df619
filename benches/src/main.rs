//! `verjus-bench`: times verjus ops on the native CPU backend and prints one JSON
//! object per line, for `benches/run.py` to compare with numpy and PyTorch.
//!
//! ```text
//! verjus-bench [--samples N] [--warmup N] [--filter SUBSTRING] [--name NAME] [--epochs]
//!              [--list] [--device cpu|cuda] [--serve]
//! ```
//!
//! `--device cuda` runs the GPU set instead (f32 GEMM at 4096 and 8192, also
//! with TF32; the MLP and CNN training steps at batch 128 and 1024; the LSTM
//! workloads) on CUDA device 0, and adds each workload's `peak_bytes`: the caching allocator's
//! high-water mark after its first call.
//!
//! Each line holds the workload's `name`, its parameters (`op` and sizes, see
//! [`workloads::Workload::describe`]) and `flops` (null for whole networks), then
//! the timing (`median_ms`, `min_ms`, `samples`, `calls_per_sample`), an `error`
//! message (e.g. for an op the backend does not support) or, for a workload this
//! machine lacks the data for, why it was `skipped`. `--name` runs the one
//! workload of that exact name (`benches/run.py` runs each workload on its own,
//! alternating with the other libraries); with `--serve` it prepares that one
//! workload and takes a sample per line read from stdin (see [`serve`]), which
//! is how `run.py` interleaves verjus' samples with the other libraries'.
//! `--epochs` adds the Fashion-MNIST epochs, each timed once. Threads come from
//! rayon's global pool: set `RAYON_NUM_THREADS` to fix their number.

mod lstm;
mod nets;
mod seqnets;
mod serve;
mod timing;
mod workloads;

use serde_json::{json, Value};
use std::process::ExitCode;
use std::sync::Arc;
use verjus_core::BackendRef;
use verjus_cuda::CudaBackend;
use workloads::merge;

/// Command-line options.
struct Options {
    samples: usize,
    warmup: usize,
    filter: Option<String>,
    name: Option<String>,
    epochs: bool,
    list: bool,
    cuda: bool,
    serve: bool,
}

const USAGE: &str = "usage: verjus-bench [--samples N] [--warmup N] [--filter SUBSTRING] \
                     [--name NAME] [--epochs] [--list] [--device cpu|cuda] [--serve]";

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut opts = Options {
        samples: 10,
        warmup: 2,
        filter: None,
        name: None,
        epochs: false,
        list: false,
        cuda: false,
        serve: false,
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--samples" => opts.samples = parse_count("--samples", &value("--samples")?)?,
            "--warmup" => opts.warmup = parse_count("--warmup", &value("--warmup")?)?,
            "--filter" => opts.filter = Some(value("--filter")?),
            "--name" => opts.name = Some(value("--name")?),
            "--epochs" => opts.epochs = true,
            "--list" => opts.list = true,
            "--serve" => opts.serve = true,
            "--device" => {
                opts.cuda = match value("--device")?.as_str() {
                    "cpu" => false,
                    "cuda" | "cuda:0" => true,
                    other => return Err(format!("--device must be cpu or cuda, not {other:?}")),
                }
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if opts.serve && opts.name.is_none() {
        return Err("--serve needs --name".into());
    }
    Ok(opts)
}

fn parse_count(name: &str, text: &str) -> Result<usize, String> {
    match text.parse() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{name} needs a positive integer, got {text:?}")),
    }
}

/// The backend `workload` runs on: the native one, or CUDA device 0 set up for
/// it (TF32 as the workload asks) and returned a second time for its memory
/// statistics (peak reset after the first call, see [`timing::reset_peak_after_first_call`]).
fn backend(
    workload: &workloads::Workload,
    cuda: bool,
) -> verjus_core::Result<(BackendRef, Option<Arc<CudaBackend>>)> {
    if !cuda {
        return Ok((verjus_native::backend(), None));
    }
    let c = verjus_cuda::cuda_backend(0)?;
    c.set_tf32(workload.tf32());
    Ok((c.clone(), Some(c)))
}

/// The JSON line of one workload: its description, then the timing, the error or
/// why it was skipped.
fn run(workload: &workloads::Workload, opts: &Options) -> Value {
    let mut line = workload.line();
    if opts.list {
        return line;
    }
    if let Some(reason) = workload.unavailable() {
        merge(&mut line, json!({"skipped": reason}));
        return line;
    }
    let (be, cuda) = match backend(workload, opts.cuda) {
        Ok(pair) => pair,
        Err(e) => {
            merge(&mut line, json!({"error": e.to_string()}));
            return line;
        }
    };
    let result = workload.prepare(be.clone()).and_then(|mut f| {
        timing::reset_peak_after_first_call(cuda.as_deref(), &mut f)?;
        if workload.once() {
            timing::once(&*be, &mut f)
        } else {
            timing::measure(&*be, &mut f, opts.warmup, opts.samples)
        }
    });
    merge(
        &mut line,
        match result {
            Ok(t) => json!({"median_ms": t.median_ms, "min_ms": t.min_ms,
                            "samples": t.samples, "calls_per_sample": t.calls_per_sample}),
            Err(e) => json!({"error": e.to_string()}),
        },
    );
    if let Some(c) = cuda {
        merge(
            &mut line,
            json!({"device": c.description(), "peak_bytes": c.memory_stats().peak_in_use}),
        );
        c.set_tf32(false);
    }
    line
}

fn main() -> ExitCode {
    let opts = match parse_args(std::env::args().skip(1)) {
        Ok(opts) => opts,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("verjus-bench: {msg}");
            }
            eprintln!("{USAGE}");
            return if msg.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    let set = if opts.cuda {
        workloads::gpu()
    } else {
        workloads::all(opts.epochs)
    };
    let selected: Vec<_> = set
        .into_iter()
        .filter(|w| opts.filter.as_ref().is_none_or(|f| w.name.contains(f)))
        .filter(|w| opts.name.as_ref().is_none_or(|n| w.name == *n))
        .collect();
    if let (Some(name), true) = (&opts.name, selected.is_empty()) {
        eprintln!("verjus-bench: no workload is named {name:?} (see --list)");
        return ExitCode::FAILURE;
    }
    if opts.serve {
        let [workload] = selected.as_slice() else {
            eprintln!("verjus-bench: --serve takes exactly one workload");
            return ExitCode::FAILURE;
        };
        return match backend(workload, opts.cuda) {
            Ok((be, cuda)) => serve::serve(workload, be, cuda, opts.warmup),
            Err(e) => {
                let mut line = workload.line();
                merge(&mut line, json!({"error": e.to_string()}));
                println!("{line}");
                ExitCode::FAILURE
            }
        };
    }
    for workload in selected {
        println!("{}", run(&workload, &opts));
    }
    ExitCode::SUCCESS
}
