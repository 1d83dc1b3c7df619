//! The LSTM over a padded, time-major batch of sequences, and one LSTM step.
//!
//! Gates follow PyTorch's `torch.nn.LSTM` (order i, f, g, o, weights
//! `W_ih [4H, F]`, `W_hh [4H, H]`, biases `b_ih, b_hh [4H]`), so PyTorch state
//! dicts load unchanged and PyTorch is a test reference:
//!
//! ```text
//! gates = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh      ([B, 4H])
//! i, f, o = sigmoid(gates[i|f|o]);  g = tanh(gates[g])
//! c_t = f * c_{t-1} + i * g;        h_t = o * tanh(c_t)
//! ```
//!
//! Per-sequence lengths (int32 `[B]`, each in `0..=T`): for `t >= lengths[b]`
//! the output is 0 and the state is carried unchanged, so the final state is
//! each sequence's state at its own last frame (cuDNN's padded layout, PyTorch's
//! packed sequences); length 0 returns the initial state. Missing `h0`/`c0` are
//! zeros, missing biases are zeros.
//!
//! The forward writes a *reserve* (a backend-defined f32 buffer of
//! [`lstm_reserve_len`] elements: what its backward needs, such as the gate
//! activations and cell states) that the caller keeps for the backward, as
//! cuDNN's reserve space. [`lstm_cell`] is one step without lengths, for loops
//! that step frame by frame.

use super::{check_device, check_dtype, check_f32_on, check_rank, check_shape};
use crate::{Backend, DType, Error, Result, Shape, Tensor};

/// The sizes of one LSTM call, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LstmPlan {
    /// Frames `T` (1 for a cell step).
    pub steps: usize,
    /// Sequences `B`.
    pub batch: usize,
    /// Input features `F`.
    pub input: usize,
    /// Hidden size `H`.
    pub hidden: usize,
    /// Whether per-sequence lengths are given (otherwise every sequence has `T`).
    pub has_lengths: bool,
    pub has_h0: bool,
    pub has_c0: bool,
    pub has_bias: bool,
}

impl LstmPlan {
    /// `4 * H`, the width of the gates.
    pub fn gates(&self) -> usize {
        4 * self.hidden
    }

    /// `[T, B, H]`, the shape of the outputs.
    pub fn output_shape(&self) -> Shape {
        Shape::new([self.steps, self.batch, self.hidden]).expect("checked by lstm_plan")
    }

    /// `[B, H]`, the shape of a state.
    pub fn state_shape(&self) -> Shape {
        Shape::new([self.batch, self.hidden]).expect("checked by lstm_plan")
    }
}

/// The operands of an LSTM over a sequence (`x [T, B, F]`) or of one step
/// (`x [B, F]`, with `h0`/`c0` the state to step from).
#[derive(Clone, Copy, Debug)]
pub struct LstmArgs<'a> {
    pub x: &'a Tensor,
    /// int32 `[B]`, each in `0..=T`; sequence calls only.
    pub lengths: Option<&'a Tensor>,
    /// `[B, H]`; zeros if absent.
    pub h0: Option<&'a Tensor>,
    /// `[B, H]`; zeros if absent.
    pub c0: Option<&'a Tensor>,
    /// `[4H, F]`.
    pub w_ih: &'a Tensor,
    /// `[4H, H]`.
    pub w_hh: &'a Tensor,
    /// `[4H]` each; both or neither.
    pub b_ih: Option<&'a Tensor>,
    pub b_hh: Option<&'a Tensor>,
}

/// What the forward writes: all outputs, the final state, the reserve.
#[derive(Debug)]
pub struct LstmOutputs<'a> {
    /// `[T, B, H]` (`[B, H]` for a cell step: the new `h`).
    pub y: &'a mut Tensor,
    /// `[B, H]`, each sequence's `h` after its last frame (for a cell step,
    /// the new `h` again is not written: pass `None`).
    pub h_n: Option<&'a mut Tensor>,
    /// `[B, H]`, each sequence's `c` after its last frame.
    pub c_n: &'a mut Tensor,
    /// f32 `[lstm_reserve_len]`, kept for the backward.
    pub reserve: &'a mut Tensor,
}

