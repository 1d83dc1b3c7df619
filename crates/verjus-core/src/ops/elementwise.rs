//! Elementwise unary ops and broadcasting binary ops, with their derivatives.
//!
//! The scalar definitions (`UnaryOp::apply`, `UnaryOp::derivative`,
//! `BinaryOp::apply`, `BinaryOp::partials`) are the reference every backend must
//! match (the conformance suite checks it). The native backend uses them directly
//! except for exp, log, tanh, sigmoid and GELU, which it evaluates with
//! vectorised polynomials within about 3e-7 relative; the CUDA kernels port them.

use super::{check_f32_on, check_shape};
use crate::{Backend, Error, Result, Shape, Tensor};

/// An elementwise function of one tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    Neg,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Abs,
    Square,
    Recip,
    Relu,
    Sigmoid,
    Tanh,
    /// The exact GELU, `x * Phi(x)` (PyTorch's default).
    Gelu,
    /// `x * s`.
    Scale(f32),
    /// `x + s`.
    AddScalar(f32),
    /// `x ^ p`.
    Powf(f32),
}

impl UnaryOp {
    /// The op's name for messages.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Square => "square",
            UnaryOp::Recip => "recip",
            UnaryOp::Relu => "relu",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Scale(_) => "scale",
            UnaryOp::AddScalar(_) => "add_scalar",
            UnaryOp::Powf(_) => "powf",
        }
    }

    /// `y = f(x)`.
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => 1.0 / x.sqrt(),
            UnaryOp::Abs => x.abs(),
            UnaryOp::Square => x * x,
            UnaryOp::Recip => 1.0 / x,
            // Not `x.max(0.0)`, which turns NaN into 0: NaN passes through, as in
            // PyTorch, so a NaN input shows in the loss instead of vanishing.
            UnaryOp::Relu => {
                if x < 0.0 {
                    0.0
                } else {
                    x
                }
            }
            UnaryOp::Sigmoid => sigmoid(x),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Gelu => {
                0.5 * x * (1.0 + crate::math::erf(x * std::f32::consts::FRAC_1_SQRT_2))
            }
            UnaryOp::Scale(s) => x * s,
            UnaryOp::AddScalar(s) => x + s,
            UnaryOp::Powf(p) => x.powf(p),
        }
    }

    /// `dy/dx` at `x`, given also `y = f(x)` (cheaper for exp, sigmoid, tanh).
    #[inline]
    pub fn derivative(self, x: f32, y: f32) -> f32 {
        match self {
            UnaryOp::Neg => -1.0,
            UnaryOp::Exp => y,
            UnaryOp::Log => 1.0 / x,
            UnaryOp::Sqrt => 0.5 / y,
            UnaryOp::Rsqrt => -0.5 * y / x,
            UnaryOp::Abs => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            UnaryOp::Square => 2.0 * x,
            UnaryOp::Recip => -y * y,
            UnaryOp::Relu => {
                if x > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            UnaryOp::Sigmoid => y * (1.0 - y),
            UnaryOp::Tanh => 1.0 - y * y,
            UnaryOp::Gelu => {
                let cdf = 0.5 * (1.0 + crate::math::erf(x * std::f32::consts::FRAC_1_SQRT_2));
                let pdf = (-0.5 * x * x).exp() * 0.398_942_3;
                cdf + x * pdf
            }
            UnaryOp::Scale(s) => s,
            UnaryOp::AddScalar(_) => 1.0,
            UnaryOp::Powf(p) => p * x.powf(p - 1.0),
        }
    }
}

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

/// An elementwise function of two broadcast tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    /// `a ^ b` (a > 0 for a gradient wrt b).
    Pow,
    /// Comparisons give 1.0 where true and 0.0 where false; they have no gradient.
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinaryOp {
    /// The op's name for messages.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Max => "maximum",
            BinaryOp::Min => "minimum",
            BinaryOp::Pow => "pow",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
        }
    }

    /// Whether the op has a gradient (comparisons do not).
    pub fn is_differentiable(self) -> bool {
        !matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }

    /// `c = a op b`.
    #[inline]
    pub fn apply(self, a: f32, b: f32) -> f32 {
        let flag = |t: bool| if t { 1.0 } else { 0.0 };
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Max => a.max(b),
            BinaryOp::Min => a.min(b),
            BinaryOp::Pow => a.powf(b),
            BinaryOp::Eq => flag(a == b),
            BinaryOp::Ne => flag(a != b),
            BinaryOp::Lt => flag(a < b),
            BinaryOp::Le => flag(a <= b),
            BinaryOp::Gt => flag(a > b),
            BinaryOp::Ge => flag(a >= b),
        }
    }

    /// `(dc/da, dc/db)` at `(a, b)`. For max/min a tie sends the gradient to `a`.
    #[inline]
    pub fn partials(self, a: f32, b: f32) -> (f32, f32) {
        match self {
            BinaryOp::Add => (1.0, 1.0),
            BinaryOp::Sub => (1.0, -1.0),
            BinaryOp::Mul => (b, a),
            BinaryOp::Div => (1.0 / b, -a / (b * b)),
            BinaryOp::Max => {
                if a >= b {
                    (1.0, 0.0)
                } else {
                    (0.0, 1.0)
                }
            }
            BinaryOp::Min => {
                if a <= b {
                    (1.0, 0.0)
                } else {
                    (0.0, 1.0)
                }
            }
            BinaryOp::Pow => {
                let c = a.powf(b);
                let db = if a > 0.0 { c * a.ln() } else { 0.0 };
                (b * a.powf(b - 1.0), db)
            }
            _ => (0.0, 0.0),
        }
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
