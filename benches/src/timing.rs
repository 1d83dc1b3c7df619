//! Timing: warm-up calls, then the median of several samples.
//!
//! Fast ops are repeated within a sample so that each sample lasts at least
//! [`MIN_SAMPLE`]; a sample's time is divided by its number of calls. Workloads
//! too long to repeat (a training epoch) are timed [`once`].

use std::time::{Duration, Instant};
use verjus_core::{Backend, Result};
use verjus_cuda::CudaBackend;

/// The shortest sample worth timing.
pub const MIN_SAMPLE: Duration = Duration::from_millis(10);

/// Times of one workload, in milliseconds per call.
#[derive(Clone, Debug)]
pub struct Timing {
    pub median_ms: f64,
    pub min_ms: f64,
    pub samples: usize,
    pub calls_per_sample: usize,
}

/// Runs `f` `warmup` times (at least once) and returns how many calls make
/// one sample of at least [`MIN_SAMPLE`].
/// On a GPU, one call of `f`, waited for, then the peak memory reset, so that
/// the peak reported later is a step's in steady state, as PyTorch's side
/// measures it (one step, reset, one step): without the first call's one-time
/// cuDNN algorithm searches and buffer growth. Nothing on the CPU.
pub fn reset_peak_after_first_call(
    cuda: Option<&CudaBackend>,
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    if let Some(c) = cuda {
        f()?;
        c.synchronize()?;
        c.reset_peak_memory();
    }
    Ok(())
}

pub fn warm_up(
    be: &dyn Backend,
    f: &mut dyn FnMut() -> Result<()>,
    warmup: usize,
) -> Result<usize> {
    let mut once = Duration::ZERO;
    for _ in 0..warmup.max(1) {
        let start = Instant::now();
        f()?;
        be.synchronize()?;
        once = start.elapsed();
    }
    let calls = (MIN_SAMPLE.as_secs_f64() / once.as_secs_f64().max(1e-9)).ceil() as usize;
    Ok(calls.clamp(1, 10_000))
}

/// One sample: `calls` calls of `f`, in milliseconds per call.
pub fn sample(be: &dyn Backend, f: &mut dyn FnMut() -> Result<()>, calls: usize) -> Result<f64> {
    let start = Instant::now();
    for _ in 0..calls {
        f()?;
    }
    be.synchronize()?;
    Ok(start.elapsed().as_secs_f64() * 1e3 / calls as f64)
}

/// Warms `f` up ([`warm_up`]), then takes `samples` samples. The first error
/// ends the measurement.
pub fn measure(
    be: &dyn Backend,
    f: &mut dyn FnMut() -> Result<()>,
    warmup: usize,
    samples: usize,
) -> Result<Timing> {
    let calls = warm_up(be, f, warmup)?;
    let mut times: Vec<f64> = Vec::with_capacity(samples);
    for _ in 0..samples.max(1) {
        times.push(sample(be, f, calls)?);
    }
    times.sort_by(f64::total_cmp);
    Ok(Timing {
        median_ms: median(&times),
        min_ms: times[0],
        samples: times.len(),
        calls_per_sample: calls,
    })
}

/// Times a single call of `f`, without warm-up.
pub fn once(be: &dyn Backend, f: &mut dyn FnMut() -> Result<()>) -> Result<Timing> {
    let start = Instant::now();
    f()?;
    be.synchronize()?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(Timing {
        median_ms: ms,
        min_ms: ms,
        samples: 1,
        calls_per_sample: 1,
    })
}

/// The median of sorted, non-empty values.
fn median(sorted: &[f64]) -> f64 {
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[1.0, 2.0, 9.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 4.0, 9.0]), 3.0);
    }
}
