//! Binary ops by dims: [`combine`], [`compare`], [`combine_scalar`], [`where_`].
//!
//! The output dims are the union of the operands' dims in order of
//! appearance (`a`'s, then `b`'s new ones). When neither operand has all of
//! them, both would be broadcast, which usually means a mix-up of dims; that
//! is an error naming both dim lists unless `allow_broadcast_all_sources`.
//!
//! The backends compute in float32, so integer operands are computed as
//! float32 (exact below 2^24) and the result is cast back; comparisons give
//! `bool`; `/` always gives float32; an integer to a negative integer power is
//! an error.

use crate::align::{aligned, check_sizes, union};
use crate::derive::host_i64;
use crate::{fmt_dims, RfDType, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::ops::BinaryOp;
use verjus_core::{Error, Result, Tensor};

/// The op of a RETURNN `combine` / `compare` kind (`"add"`, `"truediv"`,
/// `"less"`, `"<"`, `"logical_and"`, ...).
pub fn parse_kind(kind: &str) -> Result<BinaryOp> {
    Ok(match kind {
        "add" | "+" => BinaryOp::Add,
        "sub" | "-" => BinaryOp::Sub,
        "mul" | "*" | "logical_and" => BinaryOp::Mul,
        "truediv" | "/" => BinaryOp::Div,
        "pow" | "**" => BinaryOp::Pow,
        "maximum" | "logical_or" => BinaryOp::Max,
        "minimum" => BinaryOp::Min,
        "equal" | "==" => BinaryOp::Eq,
        "not_equal" | "!=" => BinaryOp::Ne,
        "less" | "<" => BinaryOp::Lt,
        "less_equal" | "<=" => BinaryOp::Le,
        "greater" | ">" => BinaryOp::Gt,
        "greater_equal" | ">=" => BinaryOp::Ge,
        other => return Err(Error::invalid("combine", format!("unknown kind {other:?}"))),
    })
}

/// `a op b` by dims (see the module docs).
pub fn combine(
    a: &RfTensor,
    op: BinaryOp,
    b: &RfTensor,
    allow_broadcast_all_sources: bool,
) -> Result<RfTensor> {
    if a.dims() == b.dims() && a.dtype() == RfDType::Float32 && b.dtype() == RfDType::Float32 {
        return combine_same_dims(a, op, b);
    }
    let out = union(a.dims(), b.dims());
    let n = out.len();
    if n > a.dims().len() && n > b.dims().len() && !allow_broadcast_all_sources {
        return Err(Error::invalid(
            op.name(),
            format!(
                "neither operand has all output dims: {} and {} broadcast to {}; \
                 pass allow_broadcast_all_sources=True if that is meant",
                fmt_dims(a.dims()),
                fmt_dims(b.dims()),
                fmt_dims(&out)
            ),
        ));
    }
    check_sizes(op.name(), a, b)?;
    let dtype = result_dtype(op, a.dtype(), b.dtype());
    if op == BinaryOp::Pow && dtype.is_int() {
        check_integer_exponents(b)?;
    }
    let (va, vb) = (aligned(a, &out)?, aligned(b, &out)?);
    let var = float_var(va, a.dtype())?.binary(op, &float_var(vb, b.dtype())?)?;
    let var = from_float(var, dtype)?;
    let base = if a.dims().len() == n || b.dims().len() != n {
        a
    } else {
        b
    };
    let result = finish(base, var, out, dtype);
    if dtype.is_int() {
        return result.with_sparse_dim(result_sparse_dim(a, b));
    }
    Ok(result)
}

/// The sparse dim of an integer result, as RETURNN's `res_sparse_dim`: the
/// one operand's that has one, or the one both have.
fn result_sparse_dim(a: &RfTensor, b: &RfTensor) -> Option<crate::Dim> {
    match (a.sparse_dim(), b.sparse_dim()) {
        (Some(d), None) | (None, Some(d)) => Some(d.clone()),
        (Some(x), Some(y)) if x == y => Some(x.clone()),
        _ => None,
    }
}

/// `a op s` (or `s op a`) for a number written as a float (Python's `2.0`):
/// as in RETURNN, a float makes the result float32 even when its value is
/// integral, so an integer `a` is cast first (`labels * 2.0` is float32,
/// `labels * 2` stays int32).
pub fn combine_float_scalar(
    a: &RfTensor,
    op: BinaryOp,
    s: f64,
    scalar_first: bool,
) -> Result<RfTensor> {
    if a.dtype().is_int() {
        return combine_scalar(&crate::cast(a, RfDType::Float32)?, op, s, scalar_first);
    }
    combine_scalar(a, op, s, scalar_first)
}

/// An integer power stays an integer only for exponents from 0 up: `2 ** -1`
/// is 0.5, which the integer result would truncate to 0 without a word. A
/// negative exponent is an error instead, as in PyTorch.
fn check_integer_exponents(exponents: &RfTensor) -> Result<()> {
    match host_i64(exponents)?.into_iter().find(|&e| e < 0) {
        None => Ok(()),
        Some(e) => Err(Error::invalid(
            "pow",
            format!(
                "an integer to the negative integer power {e} is not an integer; \
                 cast to float32 first"
            ),
        )),
    }
}

/// [`combine`] of float32 operands with the same dims in the same order (the
/// common case, e.g. a residual `x + f(x)`): nothing to align or cast, so
/// the op runs directly on the values (measured in Rust on `[8, 32]`: the
/// general path's bookkeeping was about a quarter of the op's cost).
fn combine_same_dims(a: &RfTensor, op: BinaryOp, b: &RfTensor) -> Result<RfTensor> {
    check_sizes(op.name(), a, b)?;
    let var = a.var().binary(op, b.var())?;
    let dtype = result_dtype(op, RfDType::Float32, RfDType::Float32);
    Ok(finish(a, var, a.dims().to_vec(), dtype))
}

/// [`combine`] for a comparison (`==`, `<`, ...), giving `bool`.
pub fn compare(
    a: &RfTensor,
    op: BinaryOp,
    b: &RfTensor,
    allow_broadcast_all_sources: bool,
) -> Result<RfTensor> {
    if op.is_differentiable() {
        return Err(Error::invalid(
            "compare",
            format!("{} is not a comparison", op.name()),
        ));
    }
    combine(a, op, b, allow_broadcast_all_sources)
}

/// `a op s` (or `s op a` when `scalar_first`) for a Python number `s`.
/// Float32 `+ - * /` and `** s` run as one scalar op, without a second tensor.
pub fn combine_scalar(a: &RfTensor, op: BinaryOp, s: f64, scalar_first: bool) -> Result<RfTensor> {
    if a.dtype() == RfDType::Float32 {
        let (v, f) = (a.var(), s as f32);
        let fast = match (op, scalar_first) {
            (BinaryOp::Add, _) => Some(v.add_scalar(f)),
            (BinaryOp::Sub, false) => Some(v.add_scalar(-f)),
            (BinaryOp::Sub, true) => Some(v.neg().and_then(|n| n.add_scalar(f))),
            (BinaryOp::Mul, _) => Some(v.scale(f)),
            (BinaryOp::Div, false) => Some(v.scale(1.0 / f)),
            (BinaryOp::Div, true) => Some(v.recip().and_then(|r| r.scale(f))),
            (BinaryOp::Pow, false) => Some(v.powf(f)),
            _ => None,
        };
        if let Some(var) = fast {
            return Ok(a.with_value(var?, a.dims().to_vec()));
        }
    }
    let value = if a.dtype().is_int() && s.fract() == 0.0 {
        match a.dtype() {
            RfDType::Int32 => Tensor::from_vec(Vec::new(), vec![s as i32])?,
            _ => Tensor::from_vec(Vec::new(), vec![s as i64])?,
        }
    } else {
        Tensor::from_vec(Vec::new(), vec![s as f32])?
    };
    let scalar = RfTensor::from_tensor(value, Vec::new(), None, a.backend().clone(), false)?;
    if scalar_first {
        combine(&scalar, op, a, false)
    } else {
        combine(a, op, &scalar, false)
    }
}

/// `where(cond, x, y)` by dims: the union of the three dims lists (order of
/// appearance: cond, x, y); one operand must have all of them unless
/// `allow_broadcast_all_sources`. The unchosen value is never read.
pub fn where_(
    cond: &RfTensor,
    x: &RfTensor,
    y: &RfTensor,
    allow_broadcast_all_sources: bool,
) -> Result<RfTensor> {
    let out = union(&union(cond.dims(), x.dims()), y.dims());
    let full = [cond, x, y].iter().any(|t| t.dims().len() == out.len());
    if !full && !allow_broadcast_all_sources {
        return Err(Error::invalid(
            "where",
            format!(
                "no operand has all output dims: cond {}, true {}, false {}; \
                 pass allow_broadcast_all_sources=True if that is meant",
                fmt_dims(cond.dims()),
                fmt_dims(x.dims()),
                fmt_dims(y.dims())
            ),
        ));
    }
    select_into(out, cond, x, y)
}

/// `where(cond, x, y)` with output dims `out` (a superset of all three).
pub(crate) fn select_into(
    out: Vec<crate::Dim>,
    cond: &RfTensor,
    x: &RfTensor,
    y: &RfTensor,
) -> Result<RfTensor> {
    check_sizes("where", cond, x)?;
    check_sizes("where", x, y)?;
    check_sizes("where", cond, y)?;
    let dtype = if x.dtype() == y.dtype() {
        x.dtype()
    } else {
        RfDType::Float32
    };
    let c = float_var(aligned(cond, &out)?, cond.dtype())?;
    let vx = float_var(aligned(x, &out)?, x.dtype())?;
    let vy = float_var(aligned(y, &out)?, y.dtype())?;
    let var = from_float(Var::select(&c, &vx, &vy)?, dtype)?;
    let result = finish(x, var, out, dtype);
    // As RETURNN: the true value's sparse dim, else the false value's (an int
    // State keeps its class dim when finished entries are masked).
    match x.sparse_dim().or(y.sparse_dim()) {
        Some(sparse) if dtype.is_int() => result.with_sparse_dim(Some(sparse.clone())),
        _ => Ok(result),
    }
}

/// The dtype of `a op b`.
fn result_dtype(op: BinaryOp, a: RfDType, b: RfDType) -> RfDType {
    use RfDType::*;
    let logical =
        a == Bool && b == Bool && matches!(op, BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min);
    if !op.is_differentiable() || logical {
        Bool
    } else if a.is_int() && b.is_int() && op != BinaryOp::Div {
        if a == b {
            a
        } else {
            Int64
        }
    } else {
        Float32
    }
}

/// `var` (of user dtype `dtype`) as float32 storage: integers are cast.
pub(crate) fn float_var(var: Var, dtype: RfDType) -> Result<Var> {
    if !dtype.is_int() {
        return Ok(var);
    }
    cast_var(&var, verjus_core::DType::F32)
}

/// A float32 result as `dtype` storage (integers cast back).
pub(crate) fn from_float(var: Var, dtype: RfDType) -> Result<Var> {
    if dtype.is_int() {
        cast_var(&var, dtype.storage())
    } else {
        Ok(var)
    }
}

/// `var` converted to `to` storage: a constant (no gradient through a cast
/// to or from integers).
pub(crate) fn cast_var(var: &Var, to: verjus_core::DType) -> Result<Var> {
    let be = var.backend();
    let value = var.value();
    let mut out = verjus_core::ops::output(&**be, value.shape(), to)?;
    verjus_core::ops::cast(&**be, &value, &mut out)?;
    Var::constant(out, be.clone())
}

/// The result tensor, with `base`'s feature dim when still present.
fn finish(base: &RfTensor, var: Var, dims: Vec<crate::Dim>, dtype: RfDType) -> RfTensor {
    RfTensor::from_parts(var, dims, dtype).keep_feature_dim(base)
}
