//! The elementwise op table: every unary and binary op, declared once.
//!
//! Each entry gives the op's name, the domain tests draw inputs from, its
//! relative cost, its formula and derivative in Rust (the reference every
//! backend must match), optionally a `fast` formula with the vectorisable
//! functions of [`crate::math::fast`] (the native backend's loops use it), and
//! the same formulas in CUDA C (the CUDA backend writes its kernels' `switch`
//! from them). An op's code is its position here. Adding an op is adding an
//! entry: the enum variant, native loops, CUDA kernels, autograd, the
//! conformance and gradient checks all follow from it.
//!
//! Fields, for unary ops (`x` the input, `y` the output, `s` the scalar of a
//! parametrised op, `Name(s = example)`, where `example` is the value the
//! conformance suite uses):
//! `name`, `domain` ([`UnaryDomain`]), `cost` (a plain arithmetic op is 1),
//! `gradient` ([`UnaryGrad`]: what the backward reads),
//! `apply: |x| ...`, optional `fast: |x| ...`, `derivative: |x, y| ...`,
//! optional `fast_derivative: |x, y| ...`, `cuda: "..."`, `cuda_derivative: "..."`.
//! For binary ops (`a`, `b` the operands): `name`, `domain` ([`BinaryDomain`]),
//! `cost`, `differentiable`, `apply: |a, b| ...`, `partials: |a, b| (da, db)`,
//! `cuda: "..."`, `cuda_partials: ("da", "db")`.

use super::{
    sigmoid, BinaryDomain, BinaryKernel, BinaryVisitor, UnaryDomain, UnaryGrad, UnaryKernel,
    UnaryVisitor,
};
use crate::math::{erf, fast};
use std::f32::consts::FRAC_1_SQRT_2;

/// `1 / sqrt(2 pi)`, the standard normal density at 0.
const INV_SQRT_2PI: f32 = 0.398_942_3;

