//! The CTC loss on the CPU: the log-space forward-backward algorithm, one
//! batch entry per task (entries run in parallel when the work is worth it).
//!
//! Over the extended target `l'` (blank, label 1, blank, label 2, ...,
//! blank; `L = 2 S + 1` states), `alpha[t][s]` is the log-score of the
//! prefixes ending in state `s` at frame `t` (emission at `t` included) and
//! `beta[t][s]` that of the suffixes after frame `t` starting from state `s`
//! (emission at `t` excluded), so `alpha + beta - log Z` is the log posterior
//! of state `s` at `t` with no `-inf - -inf`. With `max_approx` the sums are
//! maxima and the gradient is the best alignment's, found by backtracking
//! through the kept `alpha`.

use crate::parallel::{for_rows, for_rows2};
use verjus_core::ops::{ctc_check, CtcInputs, CtcPlan};
use verjus_core::{Result, Tensor};

/// Relative cost of one (frame, state) cell of the recursions.
const COST: usize = 16;

/// Per-entry losses and, when `grad` is given, their log-probabilities' gradient.
pub(crate) fn ctc_loss(
    plan: &CtcPlan,
    inputs: &CtcInputs<'_>,
    losses: &mut Tensor,
    grad: Option<&mut Tensor>,
) -> Result<()> {
    let targets = inputs.targets.as_slice::<i32>()?;
    let in_lens = inputs.input_lengths.as_slice::<i32>()?;
    let tgt_lens = inputs.target_lengths.as_slice::<i32>()?;
    ctc_check(plan, targets, in_lens, tgt_lens)?;
    let lp = inputs.log_probs.as_slice::<f32>()?;
    let losses = losses.as_mut_slice::<f32>()?;
    let (tc, s) = (plan.time * plan.classes, plan.max_target);
    let entry = |b: usize| Entry {
        plan,
        lp: &lp[b * tc..(b + 1) * tc],
        target: &targets[b * s..b * s + tgt_lens[b] as usize],
        frames: in_lens[b] as usize,
    };
    let cost = COST * plan.time * (2 * s + 1);
    match grad {
        Some(g) => {
            let g = g.as_mut_slice::<f32>()?;
            for_rows2(losses, 1, g, tc, cost, |first, lr, gr| {
                for (i, (l, g)) in lr.iter_mut().zip(gr.chunks_exact_mut(tc)).enumerate() {
                    *l = entry(first + i).run(Some(g));
                }
            });
        }
        None => for_rows(losses, 1, cost, |first, lr| {
            for (i, l) in lr.iter_mut().enumerate() {
                *l = entry(first + i).run(None);
            }
        }),
    }
    Ok(())
}

/// One batch entry: its `[T, C]` log-probabilities, target and frames.
struct Entry<'a> {
    plan: &'a CtcPlan,
    lp: &'a [f32],
    target: &'a [i32],
    frames: usize,
}

