//! [`lstm`]: RETURNN's `rf.LSTM` computation by dims, on the fused core ops.
//!
//! RETURNN's LSTM keeps PyTorch's gate order (i, f, g, o) with one bias:
//! `ff_weight [4*out_dim, in_dim]`, `rec_weight [4*out_dim, out_dim]`,
//! `bias [4*out_dim]`. Its torch backend splits the bias as `0.5 * bias` into
//! both of PyTorch's biases; the sum is the same as `b_ih = bias, b_hh = 0`,
//! and so is the bias's gradient, which is what runs here (the zero `b_hh` is
//! a constant, so no gradient is computed for it).
//!
//! The source's dims other than `spatial_dim` and `in_dim` are its batch
//! dims, merged into one batch axis: the source goes to `[T, B, F]`
//! (time-major, a copy only when the order differs), a dynamic
//! `spatial_dim`'s lengths to int32 `[B]` (broadcast over batch dims they do
//! not have), and the core's `lstm_sequence` runs each sequence to its own
//! length (padding frames output 0, the final state is each sequence's at
//! its last frame). With [`single_step_dim`](crate::single_step_dim) it runs
//! one `lstm_cell` step instead.

use crate::{cast, combine, fmt_dims, single_step_dim, Dim, RfDType, RfTensor};
use verjus_core::autograd::{LstmVars, Var};
use verjus_core::ops::{self, BinaryOp};
use verjus_core::{Error, Result, Shape};

/// The parameters of an LSTM, in RETURNN's names and layout (see the module
/// docs): `ff_weight` over `{gates, in_dim}`, `rec_weight` over
/// `{gates, out_dim}`, `bias` over `{gates}`, where `gates` is a dim of size
/// `4 * out_dim`; any axis order.
#[derive(Clone, Debug)]
pub struct LstmParams<'a> {
    pub ff_weight: &'a RfTensor,
    pub rec_weight: &'a RfTensor,
    pub bias: Option<&'a RfTensor>,
    pub in_dim: &'a Dim,
    pub out_dim: &'a Dim,
}

/// Runs the LSTM over `spatial_dim` of `source` (or one step for
/// [`single_step_dim`](crate::single_step_dim)) from the state `h`, `c`
/// (over the batch dims and `out_dim`; batch dims they lack are broadcast).
/// Returns `(out, h, c)`: `out` over `[spatial_dim, batch dims..., out_dim]`
/// (`[batch dims..., out_dim]` for one step), the new state over
/// `[batch dims..., out_dim]`, all with feature dim `out_dim`.
pub fn lstm(
    source: &RfTensor,
    h: &RfTensor,
    c: &RfTensor,
    p: &LstmParams<'_>,
    spatial_dim: &Dim,
) -> Result<(RfTensor, RfTensor, RfTensor)> {
    let op = "lstm";
    let step = *spatial_dim == single_step_dim();
    source.axis(op, p.in_dim)?;
    if !step {
        source.axis(op, spatial_dim)?;
    }
    if source.dtype() != RfDType::Float32 {
        return Err(Error::invalid(
            op,
            format!("source must be float32, got {}", source.dtype()),
        ));
    }
    let batch: Vec<Dim> = source
        .dims()
        .iter()
        .filter(|d| *d != spatial_dim && *d != p.in_dim)
        .cloned()
        .collect();
    let sizes = source.sizes();
    let size_of = |d: &Dim| sizes[source.axis_of(d).unwrap_or(0)];
    let b: usize = batch.iter().map(size_of).product();
    let f = size_of(p.in_dim);
    let hidden = p
        .out_dim
        .static_size()
        .ok_or_else(|| Error::invalid(op, format!("out_dim {:?} must be static", p.out_dim)))?;
    let gates = gates_dim(p)?;
    let w_ih = p
        .ff_weight
        .copy_transpose(&[gates.clone(), p.in_dim.clone()])?;
    let w_hh = p
        .rec_weight
        .copy_transpose(&[gates.clone(), p.out_dim.clone()])?;
    let be = source.backend();
    let (b_ih, b_hh) = match p.bias {
        Some(bias) => {
            let zeros = ops::zeros(&**be, &Shape::new([4 * hidden])?, bias.var().dtype())?;
            (
                Some(bias.var().clone()),
                Some(Var::constant(zeros, be.clone())?),
            )
        }
        None => (None, None),
    };
    let mut state_dims = batch.clone();
    state_dims.push(p.out_dim.clone());
    let mut state_shape: Vec<usize> = batch.iter().map(size_of).collect();
    state_shape.push(hidden);
    let h0 = state(op, "h", h, &state_dims, &state_shape)?.reshape([b, hidden])?;
    let c0 = state(op, "c", c, &state_dims, &state_shape)?.reshape([b, hidden])?;
    let weights = |x, lengths| LstmVars {
        x,
        lengths,
        h0: Some(&h0),
        c0: Some(&c0),
        w_ih: w_ih.var(),
        w_hh: w_hh.var(),
        b_ih: b_ih.as_ref(),
        b_hh: b_hh.as_ref(),
    };
    let wrap = |var: Var, dims: Vec<Dim>| -> Result<RfTensor> {
        RfTensor::new(var, dims, RfDType::Float32)?.with_feature_dim(Some(p.out_dim.clone()))
    };
    if step {
        let mut order = batch.clone();
        order.push(p.in_dim.clone());
        let x = source.copy_transpose(&order)?.var().reshape([b, f])?;
        let (h1, c1) = Var::lstm_cell(&weights(&x, None))?;
        let out = wrap(h1.reshape(state_shape.clone())?, state_dims.clone())?;
        let c1 = wrap(c1.reshape(state_shape)?, state_dims)?;
        return Ok((out.clone(), out, c1));
    }
    let t = size_of(spatial_dim);
    let mut order = vec![spatial_dim.clone()];
    order.extend(batch.iter().cloned());
    order.push(p.in_dim.clone());
    let x = source.copy_transpose(&order)?.var().reshape([t, b, f])?;
    let lengths = match spatial_dim.lengths() {
        Some(l) => Some(
            lengths_over(op, spatial_dim, &l, &batch, &state_shape[..batch.len()])?.reshape([b])?,
        ),
        None => None,
    };
    let (y, h1, c1) = Var::lstm_sequence(&weights(&x, lengths.as_ref()))?;
    let mut out_dims = vec![spatial_dim.clone()];
    out_dims.extend(state_dims.iter().cloned());
    let mut out_shape = vec![t];
    out_shape.extend(&state_shape);
    let out = wrap(y.reshape(out_shape)?, out_dims)?;
    let h1 = wrap(h1.reshape(state_shape.clone())?, state_dims.clone())?;
    let c1 = wrap(c1.reshape(state_shape)?, state_dims)?;
    Ok((out, h1, c1))
}

