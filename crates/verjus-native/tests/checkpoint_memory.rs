//! What a gradient checkpoint scope saves, measured with the host memory
//! counters and the tape's saved-tensor counters. One test in its own binary:
//! the counters are process-wide, so no other test may allocate while it
//! measures.

use verjus_core::autograd::{checkpoint_scope, reset_tape_saved_peak, tape_saved_stats, Var};
use verjus_core::ops::Distribution;
use verjus_core::{host_memory_stats, reset_host_peak, BackendRef, Result, Tensor};

#[path = "common/dropout_lstm.rs"]
mod dropout_lstm;
use dropout_lstm::dropout_lstm;

fn be() -> BackendRef {
    verjus_native::backend()
}

fn leaf(dims: &[usize], value: f32) -> Var {
    let n = dims.iter().product();
    Var::leaf(
        Tensor::from_vec(dims.to_vec(), vec![value; n]).unwrap(),
        be(),
    )
    .unwrap()
}

/// What one step holds, relative to before it; `f` builds the loss.
#[derive(Debug)]
struct Step {
    /// Host bytes held after the forward (graph alive, handles to derived
    /// weights dropped).
    kept: usize,
    /// The host peak over forward and backward.
    peak: usize,
    /// Bytes the tape keeps for backward after the forward.
    saved: usize,
    /// The tape's peak over forward and backward.
    saved_peak: usize,
}

fn measure(f: impl FnOnce() -> Result<Var>) -> Step {
    let before = host_memory_stats().current;
    let saved_before = tape_saved_stats().current;
    reset_host_peak();
    reset_tape_saved_peak();
    let loss = f().unwrap();
    let kept = host_memory_stats().current - before;
    let saved = tape_saved_stats().current - saved_before;
    loss.backward().unwrap();
    let peak = host_memory_stats().peak - before;
    let saved_peak = tape_saved_stats().peak - saved_before;
    drop(loss);
    // The graph is gone: the tape keeps nothing of the step.
    assert_eq!(tape_saved_stats().current, saved_before);
    Step {
        kept,
        peak,
        saved,
        saved_peak,
    }
}

fn noisy_linear(x: &Var, w: &Var, scoped: bool) -> Result<Var> {
    let w = {
        let _scope = scoped.then(checkpoint_scope);
        let noise = Var::random(
            &w.shape(),
            Distribution::Normal {
                mean: 0.0,
                std: 0.1,
            },
            1,
            0,
            w.backend(),
        )?;
        w.add(&noise)?
    };
    x.matmul(&w)?.sum_all()
}

#[test]
fn a_checkpoint_scope_keeps_no_derived_weight() {
    // (a) A Linear with weight noise: the noisy weight is what the matmul
    // would keep; in a scope nothing of the weight's size is kept.
    let (x, w) = (leaf(&[2, 256], 0.5), leaf(&[256, 256], 0.01));
    let weight = 256 * 256 * 4;
    let plain = measure(|| x.matmul(&w)?.sum_all());
    x.zero_grad();
    w.zero_grad();
    let unscoped = measure(|| noisy_linear(&x, &w, false));
    x.zero_grad();
    w.zero_grad();
    let scoped = measure(|| noisy_linear(&x, &w, true));
    assert!(
        unscoped.kept >= plain.kept + weight,
        "{unscoped:?} vs {plain:?}"
    );
    assert!(
        scoped.kept < plain.kept + weight / 8,
        "{scoped:?} vs {plain:?}"
    );
    // The tape: the plain matmul keeps `x` (the weight is a parameter), the
    // unscoped one the noisy weight too, the scoped one nothing more.
    assert!(
        unscoped.saved >= plain.saved + weight,
        "{unscoped:?} vs {plain:?}"
    );
    assert!(
        scoped.saved < plain.saved + weight / 8,
        "{scoped:?} vs {plain:?}"
    );
    // In backward the scope recomputes the noisy weight: held once, briefly.
    assert!(
        scoped.saved_peak <= plain.saved_peak + weight + weight / 8,
        "{scoped:?}"
    );

    // (b) Weight dropout on an LSTM's recurrent weight over 100 steps: without
    // the scope each step keeps its dropped-out weight; with it none does,
    // and the peak stays within a few weights of the plain LSTM's.
    let (hidden, steps) = (64, 100);
    let (x, w_ih, w_hh) = (
        leaf(&[1, 8], 0.1),
        leaf(&[4 * hidden, 8], 0.01),
        leaf(&[4 * hidden, hidden], 0.01),
    );
    let weight = 4 * hidden * hidden * 4;
    let plain = measure(|| dropout_lstm(&x, &w_ih, &w_hh, None, steps));
    let unscoped = measure(|| dropout_lstm(&x, &w_ih, &w_hh, Some(false), steps));
    let scoped = measure(|| dropout_lstm(&x, &w_ih, &w_hh, Some(true), steps));
    let all_masks = steps as usize * weight;
    assert!(
        unscoped.kept >= plain.kept + all_masks,
        "{unscoped:?} vs {plain:?}"
    );
    assert!(scoped.kept < plain.kept + weight, "{scoped:?} vs {plain:?}");
    assert!(
        scoped.peak < plain.peak + 4 * weight,
        "{scoped:?} vs {plain:?}"
    );
    assert!(
        unscoped.saved >= plain.saved + all_masks,
        "{unscoped:?} vs {plain:?}"
    );
    assert!(
        scoped.saved < plain.saved + weight,
        "{scoped:?} vs {plain:?}"
    );
    assert!(
        scoped.saved_peak < plain.saved_peak + 2 * weight,
        "{scoped:?}"
    );
}
