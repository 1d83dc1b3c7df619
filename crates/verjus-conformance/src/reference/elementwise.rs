//! Reference unary and broadcasting binary ops and their gradients.
//!
//! The scalar functions of `UnaryOp` and `BinaryOp` define *what* `f` and its
//! partial derivatives are; everything around them, broadcasting and the
//! reduction of gradients over broadcast axes, is computed here independently.

use crate::array::{numel, strides, unravel, Array};
use verjus_core::ops::{BinaryOp, UnaryOp};

/// `y = op(x)`.
pub fn unary(op: UnaryOp, x: &Array) -> Array {
    Array::new(
        x.dims.clone(),
        x.data.iter().map(|&v| op.apply(v)).collect(),
    )
}

/// `dx = dy * op'(x)`, with `y = op(x)` recomputed here.
pub fn unary_backward(op: UnaryOp, x: &Array, dy: &Array) -> Array {
    assert_eq!(x.dims, dy.dims, "reference unary_backward: dims");
    let data = x
        .data
        .iter()
        .zip(&dy.data)
        .map(|(&v, &g)| g * op.derivative(v, op.apply(v)))
        .collect();
    Array::new(x.dims.clone(), data)
}

/// The NumPy broadcast of two dimension lists, or `None` when they do not broadcast.
pub fn broadcast_dims(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let from_end = |d: &[usize], i: usize| if i < d.len() { d[d.len() - 1 - i] } else { 1 };
    let mut out = vec![0; rank];
    for i in 0..rank {
        let (x, y) = (from_end(a, i), from_end(b, i));
        out[rank - 1 - i] = if x == y || y == 1 {
            x
        } else if x == 1 {
            y
        } else {
            return None;
        };
    }
    Some(out)
}

/// Flat index into an operand of `dims` for the output multi-index `out_index`
/// (aligned at the trailing axis; size-1 axes repeat).
fn source_index(dims: &[usize], out_index: &[usize]) -> usize {
    let offset = out_index.len() - dims.len();
    let st = strides(dims);
    dims.iter()
        .enumerate()
        .map(|(i, &d)| {
            if d == 1 {
                0
            } else {
                out_index[offset + i] * st[i]
            }
        })
        .sum()
}

/// `c = a op b` with broadcasting.
pub fn binary(op: BinaryOp, a: &Array, b: &Array) -> Array {
    let dims = broadcast_dims(&a.dims, &b.dims).expect("reference binary: broadcastable");
    let data = (0..numel(&dims))
        .map(|i| {
            let idx = unravel(i, &dims);
            op.apply(
                a.data[source_index(&a.dims, &idx)],
                b.data[source_index(&b.dims, &idx)],
            )
        })
        .collect();
    Array::new(dims, data)
}

/// `(da, db)`: `dy` times each partial derivative, summed over the axes along
/// which that operand was broadcast.
pub fn binary_backward(op: BinaryOp, a: &Array, b: &Array, dy: &Array) -> (Array, Array) {
    let dims = broadcast_dims(&a.dims, &b.dims).expect("reference binary: broadcastable");
    assert_eq!(dy.dims, dims, "reference binary_backward: dy dims");
    let mut da = vec![0f64; a.data.len()];
    let mut db = vec![0f64; b.data.len()];
    for (i, &g) in dy.data.iter().enumerate() {
        let idx = unravel(i, &dims);
        let (ia, ib) = (source_index(&a.dims, &idx), source_index(&b.dims, &idx));
        let (pa, pb) = op.partials(a.data[ia], b.data[ib]);
        da[ia] += f64::from(g) * f64::from(pa);
        db[ib] += f64::from(g) * f64::from(pb);
    }
    let narrow = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
    (
        Array::new(a.dims.clone(), narrow(da)),
        Array::new(b.dims.clone(), narrow(db)),
    )
}

