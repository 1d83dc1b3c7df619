//! `verjus-bench --serve --name NAME`: one workload, prepared once, sampled on
//! request, so that `benches/run.py` can take verjus' samples in turn with
//! PyTorch's and numpy's, a few milliseconds apart.
//!
//! This shared 2-core machine runs in spells: the MLP step took 6.5 ms for 40
//! steps in a row, then 4.8 ms. Timing each library's whole series in one go
//! lets a spell fall on one library only; interleaving single samples puts
//! every pair of samples in the same spell.
//!
//! The protocol, one JSON object per line on stdout: first the workload's
//! description with `calls_per_sample` (after the warm-up; on a GPU also
//! `device` and the `peak_bytes` of the warm-up after its first call), or with `error` /
//! `skipped` and nothing more; then, for every line read from stdin, a
//! warm-up and one sample `{"ms": per_call}` (or `{"error": ...}`, which ends
//! the session); end of input ends it too. The line is the warm-up's length in
//! milliseconds: untimed calls until that long has passed (at least one).
//! After a pause this VM's cores take some 30-50 ms to run at full speed again
//! (measured: the first 15 ms sample of MLP steps after a 0.2 s pause 8.5 ms
//! per step, the following ones 6.0-6.5).

use crate::timing;
use crate::workloads::{merge, Workload};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use verjus_core::{Backend, BackendRef, Result};
use verjus_cuda::CudaBackend;

/// Serves `workload` on `be` over stdin and stdout until stdin closes (see the
/// module docs); `cuda` is the same backend when it is a GPU, for its memory
/// statistics.
pub fn serve(
    workload: &Workload,
    be: BackendRef,
    cuda: Option<Arc<CudaBackend>>,
    warmup: usize,
) -> ExitCode {
    let session = Session {
        input: std::io::stdin().lock(),
        output: std::io::stdout().lock(),
    };
    match session.run(workload, be, cuda, warmup) {
        Ok(()) => ExitCode::SUCCESS,
        Err(()) => ExitCode::FAILURE,
    }
}

/// Where requests come from and replies go.
struct Session<R, W> {
    input: R,
    output: W,
}

impl<R: BufRead, W: Write> Session<R, W> {
    /// The protocol of the module docs; `Err` after an error line or when a
    /// pipe broke.
    fn run(
        mut self,
        workload: &Workload,
        be: BackendRef,
        cuda: Option<Arc<CudaBackend>>,
        warmup: usize,
    ) -> std::result::Result<(), ()> {
        let mut line = workload.line();
        if let Some(reason) = workload.unavailable() {
            merge(&mut line, json!({"skipped": reason}));
            return self.reply(&line);
        }
        let prepared = workload.prepare(be.clone()).and_then(|mut f| {
            timing::reset_peak_after_first_call(cuda.as_deref(), &mut f)?;
            Ok((timing::warm_up(&*be, &mut f, warmup)?, f))
        });
        let (calls, mut f) = match prepared {
            Ok(ready) => ready,
            Err(e) => {
                merge(&mut line, json!({"error": e.to_string()}));
                self.reply(&line)?;
                return Err(());
            }
        };
        merge(&mut line, json!({"calls_per_sample": calls}));
        if let Some(c) = cuda {
            let peak = c.memory_stats().peak_in_use;
            merge(
                &mut line,
                json!({"device": c.description(), "peak_bytes": peak}),
            );
        }
        self.reply(&line)?;
        let mut request = String::new();
        loop {
            request.clear();
            match self.input.read_line(&mut request) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(_) => return Err(()),
            }
            let answer = match request.trim().parse::<f64>() {
                Ok(ms) if ms.is_finite() && ms >= 0.0 => {
                    let warm = Duration::from_secs_f64(ms / 1e3);
                    rewarm(&*be, &mut f, warm)
                        .and_then(|()| timing::sample(&*be, &mut f, calls))
                        .map_or_else(
                            |e| json!({"error": e.to_string()}),
                            |ms| json!({ "ms": ms }),
                        )
                }
                _ => json!({"error": format!(
                    "expected a warm-up in milliseconds, got {:?}",
                    request.trim()
                )}),
            };
            self.reply(&answer)?;
            if answer.get("error").is_some() {
                return Err(());
            }
        }
    }

    /// Writes one line and flushes it (the reader waits for it).
    fn reply(&mut self, line: &Value) -> std::result::Result<(), ()> {
        writeln!(self.output, "{line}")
            .and_then(|()| self.output.flush())
            .map_err(drop)
    }
}

/// Untimed calls of `f` until `warm` has passed (at least one).
fn rewarm(be: &dyn Backend, f: &mut dyn FnMut() -> Result<()>, warm: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        f()?;
        be.synchronize()?;
        if start.elapsed() >= warm {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{Op, Workload};

    fn small_gemm() -> Workload {
        Workload {
            name: "tiny".into(),
            op: Op::Gemm {
                m: 8,
                n: 8,
                k: 8,
                trans_a: false,
                trans_b: false,
            },
        }
    }

    /// Runs a session over `requests` and returns its result and reply lines.
    fn session(requests: &str) -> (std::result::Result<(), ()>, Vec<Value>) {
        let mut output = Vec::new();
        let session = Session {
            input: requests.as_bytes(),
            output: &mut output,
        };
        let result = session.run(&small_gemm(), verjus_native::backend(), None, 1);
        let lines = String::from_utf8(output).unwrap();
        let replies = lines
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (result, replies)
    }

    #[test]
    fn describes_the_workload_then_answers_each_request_with_a_sample() {
        let (result, replies) = session("0\n2.5\n");
        assert_eq!(result, Ok(()));
        assert_eq!(replies.len(), 3, "{replies:?}");
        assert_eq!(replies[0]["name"], "tiny");
        assert_eq!(replies[0]["op"], "gemm");
        assert!(replies[0]["calls_per_sample"].as_u64().unwrap() >= 1);
        for reply in &replies[1..] {
            let ms = reply["ms"].as_f64().unwrap();
            assert!(ms > 0.0 && ms.is_finite(), "{reply}");
        }
    }

    #[test]
    fn a_request_that_is_not_a_duration_ends_the_session_with_an_error() {
        let (result, replies) = session("1\nsoon\n1\n");
        assert_eq!(result, Err(()));
        assert_eq!(replies.len(), 3, "no sample after the error: {replies:?}");
        assert!(replies[1]["ms"].is_number());
        let error = replies[2]["error"].as_str().unwrap();
        assert!(error.contains("\"soon\""), "{error}");
    }
}
