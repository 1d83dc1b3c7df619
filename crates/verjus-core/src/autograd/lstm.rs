//! The LSTM over a sequence and one LSTM step: ops with several outputs.
//!
//! `lstm_sequence` gives `(y, h_n, c_n)` and `lstm_cell` gives `(h, c)` from
//! one fused op whose backward needs the gradients of all its outputs at once
//! (a sequence's `h_n` and `c_n` feed the same recurrence as `y`). So the op
//! records one node with several outputs (see `node.rs`): each output `Var` is
//! an index into that node, the engine sums each output's gradients in its own
//! slot, and the backward runs once with all of them, `None` for an output no
//! gradient reached, which the op's backward reads as zero without touching
//! memory. Splitting one packed output into three would instead copy `y`
//! forward and add zero-padded gradients backward.
//!
//! The backward keeps `y` (a step's new `h`) and the forward's reserve, and
//! reads the operands' values from the node when it runs (so a weight made in
//! a gradient checkpoint scope is recomputed, not the sequence); it is
//! [`crate::ops::lstm_sequence_backward`] (or [`crate::ops::lstm_cell_backward`]) into fresh
//! tensors.

use super::alloc;
use super::checkpoint::ForwardFn;
use super::node::{need, MultiBackwardFn};
use super::record::{Reads, Saves};
use super::resolve::Inputs;
use super::saved::Saved;
use super::var::Var;
use crate::ops::{self, LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs};
use crate::{Backend, Error, Result, Shape, Tensor};
use std::sync::Arc;

/// The operands of an LSTM on the tape, as in [`ops::LstmArgs`]: `x`
/// (`[T, B, F]` for a sequence, `[B, F]` for a step), the int32 `lengths [B]`
/// (a constant; sequences only), the initial state `h0`, `c0 [B, H]` (zeros if
/// absent), the weights `w_ih [4H, F]`, `w_hh [4H, H]` and the biases
/// `b_ih`, `b_hh [4H]` (both or neither), in PyTorch's gate order (i, f, g, o).
#[derive(Clone, Copy, Debug)]
pub struct LstmVars<'a> {
    pub x: &'a Var,
    pub lengths: Option<&'a Var>,
    pub h0: Option<&'a Var>,
    pub c0: Option<&'a Var>,
    pub w_ih: &'a Var,
    pub w_hh: &'a Var,
    pub b_ih: Option<&'a Var>,
    pub b_hh: Option<&'a Var>,
}

impl<'a> LstmVars<'a> {
    /// The differentiable operands in the order of [`ops::LstmGrads`]' fields
    /// (`x, h0, c0, w_ih, w_hh, b_ih, b_hh`); the node's inputs are the
    /// present ones, in this order.
    fn slots(&self) -> [Option<&'a Var>; 7] {
        [
            Some(self.x),
            self.h0,
            self.c0,
            Some(self.w_ih),
            Some(self.w_hh),
            self.b_ih,
            self.b_hh,
        ]
    }
}

/// The operands' values.
struct Operands {
    x: Arc<Tensor>,
    lengths: Option<Arc<Tensor>>,
    h0: Option<Arc<Tensor>>,
    c0: Option<Arc<Tensor>>,
    w_ih: Arc<Tensor>,
    w_hh: Arc<Tensor>,
    b_ih: Option<Arc<Tensor>>,
    b_hh: Option<Arc<Tensor>>,
}

impl Operands {
    /// The operands from the values of the present slots (in
    /// [`LstmVars::slots`]' order, `present` saying which are there) and the
    /// lengths.
    fn from_slots(
        values: &[Arc<Tensor>],
        present: [bool; 7],
        lengths: Option<Arc<Tensor>>,
    ) -> Result<Operands> {
        let mut values = values.iter().cloned();
        let mut slots: [Option<Arc<Tensor>>; 7] = Default::default();
        for (slot, here) in slots.iter_mut().zip(present) {
            if here {
                *slot = values.next();
            }
        }
        let [x, h0, c0, w_ih, w_hh, b_ih, b_hh] = slots;
        let missing = || Error::Autograd("lstm: an operand value is missing".into());
        Ok(Operands {
            x: x.ok_or_else(missing)?,
            lengths,
            h0,
            c0,
            w_ih: w_ih.ok_or_else(missing)?,
            w_hh: w_hh.ok_or_else(missing)?,
            b_ih,
            b_hh,
        })
    }

