//! The gradients of a matrix product `C = alpha * op_a(A) @ op_b(B)`.
//!
//! With output gradient `G`, each operand's gradient is again one GEMM, with
//! transposes chosen so that no operand is ever transposed in memory:
//!
//! | operand | no transpose            | transposed                  |
//! |---------|-------------------------|-----------------------------|
//! | `dA`    | `G @ op_b(B)^T`         | `op_b(B) @ G^T`             |
//! | `dB`    | `op_a(A)^T @ G`         | `G^T @ op_a(A)`             |
//!
//! When an operand is one matrix shared by a batch (a linear layer's weight
//! applied to a batch of sequences), its gradient sums over the batch: by
//! folding the batch into the contracted rows when the layout allows (one GEMM
//! over copies of both factors as single matrices), otherwise by a batched GEMM
//! and a sum over the batch axes. Either way needs scratch tensors, which
//! [`matmul_scratch`] names so that a static graph can plan them.

use crate::ops::{self, GemmPlan, GemmSpec, ReduceOp};
use crate::{Backend, Error, Result, Shape, Tensor};

/// An operand of `C = op_a(A) @ op_b(B)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    A,
    B,
}

/// How the gradient GEMM reaches the operand's shape.
enum Route {
    /// The GEMM's output is the gradient.
    Direct,
    /// Both factors are batched with the batch next to the contracted rows:
    /// one GEMM over them viewed as single matrices (copied into scratch).
    Folded,
    /// A batched GEMM into scratch, summed over the batch axes.
    Summed,
}

/// The factors of the gradient GEMM of `operand` (the other operand and `g`,
/// in product order) and its spec, from the forward's `spec`.
fn factors<T>(operand: Operand, other: T, g: T, spec: GemmSpec) -> (T, T, GemmSpec) {
    let (x, y, trans_x, trans_y) = match (operand, spec.trans_a, spec.trans_b) {
        (Operand::A, false, tb) => (g, other, false, !tb),
        (Operand::A, true, tb) => (other, g, tb, true),
        (Operand::B, ta, false) => (other, g, !ta, false),
        (Operand::B, ta, true) => (g, other, true, ta),
    };
    let grad_spec = GemmSpec {
        alpha: spec.alpha,
        ..GemmSpec::new(trans_x, trans_y)
    };
    (x, y, grad_spec)
}

/// The route, and the shape of the gradient GEMM's own output.
fn route(x: &Shape, y: &Shape, spec: GemmSpec, target: &Shape) -> Result<(Route, Shape)> {
    let out = GemmPlan::new(x, y, spec)?.output_shape(x, y)?;
    let route = if &out == target {
        Route::Direct
    } else if spec.trans_a && !spec.trans_b && x.rank() > 2 && y.rank() > 2 {
        Route::Folded
    } else {
        Route::Summed
    };
    Ok((route, out))
}

/// `t` as one matrix: all leading axes folded into the rows.
fn as_matrix(t: &Shape) -> Result<Shape> {
    let (cols, leading) = t.dims().split_last().unwrap_or((&1, &[]));
    Shape::new([leading.iter().product(), *cols])
}

/// The scratch tensors (zero-filled or not: they are overwritten) that
/// [`matmul`] needs for `operand`'s gradient of shape `target`, given the
/// other operand's shape, the output gradient's and the forward's `spec`.
/// Empty when the gradient is one GEMM straight into the result.
pub fn matmul_scratch(
    operand: Operand,
    other: &Shape,
    g: &Shape,
    spec: GemmSpec,
    target: &Shape,
) -> Result<Vec<Shape>> {
    let (x, y, spec) = factors(operand, other, g, spec);
    Ok(match route(x, y, spec, target)? {
        (Route::Direct, _) => Vec::new(),
        (Route::Folded, _) => vec![as_matrix(x)?, as_matrix(y)?],
        (Route::Summed, full) => vec![full],
    })
}

/// `out` = the gradient of `operand` of `C = alpha * op_a(A) @ op_b(B)` (the
/// transposes and `alpha` of the forward's `spec`; its `beta` does not enter),
/// from the other operand and `g = dC`. `out` has the operand's shape, and
/// `scratch` holds the tensors [`matmul_scratch`] names for it.
pub fn matmul(
    be: &dyn Backend,
    operand: Operand,
    other: &Tensor,
    g: &Tensor,
    spec: GemmSpec,
    out: &mut Tensor,
    scratch: &mut [Tensor],
) -> Result<()> {
    let (x, y, spec) = factors(operand, other, g, spec);
    match route(x.shape(), y.shape(), spec, out.shape())?.0 {
        Route::Direct => ops::gemm(be, x, y, out, spec),
        Route::Folded => {
            let [xm, ym] = scratch else {
                return Err(missing_scratch(2, scratch.len()));
            };
            ops::copy(be, x, xm)?;
            ops::copy(be, y, ym)?;
            ops::gemm(be, xm, ym, out, spec)
        }
        Route::Summed => {
            let [full] = scratch else {
                return Err(missing_scratch(1, scratch.len()));
            };
            ops::gemm(be, x, y, full, spec)?;
            let batch_axes: Vec<usize> = (0..full.shape().rank() - 2).collect();
            ops::reduce(be, ReduceOp::Sum, full, &batch_axes, out)
        }
    }
}

fn missing_scratch(expected: usize, actual: usize) -> Error {
    Error::invalid(
        "matmul_backward",
        format!("needs {expected} scratch tensor(s) (see grad::matmul_scratch), got {actual}"),
    )
}