unary_ops! {
    /// `-x`.
    Neg {
        name: "neg",
        domain: Real,
        cost: 1,
        gradient: Linear,
        apply: |x| -x,
        derivative: |_x, _y| -1.0,
        cuda: "-x",
        cuda_derivative: "-1.0f",
    },
    /// `e^x`.
    Exp {
        name: "exp",
        domain: Real,
        cost: 4,
        gradient: Pointwise,
        apply: |x| x.exp(),
        fast: |x| fast::exp(x),
        derivative: |_x, y| y,
        cuda: "expf(x)",
        cuda_derivative: "y",
    },
    /// The natural logarithm.
    Log {
        name: "log",
        domain: Positive,
        cost: 4,
        gradient: Pointwise,
        apply: |x| x.ln(),
        fast: |x| fast::ln(x),
        derivative: |x, _y| 1.0 / x,
        cuda: "logf(x)",
        cuda_derivative: "1.0f / x",
    },
    /// `sqrt(x)`.
    Sqrt {
        name: "sqrt",
        domain: Positive,
        cost: 1,
        gradient: Pointwise,
        apply: |x| x.sqrt(),
        derivative: |_x, y| 0.5 / y,
        cuda: "sqrtf(x)",
        cuda_derivative: "0.5f / y",
    },
    /// `1 / sqrt(x)`.
    Rsqrt {
        name: "rsqrt",
        domain: Positive,
        cost: 1,
        gradient: Pointwise,
        apply: |x| 1.0 / x.sqrt(),
        derivative: |x, y| -0.5 * y / x,
        cuda: "1.0f / sqrtf(x)",
        cuda_derivative: "-0.5f * y / x",
    },
    /// `|x|` (derivative 0 at 0).
    Abs {
        name: "abs",
        domain: Kink,
        cost: 1,
        gradient: Pointwise,
        apply: |x| x.abs(),
        derivative: |x, _y| if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            0.0
        },
        cuda: "fabsf(x)",
        cuda_derivative: "x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f)",
    },
    /// `x * x`.
    Square {
        name: "square",
        domain: Real,
        cost: 1,
        gradient: Pointwise,
        apply: |x| x * x,
        derivative: |x, _y| 2.0 * x,
        cuda: "x * x",
        cuda_derivative: "2.0f * x",
    },
    /// `1 / x`.
    Recip {
        name: "recip",
        domain: NonZero,
        cost: 1,
        gradient: Pointwise,
        apply: |x| 1.0 / x,
        derivative: |_x, y| -y * y,
        cuda: "1.0f / x",
        cuda_derivative: "-y * y",
    },
    /// `max(x, 0)`, but NaN passes through (as in PyTorch; `x.max(0.0)` would
    /// turn it into 0), so a NaN input shows in the loss instead of vanishing.
    Relu {
        name: "relu",
        domain: Kink,
        cost: 1,
        gradient: Pointwise,
        apply: |x| if x < 0.0 { 0.0 } else { x },
        derivative: |x, _y| if x > 0.0 { 1.0 } else { 0.0 },
        cuda: "x < 0.0f ? 0.0f : x",
        cuda_derivative: "x > 0.0f ? 1.0f : 0.0f",
    },
    /// The logistic function `1 / (1 + e^-x)`.
    Sigmoid {
        name: "sigmoid",
        domain: Real,
        cost: 4,
        gradient: Pointwise,
        apply: |x| sigmoid(x),
        fast: |x| fast::sigmoid(x),
        derivative: |_x, y| y * (1.0 - y),
        cuda: "vj_sigmoid(x)",
        cuda_derivative: "y * (1.0f - y)",
    },
    /// `tanh(x)`.
    Tanh {
        name: "tanh",
        domain: Real,
        cost: 4,
        gradient: Pointwise,
        apply: |x| x.tanh(),
        fast: |x| fast::tanh(x),
        derivative: |_x, y| 1.0 - y * y,
        cuda: "tanhf(x)",
        cuda_derivative: "1.0f - y * y",
    },
    /// The exact GELU, `x * Phi(x)` (PyTorch's default).
    Gelu {
        name: "gelu",
        domain: Real,
        cost: 8,
        gradient: Pointwise,
        apply: |x| 0.5 * x * (1.0 + erf(x * FRAC_1_SQRT_2)),
        fast: |x| fast::gelu(x),
        derivative: |x, _y| {
            let cdf = 0.5 * (1.0 + erf(x * FRAC_1_SQRT_2));
            cdf + x * (-0.5 * x * x).exp() * INV_SQRT_2PI
        },
        fast_derivative: |x, _y| fast::gelu_derivative(x),
        cuda: "0.5f * x * (1.0f + erff(x * 0.70710678118654752440f))",
        cuda_derivative: "0.5f * (1.0f + erff(x * 0.70710678118654752440f)) + x * expf(-0.5f * x * x) * 0.3989423f",
    },
    /// `log(1 + e^x)`, computed as `max(x, 0) + log1p(e^-|x|)` so that it
    /// neither overflows for large `x` nor loses `e^x` for very negative `x`.
    Softplus {
        name: "softplus",
        domain: Real,
        cost: 8,
        gradient: Pointwise,
        apply: |x| x.max(0.0) + (-x.abs()).exp().ln_1p(),
        derivative: |x, _y| sigmoid(x),
        cuda: "fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)))",
        cuda_derivative: "vj_sigmoid(x)",
    },
    /// `log(sigmoid(x))`, computed as `min(x, 0) - log1p(e^-|x|)` (finite
    /// where `sigmoid(x)` underflows to 0).
    LogSigmoid {
        name: "log_sigmoid",
        domain: Real,
        cost: 8,
        gradient: Pointwise,
        apply: |x| x.min(0.0) - (-x.abs()).exp().ln_1p(),
        derivative: |x, _y| sigmoid(-x),
        cuda: "fminf(x, 0.0f) - log1pf(expf(-fabsf(x)))",
        cuda_derivative: "vj_sigmoid(-x)",
    },
    /// SiLU / swish, `x * sigmoid(x)`.
    Silu {
        name: "silu",
        domain: Real,
        cost: 5,
        gradient: Pointwise,
        apply: |x| x * sigmoid(x),
        fast: |x| x * fast::sigmoid(x),
        derivative: |x, _y| {
            let s = sigmoid(x);
            s * (1.0 + x * (1.0 - s))
        },
        fast_derivative: |x, _y| {
            let s = fast::sigmoid(x);
            s * (1.0 + x * (1.0 - s))
        },
        cuda: "x * vj_sigmoid(x)",
        cuda_derivative: "vj_sigmoid(x) * (1.0f + x * (1.0f - vj_sigmoid(x)))",
    },
    /// `sin(x)` (positional encodings, rotary embeddings, signal processing).
    Sin {
        name: "sin",
        domain: Real,
        cost: 6,
        gradient: Pointwise,
        apply: |x| x.sin(),
        derivative: |x, _y| x.cos(),
        cuda: "sinf(x)",
        cuda_derivative: "cosf(x)",
    },
    /// `cos(x)`.
    Cos {
        name: "cos",
        domain: Real,
        cost: 6,
        gradient: Pointwise,
        apply: |x| x.cos(),
        derivative: |x, _y| -x.sin(),
        cuda: "cosf(x)",
        cuda_derivative: "-sinf(x)",
    },
    /// `x * s`.
    Scale(s = -2.5) {
        name: "scale",
        domain: Real,
        cost: 1,
        gradient: Linear,
        apply: |x| x * s,
        derivative: |_x, _y| s,
        cuda: "x * s",
        cuda_derivative: "s",
    },
    /// `x + s`.
    AddScalar(s = 0.75) {
        name: "add_scalar",
        domain: Real,
        cost: 1,
        gradient: Identity,
        apply: |x| x + s,
        derivative: |_x, _y| 1.0,
        cuda: "x + s",
        cuda_derivative: "1.0f",
    },
    /// `x ^ s`.
    Powf(s = 3.0) {
        name: "powf",
        domain: PowerBase,
        cost: 10,
        gradient: Pointwise,
        apply: |x| x.powf(s),
        derivative: |x, _y| s * x.powf(s - 1.0),
        cuda: "powf(x, s)",
        cuda_derivative: "s * powf(x, s - 1.0f)",
    },
}