    fn args(&self) -> LstmArgs<'_> {
        LstmArgs {
            x: &self.x,
            lengths: self.lengths.as_deref(),
            h0: self.h0.as_deref(),
            c0: self.c0.as_deref(),
            w_ih: &self.w_ih,
            w_hh: &self.w_hh,
            b_ih: self.b_ih.as_deref(),
            b_hh: self.b_hh.as_deref(),
        }
    }

    /// The differentiable operands in [`LstmVars::slots`]' order.
    fn slots(&self) -> [Option<&Tensor>; 7] {
        [
            Some(&self.x),
            self.h0.as_deref(),
            self.c0.as_deref(),
            Some(&self.w_ih),
            Some(&self.w_hh),
            self.b_ih.as_deref(),
            self.b_hh.as_deref(),
        ]
    }

    /// Runs `rule` into fresh tensors for the gradients `needs` asks for
    /// (`needs` is indexed by the node's inputs, the present slots), and
    /// returns them in the node's input order.
    fn backward(
        &self,
        be: &dyn Backend,
        needs: &[bool],
        rule: impl FnOnce(&LstmArgs<'_>, LstmGrads<'_>) -> Result<()>,
    ) -> Result<Vec<Option<Tensor>>> {
        let slots = self.slots();
        let mut grads: [Option<Tensor>; 7] = Default::default();
        let mut input = 0;
        for (g, value) in grads.iter_mut().zip(slots) {
            if let Some(value) = value {
                if need(needs, input) {
                    *g = Some(alloc::output(be, value.shape())?);
                }
                input += 1;
            }
        }
        let [dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh] = grads.each_mut().map(Option::as_mut);
        let into = LstmGrads {
            dx,
            dh0,
            dc0,
            dw_ih,
            dw_hh,
            db_ih,
            db_hh,
        };
        rule(&self.args(), into)?;
        Ok(grads
            .into_iter()
            .zip(slots)
            .filter(|(_, value)| value.is_some())
            .map(|(g, _)| g)
            .collect())
    }
}

/// The operands from the node's inputs in backward (`count` present slots).
fn operands_in_backward(
    inputs: &Inputs<'_>,
    count: usize,
    present: [bool; 7],
    lengths: Option<Arc<Tensor>>,
) -> Result<Operands> {
    let values = (0..count)
        .map(|i| inputs.get(i))
        .collect::<Result<Vec<_>>>()?;
    Operands::from_slots(&values, present, lengths)
}

/// The node's inputs: the present differentiable operands.
fn inputs<'a>(v: &LstmVars<'a>) -> Vec<&'a Var> {
    v.slots().into_iter().flatten().collect()
}

/// Which slots are present.
fn present(v: &LstmVars<'_>) -> [bool; 7] {
    v.slots().map(|s| s.is_some())
}

