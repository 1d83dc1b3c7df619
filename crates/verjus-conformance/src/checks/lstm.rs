//! Checks of `lstm_sequence` and `lstm_cell`, forward and backward, against
//! the reference.
//!
//! Sizes: `T` in {0, 1, 5} (a step: 1), `B` in {0, 1, 3}, `F` in {1, 7}, `H`
//! in {1, 5, 17}, each with every combination of lengths (mixed {0, 1, T-1,
//! T}), `h0`, `c0` and biases. The backward cycles
//! through every combination of present output gradients (`dy`, `dh_n`,
//! `dc_n`; a step's `dy`, `dc_n`) and asks for all input gradients, or only the
//! data's (`dx`, `dh0`, `dc0`), or only the parameters'. Outputs and gradients
//! start as garbage, so they must be overwritten. Tolerance:
//! `Tolerance::GEMM` (each gate is a sum of `F + H` products, and a weight
//! gradient a sum over `T * B` frames).

use super::lstm_operands::{backward, forward, Host, Sizes, Slot};
use crate::array::Array;
use crate::compare::{close, every_case, Failures, Tolerance};
use crate::inputs::uniform;
use crate::reference::lstm as reference;
use crate::transfer::put;
use verjus_core::Backend;

const TOL: Tolerance = Tolerance::GEMM;

/// Every size with every combination of the optional operands.
fn cases(cell: bool) -> impl Iterator<Item = (u64, Sizes)> {
    let (steps, batches): (&[usize], &[usize]) = if cell {
        (&[1], &[0, 1, 3])
    } else {
        (&[0, 1, 5], &[0, 1, 3])
    };
    let mut out = Vec::new();
    for &t in steps {
        for &b in batches {
            for f in [1, 7] {
                for h in [1, 5, 17] {
                    // A cell has no lengths (flag 1).
                    for flags in (0..16usize).filter(|f| !cell || f & 1 == 0) {
                        out.push(Sizes {
                            steps: t,
                            batch: b,
                            input: f,
                            hidden: h,
                            lengths: flags & 1 != 0,
                            h0: flags & 2 != 0,
                            c0: flags & 4 != 0,
                            bias: flags & 8 != 0,
                            cell,
                        });
                    }
                }
            }
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(i, s)| (1000 + 10 * i as u64, s))
}

/// `lstm_sequence` (or `lstm_cell`): `y`, `h_n`, `c_n` against the reference.
fn check_forward(be: &dyn Backend, cell: bool) -> Result<(), String> {
    every_case(cases(cell), |(seed, s)| {
        let op = if cell { "lstm_cell" } else { "lstm_sequence" };
        let what = s.describe(op);
        let host = Host::draw(seed, &s);
        let want = if cell {
            let (h, c) = reference::lstm_cell(&host.reference());
            [h, Array::zeros([0]), c]
        } else {
            let o = reference::lstm_sequence(&host.reference());
            [o.y, o.h_n, o.c_n]
        };
        let f = forward(be, &what, &s, &host.upload(be, &what)?)?;
        let got = f.download(be, &what)?;
        let mut failures = Failures::new();
        for ((name, want), got) in ["y", "h_n", "c_n"].into_iter().zip(&want).zip(&got) {
            failures.record(close(
                &format!("{what}: {name}"),
                &want.dims,
                &want.data,
                got,
                TOL,
            ));
        }
        failures.finish()
    })
}

/// Which input gradients the `i`-th backward case asks for.
fn wanted(i: usize, s: &Sizes) -> Vec<Slot> {
    let data = [Slot::X, Slot::H0, Slot::C0];
    Slot::ALL
        .into_iter()
        .filter(|&slot| s.bias || !matches!(slot, Slot::BIh | Slot::BHh))
        .filter(|slot| match i % 3 {
            0 => true,
            1 => data.contains(slot),
            _ => !data.contains(slot),
        })
        .collect()
}

/// The backward of `lstm_sequence` (or `lstm_cell`) against the reference.
fn check_backward(be: &dyn Backend, cell: bool) -> Result<(), String> {
    let numbered = cases(cell).enumerate();
    every_case(numbered, |(i, (seed, s))| {
        // Output gradients present: all combinations in turn (a step has no dh_n).
        let present = if cell { [0, 1, 4, 5][i % 4] } else { i % 8 };
        let [has_dy, has_dh, has_dc] = [1, 2, 4].map(|bit| present & bit != 0);
        let op = if cell {
            "lstm_cell_backward"
        } else {
            "lstm_sequence_backward"
        };
        let what = format!(
            "{} with{}{}{}",
            s.describe(op),
            if has_dy { " dy" } else { "" },
            if has_dh { " dh_n" } else { "" },
            if has_dc { " dc_n" } else { "" },
        );
        let host = Host::draw(seed, &s);
        let dy = uniform(seed + 20, &s.y_dims(), -1.0, 1.0);
        let dh = uniform(seed + 21, &s.state_dims(), -1.0, 1.0);
        let dc = uniform(seed + 22, &s.state_dims(), -1.0, 1.0);
        let (dy, dh, dc) = (
            has_dy.then_some(&dy),
            has_dh.then_some(&dh),
            has_dc.then_some(&dc),
        );
        let want = if cell {
            reference::lstm_cell_backward(&host.reference(), dy, dc)
        } else {
            reference::lstm_sequence_backward(&host.reference(), dy, dh, dc)
        };
        let want = [
            want.dx, want.dh0, want.dc0, want.dw_ih, want.dw_hh, want.db_ih, want.db_hh,
        ];
        let device = host.upload(be, &what)?;
        let f = forward(be, &what, &s, &device)?;
        let up = |a: Option<&Array>| a.map(|a| put(be, &what, a)).transpose();
        let (tdy, tdh, tdc) = (up(dy)?, up(dh)?, up(dc)?);
        let wanted = wanted(i, &s);
        let got = backward(
            be,
            &what,
            &s,
            &device,
            &f,
            [tdy.as_ref(), tdh.as_ref(), tdc.as_ref()],
            &wanted,
        )?;
        let mut failures = Failures::new();
        for slot in wanted {
            let want = &want[slot as usize];
            let got = got[slot as usize]
                .as_deref()
                .ok_or_else(|| format!("{what}: d{} was not downloaded", slot.name()))?;
            let name = format!("{what}: d{}", slot.name());
            failures.record(close(&name, &want.dims, &want.data, got, TOL));
        }
        failures.finish()
    })
}

/// `ops::lstm_sequence` against the reference.
pub fn lstm_sequence(be: &dyn Backend) -> Result<(), String> {
    check_forward(be, false)
}

/// `ops::lstm_sequence_backward` against the reference.
pub fn lstm_sequence_backward(be: &dyn Backend) -> Result<(), String> {
    check_backward(be, false)
}

/// `ops::lstm_cell` against the reference.
pub fn lstm_cell(be: &dyn Backend) -> Result<(), String> {
    check_forward(be, true)
}

/// `ops::lstm_cell_backward` against the reference.
pub fn lstm_cell_backward(be: &dyn Backend) -> Result<(), String> {
    check_backward(be, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_cover_every_option_once() {
        let seq: Vec<Sizes> = cases(false).map(|(_, s)| s).collect();
        assert_eq!(seq.len(), 3 * 3 * 2 * 3 * 16);
        let cell: Vec<Sizes> = cases(true).map(|(_, s)| s).collect();
        assert_eq!(cell.len(), 3 * 2 * 3 * 8);
        assert!(cell.iter().all(|s| s.cell && !s.lengths && s.steps == 1));
    }
}
