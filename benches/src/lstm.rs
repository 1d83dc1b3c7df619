//! The LSTM workloads: training passes of the fused `lstm_sequence` (forward,
//! then the backward of every input gradient) and one `lstm_cell` step, called
//! directly on the backend with every buffer allocated up front, so that a
//! timed call is the ops alone. `run.py` times `torch.nn.LSTM` /
//! `torch.nn.LSTMCell` at the same sizes (numpy has no LSTM).

use crate::workloads::{filled, Runner};
use serde_json::{json, Value};
use verjus_core::ops::{self, LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs};
use verjus_core::{BackendRef, DType, Result, Shape, Tensor};

/// What one call of an LSTM workload runs.
#[derive(Clone, Debug)]
pub enum LstmRun {
    /// `lstm_sequence` over `steps` frames, every sequence of full length, then
    /// `lstm_sequence_backward` from random output gradients `dy` to `dx`,
    /// `dW_ih`, `dW_hh`, `db_ih`, `db_hh`.
    Train { steps: usize },
    /// The same over sequences of the given `lengths` (the frames `T` are the
    /// longest). PyTorch's side packs them with `pack_padded_sequence` when
    /// `torch_packs` (what its users must do for variable lengths), or else
    /// runs the padded batch whole, ignoring the lengths.
    TrainLengths {
        lengths: Vec<i32>,
        torch_packs: bool,
    },
    /// One `lstm_cell` forward step from a given state (sampling step by step).
    CellStep,
}

/// An LSTM workload: batch `B`, input features `F`, hidden size `H`, with
/// biases and no initial state for the sequences.
#[derive(Clone, Debug)]
pub struct Lstm {
    pub batch: usize,
    pub input: usize,
    pub hidden: usize,
    pub run: LstmRun,
}

/// `n` lengths drawn uniformly from `lo..=hi` by the generator of
/// [`filled`]'s values, from `seed`.
pub fn lengths(n: usize, lo: i32, hi: i32, seed: u64) -> Vec<i32> {
    let span = (hi - lo + 1) as u64;
    crate::workloads::xorshift(seed)
        .take(n)
        .map(|bits| lo + (bits % span) as i32)
        .collect()
}

impl Lstm {
    /// The frames `T` of one call (1 for a cell step).
    pub fn steps(&self) -> usize {
        match &self.run {
            LstmRun::Train { steps } => *steps,
            LstmRun::TrainLengths { lengths, .. } => {
                lengths.iter().copied().max().unwrap_or(0) as usize
            }
            LstmRun::CellStep => 1,
        }
    }

    /// Floating-point operations of one call: the GEMMs only (gate
    /// nonlinearities, biases and the cell update are left out). The forward
    /// multiplies each frame by `W_ih` and `W_hh`, `2 * 4H * (F + H)` per
    /// frame; the backward does twice that (`dx`/`dh` and `dW_ih`/`dW_hh`), so
    /// a training call counts three forwards. Only the frames that run are
    /// counted (the sum of the lengths, not `T * B`): padding is not work, so
    /// an implementation that skips it is not charged for it.
    pub fn flops(&self) -> f64 {
        let (b, f, h) = (self.batch, self.input, self.hidden);
        let per_frame = 2.0 * (4 * h * (f + h)) as f64;
        let frames = match &self.run {
            LstmRun::Train { steps } => steps * b,
            LstmRun::TrainLengths { lengths, .. } => lengths.iter().map(|&l| l as usize).sum(),
            LstmRun::CellStep => return per_frame * b as f64,
        };
        3.0 * per_frame * frames as f64
    }

    /// The op and sizes for `run.py`: `lstm_train` (with `lengths` and
    /// `torch_lengths`, `packed` or `padded`, when the sequences have lengths)
    /// or `lstm_cell`.
    pub fn describe(&self) -> Value {
        let (b, f, h) = (self.batch, self.input, self.hidden);
        match &self.run {
            LstmRun::Train { steps } => json!({"op": "lstm_train", "steps": steps, "batch": b,
                                               "input": f, "hidden": h}),
            LstmRun::TrainLengths {
                lengths,
                torch_packs,
            } => json!({"op": "lstm_train", "steps": self.steps(), "batch": b, "input": f,
                        "hidden": h, "lengths": lengths,
                        "torch_lengths": if *torch_packs { "packed" } else { "padded" }}),
            LstmRun::CellStep => json!({"op": "lstm_cell", "batch": b, "input": f, "hidden": h}),
        }
    }

