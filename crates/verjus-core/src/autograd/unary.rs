//! Elementwise unary ops: activations, `exp`/`log`/`sqrt`/..., and the scalar
//! ops `neg`, `scale`, `add_scalar`, `powf`.

use super::alloc;
use super::node::BackwardFn;
use super::record::{Reads, Saves};
use super::saved::Saved;
use super::var::Var;
use crate::grad;
use crate::ops::{self, UnaryGrad, UnaryOp};
use crate::Result;
use std::sync::Arc;

impl Var {
    /// `max(x, 0)`.
    pub fn relu(&self) -> Result<Var> {
        self.unary(UnaryOp::Relu)
    }

    /// The logistic function.
    pub fn sigmoid(&self) -> Result<Var> {
        self.unary(UnaryOp::Sigmoid)
    }

    /// Hyperbolic tangent.
    pub fn tanh(&self) -> Result<Var> {
        self.unary(UnaryOp::Tanh)
    }

    /// Exact GELU, `x * Phi(x)`.
    pub fn gelu(&self) -> Result<Var> {
        self.unary(UnaryOp::Gelu)
    }

    /// `e^x`.
    pub fn exp(&self) -> Result<Var> {
        self.unary(UnaryOp::Exp)
    }

    /// Natural logarithm.
    pub fn log(&self) -> Result<Var> {
        self.unary(UnaryOp::Log)
    }

    /// Square root.
    pub fn sqrt(&self) -> Result<Var> {
        self.unary(UnaryOp::Sqrt)
    }

    /// `1 / sqrt(x)`.
    pub fn rsqrt(&self) -> Result<Var> {
        self.unary(UnaryOp::Rsqrt)
    }

    /// `|x|` (gradient 0 at 0).
    pub fn abs(&self) -> Result<Var> {
        self.unary(UnaryOp::Abs)
    }

    /// `x * x`.
    pub fn square(&self) -> Result<Var> {
        self.unary(UnaryOp::Square)
    }

    /// `1 / x`.
    pub fn recip(&self) -> Result<Var> {
        self.unary(UnaryOp::Recip)
    }

    /// `x ^ p`.
    pub fn powf(&self, p: f32) -> Result<Var> {
        self.unary(UnaryOp::Powf(p))
    }

    /// `-x`.
    pub fn neg(&self) -> Result<Var> {
        self.unary(UnaryOp::Neg)
    }

    /// `x * s`.
    pub fn scale(&self, s: f32) -> Result<Var> {
        self.unary(UnaryOp::Scale(s))
    }

    /// `x + s`.
    pub fn add_scalar(&self, s: f32) -> Result<Var> {
        self.unary(UnaryOp::AddScalar(s))
    }

    /// `op(x)` elementwise.
    pub fn unary(&self, op: UnaryOp) -> Result<Var> {
        let saves = match op.gradient_form() {
            UnaryGrad::Pointwise => Saves::own(Reads::All),
            UnaryGrad::Identity | UnaryGrad::Linear => Saves::NOTHING,
        };
        Var::record(op.name(), self.backend(), &[self], saves, move |be, xs| {
            let x = &xs[0];
            let mut y = alloc::output(be, x.shape())?;
            ops::unary(be, op, x, &mut y)?;
            let y = Arc::new(y);
            // Only what the gradient reads is saved; an identity gradient is `dy`
            // itself, handed on without a copy.
            let backward: BackwardFn = match op.gradient_form() {
                UnaryGrad::Identity => Box::new(|_, dy, _, _| Ok(vec![Some(dy)])),
                UnaryGrad::Linear => Box::new(move |be, dy, _, _| {
                    let mut dx = alloc::output(be, dy.shape())?;
                    grad::unary(be, op, None, &dy, &mut dx)?;
                    Ok(vec![Some(dx)])
                }),
                UnaryGrad::Pointwise => {
                    let y = Saved::new(y.clone());
                    Box::new(move |be, dy, inputs, _| {
                        let x = inputs.get(0)?;
                        let mut dx = alloc::output(be, x.shape())?;
                        grad::unary(be, op, Some((&x, &y)), &dy, &mut dx)?;
                        Ok(vec![Some(dx)])
                    })
                }
            };
            Ok((y, backward))
        })
    }
}
