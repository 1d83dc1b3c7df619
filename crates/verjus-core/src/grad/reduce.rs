//! The gradients of reductions, and of broadcasting (whose reverse is a sum).

use crate::ops::{self, ReduceOp};
use crate::{Backend, Error, Result, Tensor};

/// `dx` of `y = op over axes of x` from `dy`: sum spreads `dy`, mean spreads
/// `dy / n`, max and min send `dy` to the elements equal to `y`, split evenly
/// between ties.
pub fn reduce(
    be: &dyn Backend,
    op: ReduceOp,
    x: &Tensor,
    axes: &[usize],
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    ops::reduce_backward(be, op, x, axes, y, dy, dx)
}

/// `out` = `g` summed over the axes along which `out`'s shape was broadcast
/// (NumPy rules) to `g`'s: the gradient of an operand broadcast into a larger
/// result (a bias added to every row, an input of a broadcasting select). Of
/// equal shapes, a copy.
pub fn sum_to(be: &dyn Backend, g: &Tensor, out: &mut Tensor) -> Result<()> {
    if g.shape() == out.shape() {
        return ops::copy(be, g, out);
    }
    let (full, target) = (g.dims(), out.dims());
    let Some(offset) = full.len().checked_sub(target.len()) else {
        return Err(Error::shape("sum_to", "out", g.shape(), out.shape()));
    };
    let axes: Vec<usize> = (0..full.len())
        .filter(|&i| i < offset || (target[i - offset] == 1 && full[i] != 1))
        .collect();
    let squeezed = target.len() == full.len() - axes.len();
    if squeezed || target.len() == full.len() {
        // The reduction's own output shapes: reduced axes removed or kept as 1.
        return ops::reduce(be, ReduceOp::Sum, g, &axes, out);
    }
    let target = target.to_vec();
    let keep: Vec<usize> = (0..full.len())
        .map(|i| if axes.contains(&i) { 1 } else { full[i] })
        .collect();
    out.reshape_in_place(keep)?;
    let summed = ops::reduce(be, ReduceOp::Sum, g, &axes, out);
    out.reshape_in_place(target)?;
    summed
}
