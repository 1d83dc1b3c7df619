//! Reductions over dims, masked over dynamic dims: [`reduce`], [`argmax`].
//!
//! With `use_mask`, the padding of each dynamic reduced dim is filled with
//! the op's neutral value first (0 for sum, -inf for max, +inf for min), and
//! the mean divides by each sequence's own length, so a padded batch gives
//! every sequence what it would give alone. A sequence of length 0 has sum
//! and mean 0, max -inf, logsumexp -inf; nothing becomes NaN.

use crate::binary::{combine, select_into};
use crate::mask::{check_axes, masked};
use crate::{cast, Dim, RfDType, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::ops::{self, BinaryOp, ReduceOp};
use verjus_core::{DType, Error, Result, Shape};

/// How [`reduce`] combines the entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceMode {
    Sum,
    Mean,
    Max,
    Min,
    LogSumExp,
}

impl ReduceMode {
    /// The RETURNN name of the op.
    pub fn name(self) -> &'static str {
        match self {
            ReduceMode::Sum => "reduce_sum",
            ReduceMode::Mean => "reduce_mean",
            ReduceMode::Max => "reduce_max",
            ReduceMode::Min => "reduce_min",
            ReduceMode::LogSumExp => "reduce_logsumexp",
        }
    }

    /// The value the padding is filled with.
    fn fill(self) -> f32 {
        match self {
            ReduceMode::Sum | ReduceMode::Mean => 0.0,
            ReduceMode::Max | ReduceMode::LogSumExp => f32::NEG_INFINITY,
            ReduceMode::Min => f32::INFINITY,
        }
    }
}

/// `mode` over the dims `axis` of `source` (see the module docs). The
/// result has `source`'s other dims (plus the lengths' dims of a masked
/// dynamic dim that `source` lacks).
pub fn reduce(
    source: &RfTensor,
    mode: ReduceMode,
    axis: &[Dim],
    use_mask: bool,
) -> Result<RfTensor> {
    let op = mode.name();
    check_axes(op, source, axis)?;
    if source.dtype() != RfDType::Float32 {
        // Sums, maxima and minima of integers and bools: computed in float32
        // (exact below 2**24) and given back in the source's dtype.
        if matches!(mode, ReduceMode::Sum | ReduceMode::Max | ReduceMode::Min) {
            let y = reduce(&cast(source, RfDType::Float32)?, mode, axis, use_mask)?;
            return cast(&y, source.dtype());
        }
        return Err(Error::invalid(
            op,
            format!("needs a float32 tensor, got {}", source.dtype()),
        ));
    }
    let dynamic = use_mask && axis.iter().any(Dim::is_dynamic);
    let x = if dynamic {
        masked(source, axis, mode.fill())?
    } else {
        source.clone()
    };
    if mode == ReduceMode::LogSumExp {
        return logsumexp(&x, axis);
    }
    let core = match mode {
        ReduceMode::Mean if dynamic => ReduceOp::Sum,
        ReduceMode::Mean => ReduceOp::Mean,
        ReduceMode::Sum => ReduceOp::Sum,
        ReduceMode::Min => ReduceOp::Min,
        _ => ReduceOp::Max,
    };
    let y = plain(&x, core, axis)?;
    if mode == ReduceMode::Mean && dynamic {
        return divide_by_count(&x, &y, axis);
    }
    Ok(y)
}

/// `op` over `axis` without masking. Max and min over an empty axis give
/// -inf and +inf (the backends refuse an empty group).
fn plain(x: &RfTensor, op: ReduceOp, axis: &[Dim]) -> Result<RfTensor> {
    let axes: Vec<usize> = axis
        .iter()
        .map(|d| x.axis("reduce", d))
        .collect::<Result<_>>()?;
    let out: Vec<Dim> = x
        .dims()
        .iter()
        .filter(|d| !axis.contains(d))
        .cloned()
        .collect();
    let sizes = x.sizes();
    let empty = axes.iter().any(|&i| sizes[i] == 0);
    let var = if empty && matches!(op, ReduceOp::Max | ReduceOp::Min) {
        let fill = if op == ReduceOp::Max {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        };
        let shape: Vec<usize> = (0..sizes.len())
            .filter(|i| !axes.contains(i))
            .map(|i| sizes[i])
            .collect();
        full(x.var(), &Shape::new(shape)?, fill)?
    } else {
        x.var().reduce(op, &axes, false)?
    };
    Ok(x.with_value(var, out))
}

