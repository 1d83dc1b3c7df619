//! Checks of the unary ops, the broadcasting binary ops, and their gradients.
//! Tolerance: `Tolerance::ELEMENTWISE` (a few ulps of a device's `exp`, `erf`, ...).

use crate::array::Array;
use crate::compare::{close, every_case, Tolerance};
use crate::inputs::{away_from_zero, quantized, uniform};
use crate::reference::elementwise as reference;
use crate::transfer::{get, put, zeros, Context};
use std::sync::LazyLock;
use verjus_core::ops::{self, BinaryDomain, BinaryOp, UnaryDomain, UnaryOp};
use verjus_core::{Backend, DType};

/// Every unary op of the table (with the table's example scalar), and more
/// exponents for `powf`: a fractional and a negative one.
pub(crate) static UNARY_OPS: LazyLock<Vec<UnaryOp>> = LazyLock::new(|| {
    let mut ops = UnaryOp::EXAMPLES.to_vec();
    ops.extend([UnaryOp::Powf(0.5), UnaryOp::Powf(-1.5)]);
    ops
});

/// Every binary op of the table.
pub(crate) const BINARY_OPS: &[BinaryOp] = BinaryOp::EXAMPLES;

const UNARY_SHAPES: [&[usize]; 11] = [
    &[],
    &[1],
    &[7],
    &[13, 1],
    &[17],
    &[33],
    &[65],
    &[3, 31],
    &[0],
    &[2, 0, 3],
    &[5, 13, 3],
];

/// `(a, b)` shape pairs: equal shapes, scalars, and broadcasting both ways.
const BINARY_SHAPES: [(&[usize], &[usize]); 11] = [
    (&[], &[]),
    (&[1], &[7]),
    (&[7], &[7]),
    (&[13, 17], &[13, 17]),
    (&[3, 1, 5], &[4, 1]),
    (&[], &[33]),
    (&[65], &[3, 65]),
    (&[2, 0, 3], &[3]),
    (&[0], &[1]),
    (&[5, 1], &[1, 6]),
    (&[17, 1, 2], &[1, 31, 1]),
];

/// An input inside the op's domain. Outside domains the result is NaN or inf
/// and says nothing about a kernel; zeros are included where the op is defined
/// there (relu and abs have a convention at 0).
pub(crate) fn unary_input(op: UnaryOp, seed: u64, dims: &[usize]) -> Array {
    let positive = match op.domain() {
        UnaryDomain::Positive => true,
        // A fractional or negative power of a negative base is NaN or inf.
        UnaryDomain::PowerBase => op.scalar().fract() != 0.0 || op.scalar() < 0.0,
        UnaryDomain::Real | UnaryDomain::Kink | UnaryDomain::NonZero => false,
    };
    if positive {
        uniform(seed, dims, 0.1, 4.0)
    } else if op.domain() == UnaryDomain::NonZero {
        away_from_zero(seed, dims, 0.1, 4.0)
    } else {
        let mut x = uniform(seed, dims, -4.0, 4.0);
        x.data.iter_mut().step_by(7).for_each(|v| *v = 0.0);
        x
    }
}

/// Operands in the op's domain: ties for comparisons, max and min; a positive
/// base for pow; a divisor away from zero for div.
pub(crate) fn binary_inputs(op: BinaryOp, seed: u64, a: &[usize], b: &[usize]) -> (Array, Array) {
    match op.domain() {
        BinaryDomain::Real => (uniform(seed, a, -2.0, 2.0), uniform(seed + 1, b, -2.0, 2.0)),
        BinaryDomain::Divisor => (
            uniform(seed, a, -2.0, 2.0),
            away_from_zero(seed + 1, b, 0.25, 2.0),
        ),
        BinaryDomain::PositiveBase => (uniform(seed, a, 0.1, 3.0), uniform(seed + 1, b, -2.0, 2.0)),
        BinaryDomain::Ties | BinaryDomain::Comparison => {
            (quantized(seed, a, 4, 0.5), quantized(seed + 1, b, 4, 0.5))
        }
    }
}

/// `ops::unary` for every op on every shape.
pub fn unary(be: &dyn Backend) -> Result<(), String> {
    let cases = UNARY_OPS
        .iter()
        .flat_map(|&op| UNARY_SHAPES.iter().map(move |&s| (op, s)));
    every_case(cases, |(op, dims)| {
        let what = format!("{} ({op:?}) {dims:?}", op.name());
        let x = unary_input(op, 1, dims);
        let tx = put(be, &what, &x)?;
        let mut ty = zeros(be, &what, dims, DType::F32)?;
        ops::unary(be, op, &tx, &mut ty).context(&what)?;
        let expected = reference::unary(op, &x);
        close(
            &what,
            dims,
            &expected.data,
            &get(be, &what, &ty)?,
            Tolerance::ELEMENTWISE,
        )
    })
}

/// ReLU passes NaN through (PyTorch does; a NaN that became 0 would hide a bad
/// input from the loss). The tables above cannot hold NaN: it never compares equal.
pub fn relu_keeps_nan(be: &dyn Backend) -> Result<(), String> {
    let what = "relu of NaN";
    let x = Array::new(vec![5], vec![f32::NAN, -1.0, 0.5, f32::NAN, 0.0]);
    let tx = put(be, what, &x)?;
    let mut ty = zeros(be, what, &[5], DType::F32)?;
    ops::unary(be, UnaryOp::Relu, &tx, &mut ty).context(what)?;
    let y: Vec<f32> = get(be, what, &ty)?;
    let ok = y[0].is_nan() && y[3].is_nan() && y[1] == 0.0 && y[2] == 0.5 && y[4] == 0.0;
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: expected [NaN, 0, 0.5, NaN, 0], got {y:?}"))
    }
}