/// The dim of size `4 * out_dim` that the weights and the bias share:
/// `ff_weight`'s dim other than `in_dim`, checked against the others.
fn gates_dim(p: &LstmParams<'_>) -> Result<Dim> {
    let op = "lstm";
    let two_dims = |what: &str, w: &RfTensor, other: &Dim| -> Result<Dim> {
        let d = w.dims();
        if d.len() == 2 && d.contains(other) && d[0] != d[1] {
            Ok(if d[0] == *other { &d[1] } else { &d[0] }.clone())
        } else {
            Err(Error::invalid(
                op,
                format!(
                    "{what} must be over [4*{other}, {other}], got {}",
                    fmt_dims(d)
                ),
            ))
        }
    };
    let gates = two_dims("ff_weight", p.ff_weight, p.in_dim)?;
    let rec = two_dims("rec_weight", p.rec_weight, p.out_dim)?;
    if rec != gates {
        return Err(Error::invalid(
            op,
            format!(
                "ff_weight {} and rec_weight {} must share their gates dim",
                fmt_dims(p.ff_weight.dims()),
                fmt_dims(p.rec_weight.dims())
            ),
        ));
    }
    if let Some(bias) = p.bias {
        if bias.dims() != std::slice::from_ref(&gates) {
            return Err(Error::invalid(
                op,
                format!(
                    "bias must be over the weights' gates dim [{gates}], got {}",
                    fmt_dims(bias.dims())
                ),
            ));
        }
    }
    Ok(gates)
}

/// The state `t` (`what` is `h` or `c`) as a value over `dims` (the batch
/// dims, then `out_dim`) of sizes `shape`, broadcast over batch dims it lacks.
fn state(op: &str, what: &str, t: &RfTensor, dims: &[Dim], shape: &[usize]) -> Result<Var> {
    let out_dim = &dims[dims.len() - 1];
    if let Some(bad) = t.dims().iter().find(|d| !dims.contains(d)) {
        return Err(Error::invalid(
            op,
            format!(
                "state {what} {} has dim {bad}, which is neither a batch dim of the source nor out_dim (expected dims among {})",
                fmt_dims(t.dims()),
                fmt_dims(dims),
            ),
        ));
    }
    if t.axis_of(out_dim).is_none() {
        return Err(Error::invalid(
            op,
            format!(
                "state {what} {} lacks out_dim {out_dim}",
                fmt_dims(t.dims())
            ),
        ));
    }
    if t.dtype() != RfDType::Float32 {
        return Err(Error::invalid(
            op,
            format!("state {what} must be float32, got {}", t.dtype()),
        ));
    }
    broadcast(t, dims, shape)
}

/// The lengths of `spatial_dim` as int32 over `batch` (sizes `shape`, in
/// that order), broadcast over batch dims they lack.
pub(crate) fn lengths_over(
    op: &str,
    spatial_dim: &Dim,
    lengths: &RfTensor,
    batch: &[Dim],
    shape: &[usize],
) -> Result<Var> {
    if let Some(bad) = lengths.dims().iter().find(|d| !batch.contains(d)) {
        return Err(Error::invalid(
            op,
            format!(
                "the lengths of {spatial_dim} are over {}, but {bad} is not a batch dim of the source {}",
                fmt_dims(lengths.dims()),
                fmt_dims(batch)
            ),
        ));
    }
    broadcast(&cast(lengths, RfDType::Int32)?, batch, shape)
}

/// `t` (over some of `dims`) as a value over `dims` of sizes `shape`: a
/// transpose when it has them all, else added to zeros of its dtype over
/// `dims` (the sizes of dims such as the batch come from `shape`).
fn broadcast(t: &RfTensor, dims: &[Dim], shape: &[usize]) -> Result<Var> {
    if t.dims().len() == dims.len() {
        return Ok(t.copy_transpose(dims)?.var().clone());
    }
    let be = t.backend();
    let zeros = ops::zeros(&**be, &Shape::new(shape.to_vec())?, t.var().dtype())?;
    let zeros = RfTensor::new(Var::constant(zeros, be.clone())?, dims.to_vec(), t.dtype())?;
    Ok(combine(&zeros, BinaryOp::Add, t, true)?.var().clone())
}
