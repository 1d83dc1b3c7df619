//! Fused softmax cross-entropy with integer labels and label smoothing.
//!
//! One pass per row computes the log-sum-exp and, when asked, the gradient
//! `(softmax - target) * grad_scale` in place of the exponentials, so the
//! logits are read twice and the gradient written once. The loss is formed as
//! `ln(sum) + (1 - s) (max - x_label) + s (max - mean(x))`, which is
//! `-sum_c target_c * log_softmax_c` rearranged so that no large terms cancel.
//! Each task's rows run under [`simd`] (so the row functions are
//! `#[inline(always)]`).

use crate::parallel::{for_rows, for_rows2};
use crate::reduce::{max_run, sum_run};
use crate::simd::simd;
use verjus_core::math::fast::exp;
use verjus_core::ops::CrossEntropyPlan;
use verjus_core::{DType, Error, Result, Tensor};

const OP: &str = "softmax_cross_entropy";

/// Relative cost of one logit (an `exp` and a few operations).
const COST: usize = 4;

/// Per-example losses and, when `dlogits` is given, the logits' gradient.
pub(crate) fn softmax_cross_entropy(
    plan: &CrossEntropyPlan,
    logits: &Tensor,
    labels: &Tensor,
    grad_scale: f32,
    losses: &mut Tensor,
    dlogits: Option<&mut Tensor>,
) -> Result<()> {
    let labels = Labels::new(labels)?;
    labels.check(plan.n, plan.classes)?;
    let x = logits.as_slice::<f32>()?;
    let losses = losses.as_mut_slice::<f32>()?;
    let classes = plan.classes;
    let target = Target {
        smoothing: plan.smoothing,
        scale: grad_scale,
    };
    let row_of = |i: usize| &x[i * classes..(i + 1) * classes];
    match dlogits {
        Some(d) => {
            let d = d.as_mut_slice::<f32>()?;
            for_rows2(losses, 1, d, classes, COST * classes, |first, lr, gr| {
                let rows = lr.iter_mut().zip(gr.chunks_exact_mut(classes)).enumerate();
                simd(
                    #[inline(always)]
                    || {
                        for (i, (l, g)) in rows {
                            *l = target.row_with_grad(row_of(first + i), labels.get(first + i), g);
                        }
                    },
                );
            });
        }
        None => for_rows(losses, 1, COST * classes, |first, lr| {
            simd(
                #[inline(always)]
                || {
                    for (i, l) in lr.iter_mut().enumerate() {
                        *l = target.row(row_of(first + i), labels.get(first + i));
                    }
                },
            );
        }),
    }
    Ok(())
}