/// `ops::unary_backward` for every op on every shape (`y` is the exact forward).
pub fn unary_backward(be: &dyn Backend) -> Result<(), String> {
    let cases = UNARY_OPS
        .iter()
        .flat_map(|&op| UNARY_SHAPES.iter().map(move |&s| (op, s)));
    every_case(cases, |(op, dims)| {
        let what = format!("{}_backward ({op:?}) {dims:?}", op.name());
        let x = unary_input(op, 2, dims);
        let y = reference::unary(op, &x);
        let dy = uniform(3, dims, -1.0, 1.0);
        let (tx, ty, tdy) = (
            put(be, &what, &x)?,
            put(be, &what, &y)?,
            put(be, &what, &dy)?,
        );
        let mut tdx = zeros(be, &what, dims, DType::F32)?;
        ops::unary_backward(be, op, &tx, &ty, &tdy, &mut tdx).context(&what)?;
        let expected = reference::unary_backward(op, &x, &dy);
        close(
            &what,
            dims,
            &expected.data,
            &get(be, &what, &tdx)?,
            Tolerance::ELEMENTWISE,
        )
    })
}

/// `ops::binary` for every op on every shape pair, both operand orders.
pub fn binary(be: &dyn Backend) -> Result<(), String> {
    let cases = BINARY_OPS.iter().flat_map(|&op| {
        BINARY_SHAPES
            .iter()
            .flat_map(move |&(a, b)| [(op, a, b), (op, b, a)])
    });
    every_case(cases, |(op, a_dims, b_dims)| {
        let what = format!("{} {a_dims:?} with {b_dims:?}", op.name());
        let (a, b) = binary_inputs(op, 4, a_dims, b_dims);
        let expected = reference::binary(op, &a, &b);
        let (ta, tb) = (put(be, &what, &a)?, put(be, &what, &b)?);
        let mut tc = zeros(be, &what, &expected.dims, DType::F32)?;
        ops::binary(be, op, &ta, &tb, &mut tc).context(&what)?;
        close(
            &what,
            &expected.dims,
            &expected.data,
            &get(be, &what, &tc)?,
            Tolerance::ELEMENTWISE,
        )
    })
}

/// Which gradients a backward call asks for.
#[derive(Clone, Copy, Debug)]
enum Wanted {
    Both,
    OnlyA,
    OnlyB,
}

/// `ops::binary_backward` for every differentiable op on every shape pair,
/// asking for both gradients, only `da` and only `db`. Ties of max and min send
/// the gradient to `a`. Gradients are reduced over broadcast axes, so the
/// tolerance is `Tolerance::REDUCTION`.
pub fn binary_backward(be: &dyn Backend) -> Result<(), String> {
    let cases = BINARY_OPS
        .iter()
        .filter(|op| op.is_differentiable())
        .flat_map(|&op| {
            BINARY_SHAPES.iter().flat_map(move |&(a, b)| {
                [Wanted::Both, Wanted::OnlyA, Wanted::OnlyB].map(|w| (op, a, b, w))
            })
        });
    every_case(cases, |(op, a_dims, b_dims, wanted)| {
        let what = format!(
            "{}_backward {a_dims:?} with {b_dims:?} ({wanted:?})",
            op.name()
        );
        let (a, b) = binary_inputs(op, 5, a_dims, b_dims);
        let out = reference::binary(op, &a, &b);
        let dy = uniform(6, &out.dims, -1.0, 1.0);
        let (ea, eb) = reference::binary_backward(op, &a, &b, &dy);
        let (ta, tb, tdy) = (
            put(be, &what, &a)?,
            put(be, &what, &b)?,
            put(be, &what, &dy)?,
        );
        let mut tda = zeros(be, &what, a_dims, DType::F32)?;
        let mut tdb = zeros(be, &what, b_dims, DType::F32)?;
        let (da, db) = match wanted {
            Wanted::Both => (Some(&mut tda), Some(&mut tdb)),
            Wanted::OnlyA => (Some(&mut tda), None),
            Wanted::OnlyB => (None, Some(&mut tdb)),
        };
        ops::binary_backward(be, op, &ta, &tb, &tdy, da, db).context(&what)?;
        let tol = Tolerance::REDUCTION;
        if !matches!(wanted, Wanted::OnlyB) {
            close(
                &format!("{what} da"),
                a_dims,
                &ea.data,
                &get(be, &what, &tda)?,
                tol,
            )?;
        }
        if !matches!(wanted, Wanted::OnlyA) {
            close(
                &format!("{what} db"),
                b_dims,
                &eb.data,
                &get(be, &what, &tdb)?,
                tol,
            )?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::{BINARY_OPS, UNARY_OPS};
    use std::collections::BTreeSet;
    use verjus_core::ops::{BinaryOp, UnaryOp};

    /// Every op of the core's table is among the ops the checks (and the
    /// gradient checks, which use the same lists) run on every backend.
    #[test]
    fn every_op_of_the_table_is_checked() {
        let checked: BTreeSet<i32> = UNARY_OPS.iter().map(|op| op.code()).collect();
        for op in UnaryOp::EXAMPLES {
            assert!(checked.contains(&op.code()), "{op:?} is not checked");
        }
        let checked: BTreeSet<i32> = BINARY_OPS.iter().map(|op| op.code()).collect();
        for op in BinaryOp::EXAMPLES {
            assert!(checked.contains(&op.code()), "{op:?} is not checked");
        }
    }
}