    /// Allocates the operands on `be` and returns one call as a runner.
    pub fn prepare(&self, be: BackendRef) -> Result<Runner> {
        let dev = &*be;
        let (b, f, h) = (self.batch, self.input, self.hidden);
        let weights = Weights {
            w_ih: filled(dev, [4 * h, f], 21)?,
            w_hh: filled(dev, [4 * h, h], 22)?,
            b_ih: filled(dev, [4 * h], 23)?,
            b_hh: filled(dev, [4 * h], 24)?,
        };
        let zeros = |dims: &[usize]| ops::zeros(dev, &Shape::new(dims)?, DType::F32);
        let state = [b, h];
        let mut c_n = zeros(&state)?;
        if let LstmRun::CellStep = self.run {
            let x = filled(dev, [b, f], 25)?;
            let h0 = filled(dev, state, 26)?;
            let c0 = filled(dev, state, 27)?;
            let mut y = zeros(&state)?;
            let state = Some((&h0, &c0));
            let mut reserve = zeros(&[reserve_len(&be, &weights.args(&x, None, state), true)?])?;
            return Ok(Box::new(move || {
                let args = weights.args(&x, None, Some((&h0, &c0)));
                let out = LstmOutputs {
                    y: &mut y,
                    h_n: None,
                    c_n: &mut c_n,
                    reserve: &mut reserve,
                };
                ops::lstm_cell(&*be, &args, out)
            }));
        }
        let t = self.steps();
        let x = filled(dev, [t, b, f], 28)?;
        let lengths = match &self.run {
            LstmRun::TrainLengths { lengths, .. } => Some(ops::upload(
                dev,
                &Tensor::from_vec([lengths.len()], lengths.clone())?,
            )?),
            _ => None,
        };
        let dy = filled(dev, [t, b, h], 29)?;
        let mut y = zeros(&[t, b, h])?;
        let mut h_n = zeros(&state)?;
        let args = weights.args(&x, lengths.as_ref(), None);
        let mut reserve = zeros(&[reserve_len(&be, &args, false)?])?;
        let mut dx = zeros(&[t, b, f])?;
        let mut dw_ih = zeros(&[4 * h, f])?;
        let mut dw_hh = zeros(&[4 * h, h])?;
        let mut db_ih = zeros(&[4 * h])?;
        let mut db_hh = zeros(&[4 * h])?;
        Ok(Box::new(move || {
            let be = &*be;
            let args = weights.args(&x, lengths.as_ref(), None);
            let out = LstmOutputs {
                y: &mut y,
                h_n: Some(&mut h_n),
                c_n: &mut c_n,
                reserve: &mut reserve,
            };
            ops::lstm_sequence(be, &args, out)?;
            let dout = LstmOutputGrads {
                dy: Some(&dy),
                dh_n: None,
                dc_n: None,
            };
            let grads = LstmGrads {
                dx: Some(&mut dx),
                dh0: None,
                dc0: None,
                dw_ih: Some(&mut dw_ih),
                dw_hh: Some(&mut dw_hh),
                db_ih: Some(&mut db_ih),
                db_hh: Some(&mut db_hh),
            };
            ops::lstm_sequence_backward(be, &args, &y, &reserve, &dout, grads)
        }))
    }
}

/// The weights and biases, held by a runner.
struct Weights {
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor,
    b_hh: Tensor,
}

impl Weights {
    /// The operands of a call on `x` from the state `(h0, c0)` (zeros if none).
    fn args<'a>(
        &'a self,
        x: &'a Tensor,
        lengths: Option<&'a Tensor>,
        state: Option<(&'a Tensor, &'a Tensor)>,
    ) -> LstmArgs<'a> {
        LstmArgs {
            x,
            lengths,
            h0: state.map(|s| s.0),
            c0: state.map(|s| s.1),
            w_ih: &self.w_ih,
            w_hh: &self.w_hh,
            b_ih: Some(&self.b_ih),
            b_hh: Some(&self.b_hh),
        }
    }
}

/// The reserve's length for a call on `args` (a cell step if `step`).
fn reserve_len(be: &BackendRef, args: &LstmArgs<'_>, step: bool) -> Result<usize> {
    let op = if step { "lstm_cell" } else { "lstm_sequence" };
    let plan = ops::lstm_plan(op, &**be, args, step)?;
    ops::lstm_reserve_len(&**be, &plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(run: LstmRun) -> Lstm {
        Lstm {
            batch: 3,
            input: 5,
            hidden: 4,
            run,
        }
    }

    #[test]
    fn lengths_are_drawn_in_range_and_repeat_with_the_seed() {
        let drawn = lengths(1000, 64, 256, 7);
        assert!(drawn.iter().all(|l| (64..=256).contains(l)), "{drawn:?}");
        assert_eq!(drawn.iter().min(), Some(&64));
        assert_eq!(drawn.iter().max(), Some(&256));
        assert_eq!(drawn, lengths(1000, 64, 256, 7));
        assert_ne!(drawn, lengths(1000, 64, 256, 8));
    }

    #[test]
    fn variable_lengths_run_the_longest_and_count_the_frames_that_run() {
        let lstm = small(LstmRun::TrainLengths {
            lengths: vec![2, 7, 0],
            torch_packs: true,
        });
        assert_eq!(lstm.steps(), 7);
        let d = lstm.describe();
        assert_eq!(d["steps"], 7);
        assert_eq!(d["lengths"], json!([2, 7, 0]));
        assert_eq!(d["torch_lengths"], "packed");
        // 9 frames run: the same work as 3 full sequences of 3 frames.
        let full = small(LstmRun::Train { steps: 3 });
        assert_eq!(lstm.flops(), full.flops());
        // Forward 2 * 4H * (F + H) per frame, backward twice that.
        assert_eq!(full.flops(), 3.0 * 2.0 * 16.0 * 9.0 * 9.0);
        assert_eq!(small(LstmRun::CellStep).flops(), 2.0 * 16.0 * 9.0 * 3.0);
    }

    #[test]
    fn every_kind_of_call_runs_twice_on_the_native_backend() {
        let runs = [
            LstmRun::Train { steps: 4 },
            LstmRun::TrainLengths {
                lengths: vec![4, 0, 2],
                torch_packs: false,
            },
            LstmRun::CellStep,
        ];
        for run in runs {
            let what = format!("{run:?}");
            let mut call = small(run)
                .prepare(verjus_native::backend())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            call()
                .and_then(|()| call())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        }
    }
}