impl Var {
    /// The LSTM over the padded, time-major sequences `x [T, B, F]` (see
    /// [`ops::lstm_sequence`]): `(y [T, B, H], h_n [B, H], c_n [B, H])`, where
    /// frames past a sequence's length output 0 and `h_n`, `c_n` are each
    /// sequence's state after its last frame. Gradients flow to `x`, the
    /// initial state, the weights and the biases from any of the three outputs.
    pub fn lstm_sequence(v: &LstmVars<'_>) -> Result<(Var, Var, Var)> {
        let op = "lstm_sequence";
        let (present, lengths) = (present(v), v.lengths.map(Var::value));
        let forward: ForwardFn = Arc::new(move |be, xs| {
            let operands = Operands::from_slots(xs, present, lengths.clone())?;
            let args = operands.args();
            let plan = ops::lstm_plan(op, be, &args, false)?;
            let mut y = alloc::output(be, &plan.output_shape())?;
            let mut h_n = alloc::output(be, &plan.state_shape())?;
            let mut c_n = alloc::output(be, &plan.state_shape())?;
            let mut reserve = alloc::output(be, &Shape::new([ops::lstm_reserve_len(be, &plan)?])?)?;
            let out = LstmOutputs {
                y: &mut y,
                h_n: Some(&mut h_n),
                c_n: &mut c_n,
                reserve: &mut reserve,
            };
            ops::lstm_sequence(be, &args, out)?;
            let y = Arc::new(y);
            let saved_y = Saved::new(y.clone());
            let reserve = Saved::owned(reserve);
            let (count, lengths) = (xs.len(), lengths.clone());
            let backward: MultiBackwardFn = Box::new(move |be, dys, inputs, needs| {
                let operands = operands_in_backward(inputs, count, present, lengths.clone())?;
                let dout = LstmOutputGrads {
                    dy: dys.first().and_then(Option::as_ref),
                    dh_n: dys.get(1).and_then(Option::as_ref),
                    dc_n: dys.get(2).and_then(Option::as_ref),
                };
                operands.backward(be, needs, |args, grads| {
                    ops::lstm_sequence_backward(be, args, &saved_y, &reserve, &dout, grads)
                })
            });
            Ok((vec![y, Arc::new(h_n), Arc::new(c_n)], backward))
        });
        let saves = Saves::own(Reads::All);
        let [y, h_n, c_n] = Var::record_many(op, v.x.backend(), &inputs(v), saves, forward)?;
        Ok((y, h_n, c_n))
    }

    /// One LSTM step from `x [B, F]` and the state `h0`, `c0` (see
    /// [`ops::lstm_cell`]; no lengths): the new state `(h, c)`, each `[B, H]`.
    pub fn lstm_cell(v: &LstmVars<'_>) -> Result<(Var, Var)> {
        let op = "lstm_cell";
        let (present, lengths) = (present(v), v.lengths.map(Var::value));
        let forward: ForwardFn = Arc::new(move |be, xs| {
            let operands = Operands::from_slots(xs, present, lengths.clone())?;
            let args = operands.args();
            let plan = ops::lstm_plan(op, be, &args, true)?;
            let mut h = alloc::output(be, &plan.state_shape())?;
            let mut c = alloc::output(be, &plan.state_shape())?;
            let mut reserve = alloc::output(be, &Shape::new([ops::lstm_reserve_len(be, &plan)?])?)?;
            let out = LstmOutputs {
                y: &mut h,
                h_n: None,
                c_n: &mut c,
                reserve: &mut reserve,
            };
            ops::lstm_cell(be, &args, out)?;
            let h = Arc::new(h);
            let saved_h = Saved::new(h.clone());
            let reserve = Saved::owned(reserve);
            let (count, lengths) = (xs.len(), lengths.clone());
            let backward: MultiBackwardFn = Box::new(move |be, dys, inputs, needs| {
                let operands = operands_in_backward(inputs, count, present, lengths.clone())?;
                let dout = LstmOutputGrads {
                    dy: dys.first().and_then(Option::as_ref),
                    dh_n: None,
                    dc_n: dys.get(1).and_then(Option::as_ref),
                };
                operands.backward(be, needs, |args, grads| {
                    ops::lstm_cell_backward(be, args, &saved_h, &reserve, &dout, grads)
                })
            });
            Ok((vec![h, Arc::new(c)], backward))
        });
        let saves = Saves::own(Reads::All);
        let [h, c] = Var::record_many(op, v.x.backend(), &inputs(v), saves, forward)?;
        Ok((h, c))
    }
}
