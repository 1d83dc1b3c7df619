//! Invalid LSTM calls: lengths out of `0..=T` (the backend reads them), lengths
//! of the wrong dtype or shape or given to a step, operands of the wrong dtype,
//! weights, states and biases that disagree with `F` and `H`, one bias without
//! the other, and outputs or gradients of the wrong shape. Each error must name
//! the op and the offending argument.

use super::{expect_error, f32s, typed};
use crate::compare::Failures;
use crate::transfer::put_vec;
use verjus_core::ops::{self, LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs};
use verjus_core::{Backend, DType, Tensor};

const T: usize = 3;
const B: usize = 2;
const F: usize = 4;
const H: usize = 5;

/// The outputs of a call, allocated valid for the sizes above.
struct Outs {
    y: Tensor,
    h_n: Tensor,
    c_n: Tensor,
    reserve: Tensor,
}

impl Outs {
    fn new(be: &dyn Backend, args: &LstmArgs<'_>, cell: bool) -> Result<Outs, String> {
        let op = if cell { "lstm_cell" } else { "lstm_sequence" };
        let plan = ops::lstm_plan(op, be, args, cell).map_err(|e| e.to_string())?;
        let len = ops::lstm_reserve_len(be, &plan).map_err(|e| e.to_string())?;
        let y = if cell { vec![B, H] } else { vec![T, B, H] };
        Ok(Outs {
            y: f32s(be, &y)?,
            h_n: f32s(be, &[B, H])?,
            c_n: f32s(be, &[B, H])?,
            reserve: f32s(be, &[len])?,
        })
    }

    /// A sequence's outputs (`h_n` given).
    fn sequence(&mut self) -> LstmOutputs<'_> {
        LstmOutputs {
            y: &mut self.y,
            h_n: Some(&mut self.h_n),
            c_n: &mut self.c_n,
            reserve: &mut self.reserve,
        }
    }

    /// A step's outputs (no `h_n`).
    fn cell(&mut self) -> LstmOutputs<'_> {
        LstmOutputs {
            h_n: None,
            ..self.sequence()
        }
    }
}

