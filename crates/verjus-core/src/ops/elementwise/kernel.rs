//! What a backend sees of one elementwise op: a kernel type per op, and a
//! visitor that a backend's loop implements once for all of them.
//!
//! [`UnaryOp::specialise`](super::UnaryOp::specialise) calls the visitor with
//! the op's own kernel type (a unit struct, or one holding the op's scalar),
//! so the visitor's generic loop is compiled once per op with the formula
//! inlined: a straight loop the compiler can vectorise, with no `match` per
//! element. Adding an op to the table adds its kernel type, and every
//! backend's loop covers it without a change.

/// One unary op's formulas, from the op table.
pub trait UnaryKernel: Copy + Send + Sync {
    /// `y = f(x)`, the reference definition.
    fn apply(self, x: f32) -> f32;
    /// `f(x)` with the vectorisable functions of [`crate::math::fast`]
    /// (within a few ulp of [`UnaryKernel::apply`]); the same where the table
    /// gives no fast formula.
    fn apply_fast(self, x: f32) -> f32;
    /// `dy/dx` at `x`, given also `y = f(x)`.
    fn derivative(self, x: f32, y: f32) -> f32;
    /// [`UnaryKernel::derivative`] with the vectorisable functions.
    fn derivative_fast(self, x: f32, y: f32) -> f32;
}

/// One binary op's formulas, from the op table.
pub trait BinaryKernel: Copy + Send + Sync {
    /// `c = a op b`.
    fn apply(self, a: f32, b: f32) -> f32;
    /// `(dc/da, dc/db)` at `(a, b)`.
    fn partials(self, a: f32, b: f32) -> (f32, f32);
}

/// A computation generic over the unary op, run with the op's kernel type by
/// [`UnaryOp::specialise`](super::UnaryOp::specialise).
pub trait UnaryVisitor {
    type Output;
    fn visit<K: UnaryKernel>(self, kernel: K) -> Self::Output;
}

/// A computation generic over the binary op, run with the op's kernel type by
/// [`BinaryOp::specialise`](super::BinaryOp::specialise).
pub trait BinaryVisitor {
    type Output;
    fn visit<K: BinaryKernel>(self, kernel: K) -> Self::Output;
}

/// Where a unary op is defined and smooth, so that tests draw inputs where a
/// comparison says something about a kernel (outside, results are NaN or inf).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryDomain {
    /// Every real number.
    Real,
    /// Every real number, with a kink at 0 (relu, abs): the derivative there
    /// is a convention, so gradient checks keep away from it.
    Kink,
    /// `x > 0` (log, sqrt, rsqrt).
    Positive,
    /// `x != 0` (recip).
    NonZero,
    /// `x ^ p`: every real for a non-negative whole `p`, else `x > 0`.
    PowerBase,
}

/// Where a binary op is defined and smooth (see [`UnaryDomain`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryDomain {
    /// Every pair of reals.
    Real,
    /// `b != 0` (div).
    Divisor,
    /// `a > 0`, any `b` (pow).
    PositiveBase,
    /// Every pair, with a kink where `a == b` (max, min): tests include ties
    /// in forward and keep the operands apart in gradient checks.
    Ties,
    /// Comparisons: the interesting inputs are ties; no gradient.
    Comparison,
}

/// The form of a unary op's gradient, so that a caller keeps alive no more
/// than the gradient reads (the tape saves nothing for `neg`, `scale` and
/// `add_scalar`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryGrad {
    /// `dx = dy` (`add_scalar`): a caller that owns `dy` may hand it on as is.
    Identity,
    /// `dx = op(dy)` (`neg`, `scale`): linear, reads neither `x` nor `y`.
    Linear,
    /// `dx = dy * op'(x, y)`: reads the forward's input and output.
    Pointwise,
}