/// `where(cond != 0, x, y)` with the three broadcast together.
pub fn select(cond: &Array, x: &Array, y: &Array) -> Array {
    let dims = broadcast_dims(&cond.dims, &x.dims)
        .and_then(|d| broadcast_dims(&d, &y.dims))
        .expect("reference select: broadcastable");
    let data = (0..numel(&dims))
        .map(|i| {
            let idx = unravel(i, &dims);
            if cond.data[source_index(&cond.dims, &idx)] != 0.0 {
                x.data[source_index(&x.dims, &idx)]
            } else {
                y.data[source_index(&y.dims, &idx)]
            }
        })
        .collect();
    Array::new(dims, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_by_hand() {
        assert_eq!(broadcast_dims(&[4, 1, 3], &[5, 1]), Some(vec![4, 5, 3]));
        assert_eq!(broadcast_dims(&[], &[2]), Some(vec![2]));
        assert_eq!(broadcast_dims(&[0], &[1]), Some(vec![0]));
        assert_eq!(broadcast_dims(&[3], &[2]), None);
        // [[1], [2]] + [10, 20, 30] = [[11, 21, 31], [12, 22, 32]].
        let a = Array::new([2, 1], vec![1.0, 2.0]);
        let b = Array::new([3], vec![10.0, 20.0, 30.0]);
        let c = binary(BinaryOp::Add, &a, &b);
        assert_eq!(c.dims, vec![2, 3]);
        assert_eq!(c.data, vec![11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
    }

    #[test]
    fn backward_sums_over_broadcast_axes() {
        // c = a * b, a [2, 1], b [3], dy = 1: da = sum(b) = 60, db = sum(a) = 3.
        let a = Array::new([2, 1], vec![1.0, 2.0]);
        let b = Array::new([3], vec![10.0, 20.0, 30.0]);
        let dy = Array::new([2, 3], vec![1.0; 6]);
        let (da, db) = binary_backward(BinaryOp::Mul, &a, &b, &dy);
        assert_eq!(da.data, vec![60.0, 60.0]);
        assert_eq!(db.data, vec![3.0, 3.0, 3.0]);
        // Ties of maximum send the gradient to a.
        let (da, db) = binary_backward(
            BinaryOp::Max,
            &Array::new([2], vec![1.0, 1.0]),
            &Array::new([2], vec![1.0, 2.0]),
            &Array::new([2], vec![5.0, 7.0]),
        );
        assert_eq!((da.data, db.data), (vec![5.0, 0.0], vec![0.0, 7.0]));
    }

    /// The core's scalar derivatives agree with central differences of the scalar
    /// functions, so the references built on them (and the backends that port
    /// them) differentiate the right thing.
    #[test]
    fn core_scalar_derivatives_match_finite_differences() {
        let h = 1e-3f64;
        let unary_ops = UnaryOp::EXAMPLES
            .iter()
            .copied()
            .chain([UnaryOp::Powf(2.5)]);
        for op in unary_ops {
            for x in [0.3f32, 0.9, 1.7] {
                let num = (f64::from(op.apply(x + h as f32)) - f64::from(op.apply(x - h as f32)))
                    / (2.0 * h);
                let ana = f64::from(op.derivative(x, op.apply(x)));
                assert!(
                    (num - ana).abs() < 2e-3 * (1.0 + ana.abs()),
                    "{op:?} at {x}: {num} vs {ana}"
                );
            }
        }
        for &op in BinaryOp::EXAMPLES
            .iter()
            .filter(|op| op.is_differentiable())
        {
            let (a, b) = (1.3f32, 0.7f32);
            let (pa, pb) = op.partials(a, b);
            let hf = h as f32;
            let na = (f64::from(op.apply(a + hf, b)) - f64::from(op.apply(a - hf, b))) / (2.0 * h);
            let nb = (f64::from(op.apply(a, b + hf)) - f64::from(op.apply(a, b - hf))) / (2.0 * h);
            assert!((na - f64::from(pa)).abs() < 2e-3, "{op:?} da: {na} vs {pa}");
            assert!((nb - f64::from(pb)).abs() < 2e-3, "{op:?} db: {nb} vs {pb}");
        }
    }
}