/// A float32 constant of `shape` filled with `value`, on `like`'s backend.
fn full(like: &Var, shape: &Shape, value: f32) -> Result<Var> {
    let be = like.backend();
    let mut t = ops::output(&**be, shape, DType::F32)?;
    ops::fill(&**be, &mut t, value as f64)?;
    Var::constant(t, be.clone())
}

/// `sum / count`, `count` the number of valid entries per output element:
/// the product of the lengths of the dynamic dims, summed over the lengths'
/// own dims where those are reduced too (the batch, when reducing over
/// `[batch, time]`), times the sizes in `x` of the other reduced dims; at
/// least 1 (a zero-length sequence's mean is 0, not NaN).
fn divide_by_count(x: &RfTensor, sum: &RfTensor, axis: &[Dim]) -> Result<RfTensor> {
    let mut count: Option<RfTensor> = None;
    for l in axis.iter().filter_map(Dim::lengths) {
        count = Some(match count {
            None => l.clone(),
            Some(c) => combine(&c, BinaryOp::Mul, &l, true)?,
        })
    }
    let Some(count) = count else {
        return Err(Error::invalid("reduce_mean", "no dynamic dim to divide by"));
    };
    let c = crate::binary::float_var(count.var().clone(), count.dtype())?;
    let count = RfTensor::from_parts(c, count.dims().to_vec(), RfDType::Float32);
    let summed: Vec<Dim> = count
        .dims()
        .iter()
        .filter(|d| axis.contains(d))
        .cloned()
        .collect();
    let count = if summed.is_empty() {
        count
    } else {
        plain(&count, ReduceOp::Sum, &summed)?
    };
    let sizes = x.sizes();
    let mut fixed = 1.0f64;
    for d in axis {
        if d.lengths().is_none() && !summed.contains(d) {
            fixed *= sizes[x.axis("reduce_mean", d)?] as f64;
        }
    }
    let mut c = count.var().clone();
    if fixed != 1.0 {
        c = c.scale(fixed as f32)?;
    }
    let c = c.maximum(&full(&c, &Shape::scalar(), 1.0)?)?;
    let count = RfTensor::from_parts(c, count.dims().to_vec(), RfDType::Float32);
    combine(sum, BinaryOp::Div, &count, false)
}

/// `log(sum(exp(x)))` over `axis` (already masked with -inf), stable: the
/// maximum is subtracted first, and where it is -inf (an empty or fully
/// masked group) 0 is subtracted instead, so the result is -inf, not NaN.
fn logsumexp(x: &RfTensor, axis: &[Dim]) -> Result<RfTensor> {
    let m = plain(x, ReduceOp::Max, axis)?;
    let m = m.with_value(m.var().detach(), m.dims().to_vec());
    let ninf = RfTensor::scalar(f32::NEG_INFINITY, x.backend())?;
    let finite = combine(&m, BinaryOp::Gt, &ninf, false)?;
    let zero = RfTensor::scalar(0.0, x.backend())?;
    let shift = select_into(m.dims().to_vec(), &finite, &m, &zero)?;
    let centered = combine(x, BinaryOp::Sub, &shift, false)?;
    let e = centered.with_value(centered.var().exp()?, centered.dims().to_vec());
    let s = plain(&e, ReduceOp::Sum, axis)?;
    let l = s.with_value(s.var().log()?, s.dims().to_vec());
    combine(&l, BinaryOp::Add, &shift, false)
}

/// The index of the maximum along `axis` (int64, `sparse_dim = axis`); with
/// `use_mask` the padding of a dynamic `axis` never wins. An empty axis
/// gives 0.
pub fn argmax(source: &RfTensor, axis: &Dim, use_mask: bool) -> Result<RfTensor> {
    check_axes("argmax", source, std::slice::from_ref(axis))?;
    let x = if use_mask && axis.is_dynamic() {
        masked(source, std::slice::from_ref(axis), f32::NEG_INFINITY)?
    } else {
        source.clone()
    };
    let i = x.axis("argmax", axis)?;
    let value = x.var().value();
    let mut shape = value.dims().to_vec();
    let len = shape.remove(i);
    let be = x.backend();
    let mut y = ops::zeros(&**be, &Shape::new(shape)?, DType::I64)?;
    if len > 0 {
        ops::argmax(&**be, &value, i, &mut y)?;
    }
    let out: Vec<Dim> = x.dims().iter().filter(|d| *d != axis).cloned().collect();
    RfTensor::from_parts(Var::constant(y, be.clone())?, out, RfDType::Int64)
        .with_sparse_dim(Some(axis.clone()))
}