/// Every invalid LSTM call is rejected with an error naming the argument.
pub fn lstm(be: &dyn Backend) -> Result<(), String> {
    let t = |d: &[usize]| f32s(be, d);
    let lengths = |v: Vec<i32>| put_vec(be, "error check setup", &[v.len()], v);
    let mut f = Failures::new();
    let (x, w_ih, w_hh, b_ih, b_hh) = (
        t(&[T, B, F])?,
        t(&[4 * H, F])?,
        t(&[4 * H, H])?,
        t(&[4 * H])?,
        t(&[4 * H])?,
    );
    let (h0, c0, l) = (t(&[B, H])?, t(&[B, H])?, lengths(vec![3, 0])?);
    let good = LstmArgs {
        x: &x,
        lengths: Some(&l),
        h0: Some(&h0),
        c0: Some(&c0),
        w_ih: &w_ih,
        w_hh: &w_hh,
        b_ih: Some(&b_ih),
        b_hh: Some(&b_hh),
    };
    let mut outs = Outs::new(be, &good, false)?;
    let no_grads = LstmOutputGrads {
        dy: None,
        dh_n: None,
        dc_n: None,
    };

    // Lengths: out of range (read by the backend), wrong dtype or shape.
    let (too_long, negative) = (lengths(vec![1, T as i32 + 1])?, lengths(vec![-1, 2])?);
    let (float, wide, short) = (t(&[B])?, typed(be, &[B], DType::I64)?, lengths(vec![1])?);
    let bad_lengths = [
        ("longer than T", &too_long),
        ("negative", &negative),
        ("float32", &float),
        ("int64", &wide),
        ("of shape [1] for B = 2", &short),
    ];
    let mut dx = t(&[T, B, F])?;
    for (why, bad) in bad_lengths {
        let args = LstmArgs {
            lengths: Some(bad),
            ..good
        };
        f.record(expect_error(
            &format!("lstm_sequence: lengths {why}"),
            &["lstm_sequence", "lengths"],
            || ops::lstm_sequence(be, &args, outs.sequence()),
        ));
        let (y, reserve) = (&outs.y, &outs.reserve);
        f.record(expect_error(
            &format!("lstm_sequence_backward: lengths {why}"),
            &["lstm_sequence_backward", "lengths"],
            || {
                let grads = LstmGrads {
                    dx: Some(&mut dx),
                    ..LstmGrads::default()
                };
                ops::lstm_sequence_backward(be, &args, y, reserve, &no_grads, grads)
            },
        ));
    }

    // Operands of the wrong dtype or of sizes that disagree with F and H.
    let (x_int, w_int) = (
        typed(be, &[T, B, F], DType::I32)?,
        typed(be, &[4 * H, F], DType::I64)?,
    );
    let (x_rank2, w_ih_f, w_ih_h) = (t(&[B, F])?, t(&[4 * H, F + 1])?, t(&[4 * (H + 1), F])?);
    let (w_hh_h, w_hh_none, state_h, state_b) = (
        t(&[4 * H, H + 1])?,
        t(&[0, 0])?,
        t(&[B, H + 1])?,
        t(&[B + 1, H])?,
    );
    let (bias_short, h0_int) = (t(&[4 * H - 1])?, typed(be, &[B, H], DType::I32)?);
    let bad_args: [(&str, &str, LstmArgs<'_>); 14] = [
        ("int32 x", "x", LstmArgs { x: &x_int, ..good }),
        (
            "x of rank 2",
            "x",
            LstmArgs {
                x: &x_rank2,
                ..good
            },
        ),
        (
            "int64 w_ih",
            "w_ih",
            LstmArgs {
                w_ih: &w_int,
                ..good
            },
        ),
        (
            "w_ih [4H, F + 1]",
            "w_ih",
            LstmArgs {
                w_ih: &w_ih_f,
                ..good
            },
        ),
        (
            "w_ih [4(H + 1), F]",
            "w_ih",
            LstmArgs {
                w_ih: &w_ih_h,
                ..good
            },
        ),
        (
            "w_hh [4H, H + 1]",
            "w_hh",
            LstmArgs {
                w_hh: &w_hh_h,
                ..good
            },
        ),
        (
            "w_hh [0, 0]",
            "w_hh",
            LstmArgs {
                w_hh: &w_hh_none,
                ..good
            },
        ),
        (
            "h0 [B, H + 1]",
            "h0",
            LstmArgs {
                h0: Some(&state_h),
                ..good
            },
        ),
        (
            "c0 [B + 1, H]",
            "c0",
            LstmArgs {
                c0: Some(&state_b),
                ..good
            },
        ),
        (
            "int32 h0",
            "h0",
            LstmArgs {
                h0: Some(&h0_int),
                ..good
            },
        ),
        (
            "b_ih [4H - 1]",
            "b_ih",
            LstmArgs {
                b_ih: Some(&bias_short),
                ..good
            },
        ),
        (
            "b_hh [4H - 1]",
            "b_hh",
            LstmArgs {
                b_hh: Some(&bias_short),
                ..good
            },
        ),
        ("b_ih without b_hh", "b_hh", LstmArgs { b_hh: None, ..good }),
        ("b_hh without b_ih", "b_ih", LstmArgs { b_ih: None, ..good }),
    ];
    for (why, arg, args) in bad_args {
        f.record(expect_error(
            &format!("lstm_sequence: {why}"),
            &["lstm_sequence", arg],
            || ops::lstm_sequence(be, &args, outs.sequence()),
        ));
    }

    // Outputs of the wrong shape, and a sequence without h_n.
    let (mut y_bad, mut reserve_bad) = (t(&[T, B, H + 1])?, t(&[outs.reserve.numel() + 1])?);
    f.record(expect_error(
        "lstm_sequence: y [T, B, H + 1]",
        &["lstm_sequence", "y"],
        || {
            ops::lstm_sequence(
                be,
                &good,
                LstmOutputs {
                    y: &mut y_bad,
                    ..outs.sequence()
                },
            )
        },
    ));
    f.record(expect_error(
        "lstm_sequence: reserve one too long",
        &["lstm_sequence", "reserve"],
        || {
            ops::lstm_sequence(
                be,
                &good,
                LstmOutputs {
                    reserve: &mut reserve_bad,
                    ..outs.sequence()
                },
            )
        },
    ));
    f.record(expect_error(
        "lstm_sequence: no h_n",
        &["lstm_sequence", "h_n"],
        || ops::lstm_sequence(be, &good, outs.cell()),
    ));

    // Gradients of the wrong shape, and bias gradients without biases.
    let dy_bad = t(&[T, B, H + 1])?;
    let (y, reserve) = (&outs.y, &outs.reserve);
    f.record(expect_error(
        "lstm_sequence_backward: dy [T, B, H + 1]",
        &["lstm_sequence_backward", "dy"],
        || {
            let dout = LstmOutputGrads {
                dy: Some(&dy_bad),
                ..no_grads
            };
            ops::lstm_sequence_backward(be, &good, y, reserve, &dout, LstmGrads::default())
        },
    ));
    let mut dw_bad = t(&[4 * H, F + 1])?;
    f.record(expect_error(
        "lstm_sequence_backward: dw_ih [4H, F + 1]",
        &["lstm_sequence_backward", "dw_ih"],
        || {
            let grads = LstmGrads {
                dw_ih: Some(&mut dw_bad),
                ..LstmGrads::default()
            };
            ops::lstm_sequence_backward(be, &good, y, reserve, &no_grads, grads)
        },
    ));
    let unbiased = LstmArgs {
        b_ih: None,
        b_hh: None,
        ..good
    };
    let mut db = t(&[4 * H])?;
    f.record(expect_error(
        "lstm_sequence_backward: db_ih without biases",
        &["lstm_sequence_backward", "bias"],
        || {
            let grads = LstmGrads {
                db_ih: Some(&mut db),
                ..LstmGrads::default()
            };
            ops::lstm_sequence_backward(be, &unbiased, y, reserve, &no_grads, grads)
        },
    ));

    cell_errors(be, &good, &mut f)?;
    f.finish()
}

/// A step: no lengths, `x [B, F]`, no `h_n`, no `dh_n`.
fn cell_errors(be: &dyn Backend, seq: &LstmArgs<'_>, f: &mut Failures) -> Result<(), String> {
    let x = f32s(be, &[B, F])?;
    let good = LstmArgs {
        x: &x,
        lengths: None,
        ..*seq
    };
    let mut outs = Outs::new(be, &good, true)?;
    let with_lengths = LstmArgs {
        lengths: seq.lengths,
        ..good
    };
    f.record(expect_error(
        "lstm_cell: lengths",
        &["lstm_cell", "lengths"],
        || ops::lstm_cell(be, &with_lengths, outs.cell()),
    ));
    f.record(expect_error(
        "lstm_cell: x of rank 3",
        &["lstm_cell", "x"],
        || ops::lstm_cell(be, &LstmArgs { x: seq.x, ..good }, outs.cell()),
    ));
    f.record(expect_error(
        "lstm_cell: h_n given",
        &["lstm_cell", "h_n"],
        || ops::lstm_cell(be, &good, outs.sequence()),
    ));
    let dh = f32s(be, &[B, H])?;
    let dout = LstmOutputGrads {
        dy: None,
        dh_n: Some(&dh),
        dc_n: None,
    };
    let (h, reserve) = (&outs.y, &outs.reserve);
    f.record(expect_error(
        "lstm_cell_backward: dh_n given",
        &["lstm_cell_backward", "dh_n"],
        || ops::lstm_cell_backward(be, &good, h, reserve, &dout, LstmGrads::default()),
    ));
    f.record(expect_error(
        "lstm_cell_backward: lengths",
        &["lstm_cell_backward", "lengths"],
        || {
            let dout = LstmOutputGrads { dh_n: None, ..dout };
            ops::lstm_cell_backward(be, &with_lengths, h, reserve, &dout, LstmGrads::default())
        },
    ));
    Ok(())
}