/// Labels of either integer dtype.
#[derive(Clone, Copy)]
enum Labels<'a> {
    I64(&'a [i64]),
    I32(&'a [i32]),
}

impl<'a> Labels<'a> {
    fn new(t: &'a Tensor) -> Result<Self> {
        match t.dtype() {
            DType::I64 => Ok(Labels::I64(t.as_slice()?)),
            DType::I32 => Ok(Labels::I32(t.as_slice()?)),
            other => Err(Error::DTypeMismatch {
                op: OP.into(),
                what: "labels".into(),
                expected: DType::I64,
                actual: other,
            }),
        }
    }

    #[inline(always)]
    fn raw(&self, i: usize) -> i64 {
        match self {
            Labels::I64(l) => l[i],
            Labels::I32(l) => i64::from(l[i]),
        }
    }

    /// Fails on the first label outside `[0, classes)`, naming it and its row.
    fn check(&self, n: usize, classes: usize) -> Result<()> {
        for i in 0..n {
            let l = self.raw(i);
            if usize::try_from(l).map_or(true, |l| l >= classes) {
                return Err(Error::invalid(
                    OP,
                    format!("label {l} at row {i} is outside [0, {classes})"),
                ));
            }
        }
        Ok(())
    }

    /// Label `i` as an index (after [`Labels::check`]).
    #[inline(always)]
    fn get(&self, i: usize) -> usize {
        self.raw(i) as usize
    }
}

/// The smoothed target and the gradient scale.
#[derive(Clone, Copy)]
struct Target {
    smoothing: f32,
    scale: f32,
}

impl Target {
    /// The loss given the row's maximum `m`, `ln(sum(exp(x - m)))` and the label.
    #[inline(always)]
    fn loss(&self, x: &[f32], m: f32, log_sum: f32, label: usize) -> f32 {
        let s = self.smoothing;
        let mut loss = log_sum + (1.0 - s) * (m - x[label]);
        if s > 0.0 {
            loss += s * (m - sum_run(x) / x.len() as f32);
        }
        loss
    }

    /// The loss of one row.
    #[inline(always)]
    fn row(&self, x: &[f32], label: usize) -> f32 {
        let m = max_run(x);
        self.loss(x, m, sum_exp(x, m).ln(), label)
    }

    /// The loss of one row; `g` receives `(softmax(x) - target) * scale`.
    #[inline(always)]
    fn row_with_grad(&self, x: &[f32], label: usize, g: &mut [f32]) -> f32 {
        let m = max_run(x);
        for (o, &v) in g.iter_mut().zip(x) {
            *o = exp(v - m);
        }
        let sum = sum_run(g);
        let (p, floor) = (
            self.scale / sum,
            self.scale * self.smoothing / x.len() as f32,
        );
        for o in g.iter_mut() {
            *o = *o * p - floor;
        }
        g[label] -= (1.0 - self.smoothing) * self.scale;
        self.loss(x, m, sum.ln(), label)
    }
}

/// `sum(exp(x - m))` with independent lanes (vectorises).
#[inline(always)]
fn sum_exp(x: &[f32], m: f32) -> f32 {
    const LANES: usize = 16;
    let mut lanes = [0.0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l += exp(v - m);
        }
    }
    let tail: f32 = chunks.remainder().iter().map(|&v| exp(v - m)).sum();
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ce(logits: Vec<f32>, labels: Tensor, smoothing: f32) -> Result<(Vec<f32>, Vec<f32>)> {
        let n = labels.numel();
        let classes = logits.len() / n;
        let plan = CrossEntropyPlan {
            n,
            classes,
            smoothing,
        };
        let x = Tensor::from_vec([n, classes], logits)?;
        let mut losses = Tensor::from_vec([n], vec![-1.0f32; n])?;
        let mut d = Tensor::from_vec([n, classes], vec![0.0f32; n * classes])?;
        softmax_cross_entropy(&plan, &x, &labels, 0.5, &mut losses, Some(&mut d))?;
        let mut only = Tensor::from_vec([n], vec![0.0f32; n])?;
        softmax_cross_entropy(&plan, &x, &labels, 0.5, &mut only, None)?;
        assert_eq!(only.to_vec::<f32>()?, losses.to_vec::<f32>()?);
        Ok((losses.to_vec()?, d.to_vec()?))
    }

    fn close(got: &[f32], want: &[f32]) {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }

    const P: [f32; 3] = [0.090_030_57, 0.244_728_47, 0.665_240_94];

    #[test]
    fn loss_and_gradient_of_a_known_row() {
        let labels = Tensor::from_vec([2], vec![2i64, 0]).unwrap();
        let (l, d) = ce(vec![1.0, 2.0, 3.0, 1001.0, 1002.0, 1003.0], labels, 0.0).unwrap();
        close(&l, &[-P[2].ln(), -P[0].ln()]);
        // (softmax - one_hot) * 0.5
        close(
            &d,
            &[
                P[0] / 2.0,
                P[1] / 2.0,
                (P[2] - 1.0) / 2.0,
                (P[0] - 1.0) / 2.0,
                P[1] / 2.0,
                P[2] / 2.0,
            ],
        );
    }

    #[test]
    fn label_smoothing_spreads_the_target() {
        let labels = Tensor::from_vec([1], vec![1i32]).unwrap();
        let (l, d) = ce(vec![1.0, 2.0, 3.0], labels, 0.3).unwrap();
        let t = [0.1, 0.8, 0.1];
        let want: f32 = -(0..3).map(|c| t[c] * P[c].ln()).sum::<f32>();
        close(&l, &[want]);
        close(
            &d,
            &[(P[0] - 0.1) / 2.0, (P[1] - 0.8) / 2.0, (P[2] - 0.1) / 2.0],
        );
    }

    #[test]
    fn bad_label_is_named_and_nothing_is_written() {
        for bad in [3i64, -1] {
            let labels = Tensor::from_vec([2], vec![0, bad]).unwrap();
            let plan = CrossEntropyPlan {
                n: 2,
                classes: 3,
                smoothing: 0.0,
            };
            let x = Tensor::from_vec([2, 3], vec![0.0f32; 6]).unwrap();
            let mut losses = Tensor::from_vec([2], vec![-1.0f32; 2]).unwrap();
            let err = softmax_cross_entropy(&plan, &x, &labels, 1.0, &mut losses, None)
                .unwrap_err()
                .to_string();
            assert!(err.contains(&format!("label {bad} at row 1")), "{err}");
            assert_eq!(losses.to_vec::<f32>().unwrap(), [-1.0, -1.0]);
        }
    }
}