/// The output gradients a backward reads (absent ones are zero).
#[derive(Clone, Copy, Debug)]
pub struct LstmOutputGrads<'a> {
    /// `[T, B, H]` (`[B, H]` for a cell step).
    pub dy: Option<&'a Tensor>,
    /// `[B, H]`; sequence calls only (a cell's `h` is `y`).
    pub dh_n: Option<&'a Tensor>,
    /// `[B, H]`.
    pub dc_n: Option<&'a Tensor>,
}

/// The input gradients a backward writes (each only if asked for; all are
/// overwritten).
#[derive(Debug, Default)]
pub struct LstmGrads<'a> {
    pub dx: Option<&'a mut Tensor>,
    pub dh0: Option<&'a mut Tensor>,
    pub dc0: Option<&'a mut Tensor>,
    pub dw_ih: Option<&'a mut Tensor>,
    pub dw_hh: Option<&'a mut Tensor>,
    pub db_ih: Option<&'a mut Tensor>,
    pub db_hh: Option<&'a mut Tensor>,
}

/// Validates the operands of a sequence call (`step == false`, `x [T, B, F]`)
/// or a cell step (`x [B, F]`) and returns the plan.
pub fn lstm_plan(op: &str, be: &dyn Backend, args: &LstmArgs<'_>, step: bool) -> Result<LstmPlan> {
    let (rank, layout) = if step {
        (2, "[B, F]")
    } else {
        (3, "[T, B, F]")
    };
    check_rank(op, "x", args.x, rank, layout)?;
    check_f32_on(
        op,
        be,
        &[("x", args.x), ("w_ih", args.w_ih), ("w_hh", args.w_hh)],
    )?;
    let d = args.x.dims();
    let (steps, batch, input) = if step {
        (1, d[0], d[1])
    } else {
        (d[0], d[1], d[2])
    };
    check_rank(op, "w_hh", args.w_hh, 2, "[4H, H]")?;
    let hidden = args.w_hh.dims()[1];
    if hidden == 0 {
        return Err(Error::invalid(
            op,
            "the hidden size (w_hh's second axis) must be positive",
        ));
    }
    check_shape(op, "w_hh", args.w_hh, &Shape::new([4 * hidden, hidden])?)?;
    check_shape(op, "w_ih", args.w_ih, &Shape::new([4 * hidden, input])?)?;
    let state = Shape::new([batch, hidden])?;
    Shape::new([steps, batch, hidden])?; // the outputs' shape, so that `output_shape` cannot fail
    for (what, t) in [("h0", args.h0), ("c0", args.c0)] {
        if let Some(t) = t {
            check_f32_on(op, be, &[(what, t)])?;
            check_shape(op, what, t, &state)?;
        }
    }
    let bias = Shape::new([4 * hidden])?;
    match (args.b_ih, args.b_hh) {
        (Some(bi), Some(bh)) => {
            check_f32_on(op, be, &[("b_ih", bi), ("b_hh", bh)])?;
            check_shape(op, "b_ih", bi, &bias)?;
            check_shape(op, "b_hh", bh, &bias)?;
        }
        (None, None) => {}
        _ => {
            return Err(Error::invalid(
                op,
                "b_ih and b_hh go together: give both or neither",
            ))
        }
    }
    if let Some(l) = args.lengths {
        if step {
            return Err(Error::invalid(op, "a cell step takes no lengths"));
        }
        check_device(op, "lengths", be, l)?;
        check_dtype(op, "lengths", l, DType::I32)?;
        check_shape(op, "lengths", l, &Shape::new([batch])?)?;
    }
    Ok(LstmPlan {
        steps,
        batch,
        input,
        hidden,
        has_lengths: args.lengths.is_some(),
        has_h0: args.h0.is_some(),
        has_c0: args.c0.is_some(),
        has_bias: args.b_ih.is_some(),
    })
}