binary_ops! {
    /// `a + b`.
    Add {
        name: "add",
        domain: Real,
        cost: 1,
        differentiable: true,
        apply: |a, b| a + b,
        partials: |_a, _b| (1.0, 1.0),
        cuda: "a + b",
        cuda_partials: ("1.0f", "1.0f"),
    },
    /// `a - b`.
    Sub {
        name: "sub",
        domain: Real,
        cost: 1,
        differentiable: true,
        apply: |a, b| a - b,
        partials: |_a, _b| (1.0, -1.0),
        cuda: "a - b",
        cuda_partials: ("1.0f", "-1.0f"),
    },
    /// `a * b`.
    Mul {
        name: "mul",
        domain: Real,
        cost: 1,
        differentiable: true,
        apply: |a, b| a * b,
        partials: |a, b| (b, a),
        cuda: "a * b",
        cuda_partials: ("b", "a"),
    },
    /// `a / b`.
    Div {
        name: "div",
        domain: Divisor,
        cost: 1,
        differentiable: true,
        apply: |a, b| a / b,
        partials: |a, b| (1.0 / b, -a / (b * b)),
        cuda: "a / b",
        cuda_partials: ("1.0f / b", "-a / (b * b)"),
    },
    /// The larger operand; a tie sends the gradient to `a`.
    Max {
        name: "maximum",
        domain: Ties,
        cost: 1,
        differentiable: true,
        apply: |a, b| a.max(b),
        partials: |a, b| if a >= b { (1.0, 0.0) } else { (0.0, 1.0) },
        cuda: "fmaxf(a, b)",
        cuda_partials: ("a >= b ? 1.0f : 0.0f", "a >= b ? 0.0f : 1.0f"),
    },
    /// The smaller operand; a tie sends the gradient to `a`.
    Min {
        name: "minimum",
        domain: Ties,
        cost: 1,
        differentiable: true,
        apply: |a, b| a.min(b),
        partials: |a, b| if a <= b { (1.0, 0.0) } else { (0.0, 1.0) },
        cuda: "fminf(a, b)",
        cuda_partials: ("a <= b ? 1.0f : 0.0f", "a <= b ? 0.0f : 1.0f"),
    },
    /// `a ^ b` (`a > 0` for a gradient with respect to `b`; 0 elsewhere).
    Pow {
        name: "pow",
        domain: PositiveBase,
        cost: 10,
        differentiable: true,
        apply: |a, b| a.powf(b),
        partials: |a, b| {
            let db = if a > 0.0 { a.powf(b) * a.ln() } else { 0.0 };
            (b * a.powf(b - 1.0), db)
        },
        cuda: "powf(a, b)",
        cuda_partials: ("b * powf(a, b - 1.0f)", "a > 0.0f ? powf(a, b) * logf(a) : 0.0f"),
    },
    /// 1 where `a == b`, else 0. Comparisons have no gradient.
    Eq {
        name: "eq",
        domain: Comparison,
        cost: 1,
        differentiable: false,
        apply: |a, b| flag(a == b),
        partials: |_a, _b| (0.0, 0.0),
        cuda: "a == b ? 1.0f : 0.0f",
        cuda_partials: ("0.0f", "0.0f"),
    },
    /// 1 where `a != b`, else 0.
    Ne {
        name: "ne",
        domain: Comparison,
        cost: 1,
        differentiable: false,
        apply: |a, b| flag(a != b),
        partials: |_a, _b| (0.0, 0.0),
        cuda: "a != b ? 1.0f : 0.0f",
        cuda_partials: ("0.0f", "0.0f"),
    },
    /// 1 where `a < b`, else 0.
    Lt {
        name: "lt",
        domain: Comparison,
        cost: 1,
        differentiable: false,
        apply: |a, b| flag(a < b),
        partials: |_a, _b| (0.0, 0.0),
        cuda: "a < b ? 1.0f : 0.0f",
        cuda_partials: ("0.0f", "0.0f"),
    },
    /// 1 where `a <= b`, else 0.
    Le {
        name: "le",
        domain: Comparison,
        cost: 1,
        differentiable: false,
        apply: |a, b| flag(a <= b),
        partials: |_a, _b| (0.0, 0.0),
        cuda: "a <= b ? 1.0f : 0.0f",
        cuda_partials: ("0.0f", "0.0f"),
    },
    /// 1 where `a > b`, else 0.
    Gt {
        name: "gt",
        domain: Comparison,
        cost: 1,
        differentiable: false,
        apply: |a, b| flag(a > b),
        partials: |_a, _b| (0.0, 0.0),
        cuda: "a > b ? 1.0f : 0.0f",
        cuda_partials: ("0.0f", "0.0f"),
    },
    /// 1 where `a >= b`, else 0.
    Ge {
        name: "ge",
        domain: Comparison,
        cost: 1,
        differentiable: false,
        apply: |a, b| flag(a >= b),
        partials: |_a, _b| (0.0, 0.0),
        cuda: "a >= b ? 1.0f : 0.0f",
        cuda_partials: ("0.0f", "0.0f"),
    },
}