impl Entry<'_> {
    /// The class of extended state `s`.
    fn class(&self, s: usize) -> usize {
        if s.is_multiple_of(2) {
            self.plan.blank
        } else {
            self.target[s / 2] as usize
        }
    }

    /// Whether state `s` may be entered from `s - 2` (a label differing
    /// from the previous label).
    fn skips(&self, s: usize) -> bool {
        s % 2 == 1 && s >= 3 && self.target[s / 2] != self.target[s / 2 - 1]
    }

    fn emit(&self, t: usize, s: usize) -> f32 {
        self.lp[t * self.plan.classes + self.class(s)]
    }

    /// `log(exp a + exp b)`, or `max(a, b)` for the Viterbi approximation.
    fn combine(&self, a: f32, b: f32) -> f32 {
        let m = a.max(b);
        if self.plan.max_approx || m == f32::NEG_INFINITY {
            return m;
        }
        m + ((a - m).exp() + (b - m).exp()).ln()
    }

    /// The loss, and the gradient into `grad` (`[T, C]`, overwritten).
    fn run(&self, grad: Option<&mut [f32]>) -> f32 {
        let states = 2 * self.target.len() + 1;
        let mut grad = grad;
        if let Some(g) = grad.as_deref_mut() {
            g.fill(0.0);
        }
        if self.frames == 0 {
            return if self.target.is_empty() {
                0.0
            } else {
                f32::INFINITY
            };
        }
        let alpha = self.alpha(states);
        let last = &alpha[(self.frames - 1) * states..self.frames * states];
        let total = match states {
            1 => last[0],
            _ => self.combine(last[states - 1], last[states - 2]),
        };
        if total == f32::NEG_INFINITY {
            return f32::INFINITY;
        }
        if let Some(g) = grad {
            if self.plan.max_approx {
                self.backtrack(&alpha, states, g);
            } else {
                self.posteriors(&alpha, states, total, g);
            }
        }
        -total
    }

    /// `alpha` over the entry's frames, `[frames, states]`.
    fn alpha(&self, states: usize) -> Vec<f32> {
        let mut alpha = vec![f32::NEG_INFINITY; self.frames * states];
        alpha[0] = self.emit(0, 0);
        if states > 1 {
            alpha[1] = self.emit(0, 1);
        }
        for t in 1..self.frames {
            let (prev, cur) = alpha[(t - 1) * states..(t + 1) * states].split_at_mut(states);
            for s in 0..states {
                let mut a = prev[s];
                if s >= 1 {
                    a = self.combine(a, prev[s - 1]);
                }
                if self.skips(s) {
                    a = self.combine(a, prev[s - 2]);
                }
                cur[s] = a + self.emit(t, s);
            }
        }
        alpha
    }

    /// `grad[t][c] = -sum over states s of class c of exp(alpha + beta - total)`,
    /// with `beta` kept one frame at a time.
    fn posteriors(&self, alpha: &[f32], states: usize, total: f32, grad: &mut [f32]) {
        let c = self.plan.classes;
        let mut beta = vec![f32::NEG_INFINITY; states];
        let mut next = vec![f32::NEG_INFINITY; states];
        beta[states - 1] = 0.0;
        if states > 1 {
            beta[states - 2] = 0.0;
        }
        for t in (0..self.frames).rev() {
            if t + 1 < self.frames {
                for (s, slot) in beta.iter_mut().enumerate() {
                    let from = |s2: usize| next[s2] + self.emit(t + 1, s2);
                    let mut b = from(s);
                    if s + 1 < states {
                        b = self.combine(b, from(s + 1));
                    }
                    if s + 2 < states && self.skips(s + 2) {
                        b = self.combine(b, from(s + 2));
                    }
                    *slot = b;
                }
            }
            for s in 0..states {
                let post = (alpha[t * states + s] + beta[s] - total).exp();
                grad[t * c + self.class(s)] -= post;
            }
            std::mem::swap(&mut beta, &mut next);
        }
    }

    /// The best alignment's `-1` per frame, from the final state back
    /// through the best predecessor in `alpha` (the first of equals in the
    /// order stay, advance, skip).
    fn backtrack(&self, alpha: &[f32], states: usize, grad: &mut [f32]) {
        let c = self.plan.classes;
        let at = |t: usize, s: usize| alpha[t * states + s];
        let t_last = self.frames - 1;
        let mut s = states - 1;
        if states > 1 && at(t_last, states - 2) > at(t_last, s) {
            s = states - 2;
        }
        for t in (0..self.frames).rev() {
            grad[t * c + self.class(s)] = -1.0;
            if t == 0 {
                break;
            }
            let mut best = s;
            if s >= 1 && at(t - 1, s - 1) > at(t - 1, best) {
                best = s - 1;
            }
            if self.skips(s) && at(t - 1, s - 2) > at(t - 1, best) {
                best = s - 2;
            }
            s = best;
        }
    }
}