/// Fails unless every length is in `0..=steps`, naming the first that is not.
/// Backends call it on the lengths they read to the host (cuDNN needs them
/// there anyway).
pub fn check_lengths(op: &str, lengths: &[i32], steps: usize) -> Result<()> {
    match lengths
        .iter()
        .enumerate()
        .find(|(_, &l)| l < 0 || l as usize > steps)
    {
        Some((b, &l)) => Err(Error::invalid(
            op,
            format!("lengths[{b}] = {l} is outside 0..={steps} (x has {steps} frames)"),
        )),
        None => Ok(()),
    }
}

/// The number of f32 elements of the reserve that `be` needs for `plan`.
pub fn lstm_reserve_len(be: &dyn Backend, plan: &LstmPlan) -> Result<usize> {
    be.lstm_reserve_len(plan)
}

fn check_outputs(
    op: &str,
    be: &dyn Backend,
    plan: &LstmPlan,
    out: &LstmOutputs<'_>,
    step: bool,
) -> Result<()> {
    let y_shape = if step {
        plan.state_shape()
    } else {
        plan.output_shape()
    };
    check_f32_on(
        op,
        be,
        &[("y", out.y), ("c_n", out.c_n), ("reserve", out.reserve)],
    )?;
    check_shape(op, "y", out.y, &y_shape)?;
    check_shape(op, "c_n", out.c_n, &plan.state_shape())?;
    if let Some(h) = &out.h_n {
        check_f32_on(op, be, &[("h_n", h)])?;
        check_shape(op, "h_n", h, &plan.state_shape())?;
    }
    let reserve = Shape::new([be.lstm_reserve_len(plan)?])?;
    check_shape(op, "reserve", out.reserve, &reserve)
}

fn check_grads(
    op: &str,
    be: &dyn Backend,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    dout: &LstmOutputGrads<'_>,
    grads: &LstmGrads<'_>,
    step: bool,
) -> Result<()> {
    let y_shape = if step {
        plan.state_shape()
    } else {
        plan.output_shape()
    };
    let state = plan.state_shape();
    let given = [
        ("dy", dout.dy, &y_shape),
        ("dh_n", dout.dh_n, &state),
        ("dc_n", dout.dc_n, &state),
    ];
    for (what, t, shape) in given {
        if let Some(t) = t {
            check_f32_on(op, be, &[(what, t)])?;
            check_shape(op, what, t, shape)?;
        }
    }
    let bias = Shape::new([plan.gates()])?;
    let wanted = [
        ("dx", grads.dx.as_deref(), args.x.shape()),
        ("dh0", grads.dh0.as_deref(), &state),
        ("dc0", grads.dc0.as_deref(), &state),
        ("dw_ih", grads.dw_ih.as_deref(), args.w_ih.shape()),
        ("dw_hh", grads.dw_hh.as_deref(), args.w_hh.shape()),
        ("db_ih", grads.db_ih.as_deref(), &bias),
        ("db_hh", grads.db_hh.as_deref(), &bias),
    ];
    for (what, t, shape) in wanted {
        if let Some(t) = t {
            check_f32_on(op, be, &[(what, t)])?;
            check_shape(op, what, t, shape)?;
        }
    }
    if !plan.has_bias && (grads.db_ih.is_some() || grads.db_hh.is_some()) {
        return Err(Error::invalid(
            op,
            "bias gradients asked for an LSTM without biases",
        ));
    }
    Ok(())
}

