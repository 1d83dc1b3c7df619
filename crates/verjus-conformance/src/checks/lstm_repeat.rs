//! One forward, two backwards: an LSTM's backward must leave its reserve as
//! the forward left it, so that backpropagating twice from one forward (RF's
//! `gradient` per variable, a retained graph) gives the same gradients twice.
//! cuDNN's backward writes into its reserve space; run on the reserve itself
//! the second backward's gradients were wrong (seen on an H100).
//! Tolerance: `Tolerance::GEMM` (a backend may sum in a different order each
//! time, e.g. with atomics).

use super::lstm_operands::{backward, forward, Device, Host, Sizes, Slot};
use crate::compare::{close, every_case, Failures, Tolerance};
use crate::inputs::uniform;
use crate::transfer::put;
use verjus_core::Backend;

/// `lstm_sequence_backward` (with lengths {0, 1, T-1, T}, and without) and
/// `lstm_cell_backward`, each called twice after one forward.
pub fn lstm_backward_twice(be: &dyn Backend) -> Result<(), String> {
    let cases = [(6, false, false), (6, true, false), (1, false, true)];
    every_case(cases, |(steps, lengths, cell)| {
        let s = Sizes {
            steps,
            batch: 4,
            input: 3,
            hidden: 5,
            lengths,
            h0: true,
            c0: true,
            bias: true,
            cell,
        };
        let op = if cell { "lstm_cell" } else { "lstm_sequence" };
        let what = format!("{} backward twice", s.describe(op));
        let host = Host::draw(50, &s);
        let device: Device = host.upload(be, &what)?;
        let f = forward(be, &what, &s, &device)?;
        let dy = put(be, &what, &uniform(51, &s.y_dims(), -1.0, 1.0))?;
        let dh = put(be, &what, &uniform(52, &s.state_dims(), -1.0, 1.0))?;
        let dc = put(be, &what, &uniform(53, &s.state_dims(), -1.0, 1.0))?;
        let dout = if cell {
            [Some(&dy), None, Some(&dc)]
        } else {
            [Some(&dy), Some(&dh), Some(&dc)]
        };
        let first = backward(be, &what, &s, &device, &f, dout, &Slot::ALL)?;
        let second = backward(be, &what, &s, &device, &f, dout, &Slot::ALL)?;
        let mut failures = Failures::new();
        for ((slot, a), b) in Slot::ALL.into_iter().zip(&first).zip(&second) {
            if let (Some(a), Some(b)) = (a, b) {
                failures.record(close(
                    &format!("{what}: d{} of the second backward", slot.name()),
                    &[a.len()],
                    a,
                    b,
                    Tolerance::GEMM,
                ));
            }
        }
        failures.finish()
    })
}
