//! The LSTM ops in the no-panic property. A related draw builds consistent
//! operands from the first shape (`[T, B, F]` from its first axes, `H` from a
//! pick, 0 included) with lengths in `0..=T` or one step outside it, and the
//! reserve the backend asks for; an unrelated draw takes the raw shapes. Flags
//! choose the optional operands, int64 lengths, and which output gradients
//! and input gradients a backward gets.

use super::{f32s, ints, Draw};
use verjus_core::ops::{self, LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs};
use verjus_core::{Backend, Result};

/// The shapes of every operand and output, and the lengths' values.
struct Shapes {
    x: Vec<usize>,
    w_ih: Vec<usize>,
    w_hh: Vec<usize>,
    state: Vec<usize>,
    bias: Vec<usize>,
    y: Vec<usize>,
    lengths: Vec<i64>,
}

fn shapes(d: &Draw, cell: bool) -> Shapes {
    let s0 = d.s(0);
    let axis = |k: usize| s0.get(k).copied().unwrap_or(1);
    if !d.related {
        let count = d.s(3).first().copied().unwrap_or(0);
        return Shapes {
            x: s0.to_vec(),
            w_ih: d.s(1).to_vec(),
            w_hh: d.s(2).to_vec(),
            state: d.s(3).to_vec(),
            bias: d.s(1).iter().take(1).copied().collect(),
            y: d.s(2).to_vec(),
            lengths: (0..count).map(|j| d.picks[j % 8] as i64 - 1).collect(),
        };
    }
    let (t, b, f) = if cell {
        (1, axis(0), axis(1))
    } else {
        (axis(0), axis(1), axis(2))
    };
    let h = d.picks[0] % 6;
    // One length in eight lands just outside 0..=T.
    let lengths = (0..b)
        .map(|j| {
            let pick = d.picks[(1 + j) % 8];
            match pick {
                0 => -1,
                11 => t as i64 + 1,
                p => (p % (t + 1)) as i64,
            }
        })
        .collect();
    Shapes {
        x: if cell { vec![b, f] } else { vec![t, b, f] },
        w_ih: vec![4 * h, f],
        w_hh: vec![4 * h, h],
        state: vec![b, h],
        bias: vec![4 * h],
        y: if cell { vec![b, h] } else { vec![t, b, h] },
        lengths,
    }
}

/// Runs the forward (`backward` false) or the backward of a sequence or a step.
fn run(be: &dyn Backend, d: &Draw, cell: bool, backward: bool) -> Result<()> {
    let s = shapes(d, cell);
    let fl = |i: usize| d.flags[i];
    let (x, w_ih, w_hh) = (f32s(be, &s.x)?, f32s(be, &s.w_ih)?, f32s(be, &s.w_hh)?);
    let (h0, c0) = (f32s(be, &s.state)?, f32s(be, &s.state)?);
    let (b_ih, b_hh) = (f32s(be, &s.bias)?, f32s(be, &s.bias)?);
    let lengths = ints(be, &s.lengths, !fl(4))?;
    let args = LstmArgs {
        x: &x,
        lengths: (fl(0) && !cell).then_some(&lengths),
        h0: fl(1).then_some(&h0),
        c0: fl(2).then_some(&c0),
        w_ih: &w_ih,
        w_hh: &w_hh,
        b_ih: fl(3).then_some(&b_ih),
        b_hh: fl(3).then_some(&b_hh),
    };
    let reserve_len = ops::lstm_plan("lstm", be, &args, cell)
        .and_then(|plan| ops::lstm_reserve_len(be, &plan))
        .unwrap_or(d.picks[7]);
    let mut reserve = f32s(be, &[reserve_len])?;
    let (mut y, mut h_n, mut c_n) = (f32s(be, &s.y)?, f32s(be, &s.state)?, f32s(be, &s.state)?);
    if !backward {
        let out = LstmOutputs {
            y: &mut y,
            h_n: (!cell).then_some(&mut h_n),
            c_n: &mut c_n,
            reserve: &mut reserve,
        };
        return if cell {
            ops::lstm_cell(be, &args, out)
        } else {
            ops::lstm_sequence(be, &args, out)
        };
    }
    let dout = LstmOutputGrads {
        dy: fl(1).then_some(&y),
        dh_n: (!cell && fl(2)).then_some(&h_n),
        dc_n: fl(5).then_some(&c_n),
    };
    let (mut dx, mut dh0, mut dc0) = (f32s(be, &s.x)?, f32s(be, &s.state)?, f32s(be, &s.state)?);
    let (mut dw_ih, mut dw_hh) = (f32s(be, &s.w_ih)?, f32s(be, &s.w_hh)?);
    let (mut db_ih, mut db_hh) = (f32s(be, &s.bias)?, f32s(be, &s.bias)?);
    let grads = LstmGrads {
        dx: fl(0).then_some(&mut dx),
        dh0: fl(2).then_some(&mut dh0),
        dc0: fl(3).then_some(&mut dc0),
        dw_ih: fl(4).then_some(&mut dw_ih),
        dw_hh: fl(5).then_some(&mut dw_hh),
        db_ih: fl(3).then_some(&mut db_ih),
        db_hh: fl(1).then_some(&mut db_hh),
    };
    if cell {
        ops::lstm_cell_backward(be, &args, &y, &reserve, &dout, grads)
    } else {
        ops::lstm_sequence_backward(be, &args, &y, &reserve, &dout, grads)
    }
}

pub(super) fn lstm_sequence(be: &dyn Backend, d: &Draw) -> Result<()> {
    run(be, d, false, false)
}

pub(super) fn lstm_sequence_backward(be: &dyn Backend, d: &Draw) -> Result<()> {
    run(be, d, false, true)
}

pub(super) fn lstm_cell(be: &dyn Backend, d: &Draw) -> Result<()> {
    run(be, d, true, false)
}

pub(super) fn lstm_cell_backward(be: &dyn Backend, d: &Draw) -> Result<()> {
    run(be, d, true, true)
}