/// The LSTM over `x [T, B, F]` (see the module docs): writes `y [T, B, H]`,
/// the final `h_n`, `c_n [B, H]` and the reserve for [`lstm_sequence_backward`].
pub fn lstm_sequence(be: &dyn Backend, args: &LstmArgs<'_>, out: LstmOutputs<'_>) -> Result<()> {
    let op = "lstm_sequence";
    let plan = lstm_plan(op, be, args, false)?;
    check_outputs(op, be, &plan, &out, false)?;
    if out.h_n.is_none() {
        return Err(Error::invalid(op, "h_n is an output of a sequence call"));
    }
    be.lstm_sequence(&plan, args, out)
}

/// The gradients of [`lstm_sequence`] from the forward's operands, outputs `y`
/// and reserve, and the output gradients.
pub fn lstm_sequence_backward(
    be: &dyn Backend,
    args: &LstmArgs<'_>,
    y: &Tensor,
    reserve: &Tensor,
    dout: &LstmOutputGrads<'_>,
    grads: LstmGrads<'_>,
) -> Result<()> {
    let op = "lstm_sequence_backward";
    let plan = backward_plan(op, be, args, ("y", y), reserve, dout, &grads, false)?;
    be.lstm_sequence_backward(&plan, args, y, reserve, dout, grads)
}

/// The checks both backwards share: the operands, the forward's output
/// (`y` of a sequence, the new `h` of a step) and reserve, and the gradients.
#[allow(clippy::too_many_arguments)] // the backward's operands, checked together
fn backward_plan(
    op: &str,
    be: &dyn Backend,
    args: &LstmArgs<'_>,
    (what, out): (&str, &Tensor),
    reserve: &Tensor,
    dout: &LstmOutputGrads<'_>,
    grads: &LstmGrads<'_>,
    step: bool,
) -> Result<LstmPlan> {
    let plan = lstm_plan(op, be, args, step)?;
    check_f32_on(op, be, &[(what, out), ("reserve", reserve)])?;
    let out_shape = if step {
        plan.state_shape()
    } else {
        plan.output_shape()
    };
    check_shape(op, what, out, &out_shape)?;
    if step && dout.dh_n.is_some() {
        return Err(Error::invalid(
            op,
            "a cell step's h gradient is dy; pass no dh_n",
        ));
    }
    // The gradients before the reserve: a backend's reserve size can follow
    // from the operands (cuDNN's weight space has the biases or not), and a
    // gradient asked for that the operands do not have is the error to name.
    check_grads(op, be, &plan, args, dout, grads, step)?;
    let reserve_shape = Shape::new([be.lstm_reserve_len(&plan)?])?;
    check_shape(op, "reserve", reserve, &reserve_shape)?;
    Ok(plan)
}

/// One LSTM step from `x [B, F]` and the state `h0`, `c0` (zeros if absent):
/// writes the new `h` into `out.y`, the new `c` into `out.c_n` (`out.h_n` must
/// be `None`), and the reserve for [`lstm_cell_backward`].
pub fn lstm_cell(be: &dyn Backend, args: &LstmArgs<'_>, out: LstmOutputs<'_>) -> Result<()> {
    let op = "lstm_cell";
    let plan = lstm_plan(op, be, args, true)?;
    check_outputs(op, be, &plan, &out, true)?;
    if out.h_n.is_some() {
        return Err(Error::invalid(
            op,
            "a cell step writes its new h into y; pass no h_n",
        ));
    }
    be.lstm_cell(&plan, args, out)
}

/// The gradients of [`lstm_cell`] (`dout.dy` is the new `h`'s gradient,
/// `dout.dc_n` the new `c`'s; `dout.dh_n` must be `None`).
pub fn lstm_cell_backward(
    be: &dyn Backend,
    args: &LstmArgs<'_>,
    h: &Tensor,
    reserve: &Tensor,
    dout: &LstmOutputGrads<'_>,
    grads: LstmGrads<'_>,
) -> Result<()> {
    let op = "lstm_cell_backward";
    let plan = backward_plan(op, be, args, ("h", h), reserve, dout, &grads, true)?;
    be.lstm_cell_backward(&plan, args, h, reserve, dout, grads)
}
