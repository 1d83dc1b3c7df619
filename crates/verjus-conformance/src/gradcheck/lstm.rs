//! Gradient checks of the LSTM: every operand (`x`, `h0`, `c0`, `w_ih`,
//! `w_hh`, `b_ih`, `b_hh`) of a sequence with lengths {0, 1, T-1, T}, of one
//! without lengths or initial state, and of a step, against central
//! differences of the backend's own forward. The loss weighs all outputs at
//! once, `L = sum(y * r_y) + sum(h_n * r_h) + sum(c_n * r_c)` (a step's
//! `L = sum(h * r_h) + sum(c * r_c)`), so the backward must combine the three
//! output gradients as the forward combines the operands.

use super::{agree, numeric_gradient, weighted_sum};
use crate::array::Array;
use crate::checks::lstm_operands::{backward, forward, Host, Sizes, Slot};
use crate::compare::{every_case, Failures};
use crate::inputs::uniform;
use crate::transfer::put;
use verjus_core::Backend;

fn sizes(steps: usize, batch: usize, input: usize, hidden: usize, all: bool, cell: bool) -> Sizes {
    Sizes {
        steps,
        batch,
        input,
        hidden,
        lengths: all && !cell,
        h0: all,
        c0: all,
        bias: true,
        cell,
    }
}

fn check(be: &dyn Backend, cases: &[Sizes]) -> Result<(), String> {
    every_case(cases.iter().enumerate(), |(i, s)| {
        let op = if s.cell { "lstm_cell" } else { "lstm_sequence" };
        let what = format!("gradcheck {}", s.describe(op));
        let host = Host::draw(50 + 10 * i as u64, s);
        let r = [
            uniform(51, &s.y_dims(), -1.0, 1.0),
            uniform(52, &s.state_dims(), -1.0, 1.0),
            uniform(53, &s.state_dims(), -1.0, 1.0),
        ];
        let loss = |h: &Host| -> Result<f64, String> {
            let f = forward(be, &what, s, &h.upload(be, &what)?)?;
            let mut l =
                weighted_sum(be, &what, &f.y, &r[0])? + weighted_sum(be, &what, &f.c_n, &r[2])?;
            if let Some(h_n) = &f.h_n {
                l += weighted_sum(be, &what, h_n, &r[1])?;
            }
            Ok(l)
        };
        let device = host.upload(be, &what)?;
        let f = forward(be, &what, s, &device)?;
        let [ry, rh, rc] = r.each_ref().map(|a| put(be, &what, a));
        let (ry, rh, rc) = (ry?, rh?, rc?);
        let dout = if s.cell {
            [Some(&ry), None, Some(&rc)]
        } else {
            [Some(&ry), Some(&rh), Some(&rc)]
        };
        let present: Vec<Slot> = Slot::ALL
            .into_iter()
            .filter(|&k| host.get(k).is_some())
            .collect();
        let grads = backward(be, &what, s, &device, &f, dout, &present)?;
        let mut failures = Failures::new();
        for slot in present {
            let x: &Array = host.get(slot).ok_or("an operand went missing")?;
            let numeric = numeric_gradient(x, |v| loss(&host.with(slot, v)))?;
            let analytic = grads[slot as usize].as_deref().unwrap_or(&[]);
            failures.record(agree(
                &format!("{what}: d{}", slot.name()),
                &x.dims,
                &numeric,
                analytic,
            ));
        }
        failures.finish()
    })
}

/// Every operand of `lstm_sequence_backward` against differences of
/// `lstm_sequence`, with lengths {0, 1, T-1, T} and initial states, and
/// without lengths or initial states.
pub fn lstm_sequence(be: &dyn Backend) -> Result<(), String> {
    check(
        be,
        &[
            sizes(4, 4, 3, 2, true, false),
            sizes(3, 2, 2, 3, false, false),
        ],
    )
}

/// Every operand of `lstm_cell_backward` against differences of `lstm_cell`,
/// with and without an initial state.
pub fn lstm_cell(be: &dyn Backend) -> Result<(), String> {
    check(
        be,
        &[
            sizes(1, 3, 3, 2, true, true),
            sizes(1, 2, 2, 3, false, true),
        ],
    )
}
