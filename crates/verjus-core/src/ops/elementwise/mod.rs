//! Elementwise unary ops and broadcasting binary ops, with their derivatives.
//!
//! Every op is declared once, in [`table`](self::table): its formula, its
//! derivative, its vectorisable and CUDA C forms. The scalar definitions
//! generated from it (`UnaryOp::apply`, `UnaryOp::derivative`,
//! `BinaryOp::apply`, `BinaryOp::partials`) are the reference every backend must
//! match (the conformance suite checks it, for every op of the table). The
//! native backend runs the same formulas through [`UnaryOp::specialise`] (the
//! vectorisable `fast` ones where the table gives them, within about 3e-7
//! relative); the CUDA backend compiles the table's CUDA C forms.

#[macro_use]
mod declare;
mod kernel;
mod table;

pub use kernel::{
    BinaryDomain, BinaryKernel, BinaryVisitor, UnaryDomain, UnaryGrad, UnaryKernel, UnaryVisitor,
};
pub use table::{binary_kernels, unary_kernels, BinaryOp, UnaryOp};

use super::{check_f32_on, check_shape};
use crate::{Backend, Error, Result, Shape, Tensor};

/// The logistic function, stable for large |x|.
#[inline]
pub fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// Validated shapes of a broadcasting binary op.
#[derive(Clone, Debug, PartialEq)]
pub struct BinaryPlan {
    pub op: BinaryOp,
    /// The broadcast output shape.
    pub out: Shape,
    pub a: Shape,
    pub b: Shape,
    /// Strides of `a` over the output's axes (0 where `a` is broadcast).
    pub a_strides: Vec<usize>,
    /// Strides of `b` over the output's axes (0 where `b` is broadcast).
    pub b_strides: Vec<usize>,
}

impl BinaryPlan {
    /// Broadcasts `a` and `b` (NumPy rules).
    pub fn new(op: BinaryOp, a: &Shape, b: &Shape) -> Result<Self> {
        let out = Shape::broadcast(op.name(), a, b)?;
        Ok(BinaryPlan {
            op,
            a_strides: broadcast_strides(a, &out),
            b_strides: broadcast_strides(b, &out),
            out,
            a: a.clone(),
            b: b.clone(),
        })
    }
}

/// Strides of `s` over the axes of `out`, zero on broadcast axes.
pub fn broadcast_strides(s: &Shape, out: &Shape) -> Vec<usize> {
    let own = s.strides();
    let offset = out.rank() - s.rank();
    (0..out.rank())
        .map(|i| {
            if i < offset || s.dims()[i - offset] == 1 {
                0
            } else {
                own[i - offset]
            }
        })
        .collect()
}

/// `y = op(x)`.
pub fn unary(be: &dyn Backend, op: UnaryOp, x: &Tensor, y: &mut Tensor) -> Result<()> {
    check_f32_on(op.name(), be, &[("x", x), ("y", y)])?;
    check_shape(op.name(), "y", y, x.shape())?;
    be.unary(op, x, y)
}

/// `dx = dy * op'(x)`, given the forward input `x` and output `y`.
pub fn unary_backward(
    be: &dyn Backend,
    op: UnaryOp,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let name = format!("{}_backward", op.name());
    check_f32_on(&name, be, &[("x", x), ("y", y), ("dy", dy), ("dx", dx)])?;
    for (what, t) in [("y", y), ("dy", dy)] {
        check_shape(&name, what, t, x.shape())?;
    }
    check_shape(&name, "dx", dx, x.shape())?;
    be.unary_backward(op, x, y, dy, dx)
}

/// `c = a op b` with NumPy broadcasting.
pub fn binary(
    be: &dyn Backend,
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    c: &mut Tensor,
) -> Result<()> {
    let plan = BinaryPlan::new(op, a.shape(), b.shape())?;
    check_f32_on(op.name(), be, &[("a", a), ("b", b), ("c", c)])?;
    check_shape(op.name(), "c", c, &plan.out)?;
    be.binary(&plan, a, b, c)
}

/// Gradients of `c = a op b`: `da` and `db` (each optional) receive `dy` times the
/// partial derivative, summed over the axes along which that operand was broadcast.
pub fn binary_backward(
    be: &dyn Backend,
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    dy: &Tensor,
    da: Option<&mut Tensor>,
    db: Option<&mut Tensor>,
) -> Result<()> {
    let name = format!("{}_backward", op.name());
    if !op.is_differentiable() {
        return Err(Error::invalid(name, "comparison ops have no gradient"));
    }
    let plan = BinaryPlan::new(op, a.shape(), b.shape())?;
    check_f32_on(&name, be, &[("a", a), ("b", b), ("dy", dy)])?;
    check_shape(&name, "dy", dy, &plan.out)?;
    if let Some(da) = &da {
        check_f32_on(&name, be, &[("da", da)])?;
        check_shape(&name, "da", da, a.shape())?;
    }
    if let Some(db) = &db {
        check_f32_on(&name, be, &[("db", db)])?;
        check_shape(&name, "db", db, b.shape())?;
    }
    be.binary_backward(&plan, a, b, dy, da, db)
}
