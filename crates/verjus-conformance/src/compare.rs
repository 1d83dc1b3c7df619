//! Comparing a backend's results with the reference, and collecting failures.
//!
//! Floating-point results match when `|actual - expected| <= abs + rel * |expected|`.
//! The tolerances are per op family (see the constants): data movement must be
//! exact; elementwise math may differ by a few ulps (a GPU's `expf` is not the
//! host's); reductions, GEMM and convolution may sum in any order, which costs
//! accuracy proportional to the reduction length. Messages name the op and case,
//! the flat and multi-index of the first mismatch, and both values.

use crate::array::unravel;
use std::fmt;

/// A relative-plus-absolute tolerance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub rel: f32,
    pub abs: f32,
}

impl Tolerance {
    /// Copies, permutations, gathers, fills and casts: bit-for-bit equal values.
    pub const EXACT: Tolerance = Tolerance { rel: 0.0, abs: 0.0 };
    /// Elementwise math (a few ulps of a transcendental function, or a fused multiply-add).
    pub const ELEMENTWISE: Tolerance = Tolerance {
        rel: 1e-5,
        abs: 1e-6,
    };
    /// Reductions over up to a few thousand elements, softmax, pooling and losses.
    pub const REDUCTION: Tolerance = Tolerance {
        rel: 1e-5,
        abs: 1e-5,
    };
    /// GEMM and convolution with inner lengths up to a few hundred, summed in any order.
    pub const GEMM: Tolerance = Tolerance {
        rel: 1e-4,
        abs: 1e-4,
    };

    fn accepts(self, expected: f32, actual: f32) -> bool {
        if expected == actual {
            return true; // also equal infinities
        }
        (actual - expected).abs() <= self.abs + self.rel * expected.abs()
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rel {:e} + abs {:e}", self.rel, self.abs)
    }
}

/// `Ok` when every element is within `tol`; otherwise a message naming `what`
/// (op and case), the number of mismatches and the first one.
pub fn close(
    what: &str,
    dims: &[usize],
    expected: &[f32],
    actual: &[f32],
    tol: Tolerance,
) -> Result<(), String> {
    if expected.len() != actual.len() {
        return Err(format!(
            "{what}: expected {} elements for dims {dims:?}, got {}",
            expected.len(),
            actual.len()
        ));
    }
    let bad: Vec<usize> = (0..expected.len())
        .filter(|&i| !tol.accepts(expected[i], actual[i]))
        .collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{what}: {} of {} elements differ beyond {tol}; first at flat index {i} {:?} of dims {dims:?}: expected {:e}, got {:e}",
            bad.len(),
            expected.len(),
            unravel(i, dims),
            expected[i],
            actual[i]
        )),
    }
}

/// `Ok` when the integer (or otherwise exactly comparable) results are equal.
pub fn equal<T: PartialEq + fmt::Debug>(
    what: &str,
    dims: &[usize],
    expected: &[T],
    actual: &[T],
) -> Result<(), String> {
    if expected.len() != actual.len() {
        return Err(format!(
            "{what}: expected {} elements for dims {dims:?}, got {}",
            expected.len(),
            actual.len()
        ));
    }
    let bad: Vec<usize> = (0..expected.len())
        .filter(|&i| expected[i] != actual[i])
        .collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{what}: {} of {} elements differ; first at flat index {i} {:?} of dims {dims:?}: expected {:?}, got {:?}",
            bad.len(),
            expected.len(),
            unravel(i, dims),
            expected[i],
            actual[i]
        )),
    }
}

/// Collects the failures of many cases so one run reports all of them.
#[derive(Debug, Default)]
pub struct Failures(Vec<String>);

/// How many failure messages a report shows before summarising the rest.
const SHOWN: usize = 25;

impl Failures {
    /// No failures yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the outcome of one case.
    pub fn record(&mut self, outcome: Result<(), String>) {
        if let Err(msg) = outcome {
            self.0.push(msg);
        }
    }

    /// `Ok` when no case failed, otherwise every message (up to a limit) on its own line.
    pub fn finish(self) -> Result<(), String> {
        if self.0.is_empty() {
            return Ok(());
        }
        let mut report = format!("{} case(s) failed:", self.0.len());
        for msg in self.0.iter().take(SHOWN) {
            report.push_str("\n  - ");
            report.push_str(msg);
        }
        if self.0.len() > SHOWN {
            report.push_str(&format!("\n  ... and {} more", self.0.len() - SHOWN));
        }
        Err(report)
    }
}

/// Runs `check` on every case and reports all failures together.
pub fn every_case<C>(
    cases: impl IntoIterator<Item = C>,
    mut check: impl FnMut(C) -> Result<(), String>,
) -> Result<(), String> {
    let mut failures = Failures::new();
    for case in cases {
        failures.record(check(case));
    }
    failures.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reports_the_first_mismatch() {
        let tol = Tolerance::ELEMENTWISE;
        assert!(close("op", &[2], &[1.0, 2.0], &[1.0, 2.0 + 1e-6], tol).is_ok());
        let err = close(
            "gemm [2, 2]",
            &[2, 2],
            &[1.0; 4],
            &[1.0, 1.0, 1.5, 1.0],
            tol,
        )
        .unwrap_err();
        assert!(
            err.contains("gemm [2, 2]") && err.contains("[1, 0]") && err.contains("1.5e0"),
            "{err}"
        );
        assert!(close("op", &[1], &[f32::NAN], &[f32::NAN], tol).is_err());
        assert!(close("op", &[1], &[1.0], &[], tol).is_err());
    }

    #[test]
    fn failures_collect_every_case() {
        assert!(every_case([1, 2], |_| Ok(())).is_ok());
        let err = every_case([1, 2, 3], |c| {
            if c == 2 {
                Ok(())
            } else {
                Err(format!("case {c}"))
            }
        });
        assert!(err.unwrap_err().starts_with("2 case(s)"));
        let mut f = Failures::new();
        f.record(Ok(()));
        assert!(Failures::new().finish().is_ok());
        f.record(Err("first".into()));
        f.record(Err("second".into()));
        let report = f.finish().unwrap_err();
        assert!(
            report.starts_with("2 case(s)") && report.contains("second"),
            "{report}"
        );
    }
}