/// A comparison's result as a number.
#[inline(always)]
fn flag(t: bool) -> f32 {
    if t {
        1.0
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::UnaryOp;

    /// Hand-worked values, including the ends where a naive formula overflows
    /// (`log(1 + e^x)` at large `x`) or loses everything (`1 + e^x` at very
    /// negative `x` rounds to 1).
    #[test]
    fn softplus_and_log_sigmoid_at_known_points() {
        let ln2 = std::f32::consts::LN_2;
        let tiny = (-30f64).exp() as f32; // e^-30
        for (op, x, want) in [
            (UnaryOp::Softplus, 0.0, ln2),
            (UnaryOp::Softplus, 100.0, 100.0),
            (UnaryOp::Softplus, -30.0, tiny),
            (UnaryOp::LogSigmoid, 0.0, -ln2),
            (UnaryOp::LogSigmoid, -100.0, -100.0),
            (UnaryOp::LogSigmoid, 30.0, -tiny),
        ] {
            let got = op.apply(x);
            assert!(
                (got - want).abs() <= 2e-7 * want.abs(),
                "{op:?}({x}) = {got}, want {want}"
            );
        }
        assert_eq!(UnaryOp::Softplus.derivative(0.0, ln2), 0.5);
        assert_eq!(UnaryOp::LogSigmoid.derivative(0.0, -ln2), 0.5);
    }
}
