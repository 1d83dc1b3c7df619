//! Reference reductions (sum, mean, max, min over any set of axes), their
//! gradients, and argmax.
//!
//! Results are returned with the reduced axes kept as 1; the squeezed form has
//! the same element order. Conventions (from `ops::reduce`): the mean of an empty
//! group is 0; max and min of a group send the gradient to every element equal to
//! the result, split evenly between ties; argmax returns the first maximum.

use crate::array::{numel, strides, unravel, Array};
use verjus_core::ops::ReduceOp;

/// The dims with every axis in `axes` set to 1.
pub fn keepdims(dims: &[usize], axes: &[usize]) -> Vec<usize> {
    dims.iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect()
}

/// The dims with every axis in `axes` removed.
pub fn squeezed(dims: &[usize], axes: &[usize]) -> Vec<usize> {
    dims.iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(i))
        .map(|(_, &d)| d)
        .collect()
}

/// For each input element, the flat index of the output element it reduces into.
fn output_slots(dims: &[usize], axes: &[usize]) -> Vec<usize> {
    let out_strides = strides(&keepdims(dims, axes));
    (0..numel(dims))
        .map(|i| {
            unravel(i, dims)
                .iter()
                .enumerate()
                .map(|(ax, &c)| {
                    if axes.contains(&ax) {
                        0
                    } else {
                        c * out_strides[ax]
                    }
                })
                .sum()
        })
        .collect()
}

/// Max or min of each group; `None` for an empty group.
fn extrema(op: ReduceOp, x: &Array, slots: &[usize], n_out: usize) -> Vec<Option<f32>> {
    let mut acc: Vec<Option<f32>> = vec![None; n_out];
    for (&s, &v) in slots.iter().zip(&x.data) {
        acc[s] = Some(match acc[s] {
            None => v,
            Some(a) if op == ReduceOp::Max => a.max(v),
            Some(a) => a.min(v),
        });
    }
    acc
}

/// `op` over `axes` of `x`, with the reduced axes kept as 1.
pub fn reduce(op: ReduceOp, x: &Array, axes: &[usize]) -> Array {
    let out_dims = keepdims(&x.dims, axes);
    let group: usize = axes.iter().map(|&a| x.dims[a]).product();
    let slots = output_slots(&x.dims, axes);
    let n_out = numel(&out_dims);
    let data = match op {
        ReduceOp::Sum | ReduceOp::Mean => {
            let mut acc = vec![0f64; n_out];
            for (&s, &v) in slots.iter().zip(&x.data) {
                acc[s] += f64::from(v);
            }
            let div = if op == ReduceOp::Mean && group > 0 {
                group as f64
            } else {
                1.0
            };
            acc.into_iter().map(|v| (v / div) as f32).collect()
        }
        ReduceOp::Max | ReduceOp::Min => extrema(op, x, &slots, n_out)
            .into_iter()
            .map(|v| v.expect("reference reduce: max/min over an empty group"))
            .collect(),
    };
    Array::new(out_dims, data)
}

/// `dx` for `y = reduce(op, x, axes)` given `dy` (keepdims or squeezed, same order).
pub fn reduce_backward(op: ReduceOp, x: &Array, axes: &[usize], dy: &[f32]) -> Array {
    let group: usize = axes.iter().map(|&a| x.dims[a]).product();
    let slots = output_slots(&x.dims, axes);
    let extreme = extrema(op, x, &slots, dy.len());
    let mut ties = vec![0usize; dy.len()];
    for (&s, &v) in slots.iter().zip(&x.data) {
        if Some(v) == extreme[s] {
            ties[s] += 1;
        }
    }
    let data = slots
        .iter()
        .zip(&x.data)
        .map(|(&s, &v)| {
            let g = f64::from(dy[s]);
            let share = match op {
                ReduceOp::Sum => g,
                ReduceOp::Mean => g / group as f64,
                ReduceOp::Max | ReduceOp::Min if Some(v) == extreme[s] => g / ties[s] as f64,
                ReduceOp::Max | ReduceOp::Min => 0.0,
            };
            share as f32
        })
        .collect();
    Array::new(x.dims.clone(), data)
}

/// Index of the first maximum along `axis`; the result has the axis removed.
pub fn argmax(x: &Array, axis: usize) -> (Vec<usize>, Vec<i64>) {
    let out_dims = squeezed(&x.dims, &[axis]);
    let (outer, len, inner) = crate::array::split_at_axis(&x.dims, axis);
    assert!(
        len > 0 || outer * inner == 0,
        "reference argmax: empty axis"
    );
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| x.data[(o * len + j) * inner + i];
            let mut best = 0;
            for j in 1..len {
                if at(j) > at(best) {
                    best = j;
                }
            }
            out.push(best as i64);
        }
    }
    (out_dims, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x() -> Array {
        // [[1, 5, 3], [4, 2, 6]]
        Array::new([2, 3], vec![1.0, 5.0, 3.0, 4.0, 2.0, 6.0])
    }

    #[test]
    fn reductions_by_hand() {
        assert_eq!(reduce(ReduceOp::Sum, &x(), &[0]).data, vec![5.0, 7.0, 9.0]);
        assert_eq!(reduce(ReduceOp::Sum, &x(), &[1]).data, vec![9.0, 12.0]);
        assert_eq!(reduce(ReduceOp::Mean, &x(), &[0, 1]).data, vec![3.5]);
        assert_eq!(reduce(ReduceOp::Max, &x(), &[1]).data, vec![5.0, 6.0]);
        assert_eq!(reduce(ReduceOp::Min, &x(), &[0]).data, vec![1.0, 2.0, 3.0]);
        assert_eq!(reduce(ReduceOp::Sum, &x(), &[]).data, x().data);
        assert_eq!(reduce(ReduceOp::Mean, &x(), &[1]).dims, vec![2, 1]);
        // Empty group: sum and mean are 0.
        let e = Array::zeros([3, 0]);
        assert_eq!(reduce(ReduceOp::Mean, &e, &[1]).data, vec![0.0; 3]);
        // Non-adjacent axes of a rank-3 array: [2, 2, 2] summed over axes 0 and 2.
        let c = Array::new([2, 2, 2], (0..8).map(|v| v as f32).collect());
        assert_eq!(reduce(ReduceOp::Sum, &c, &[2, 0]).data, vec![10.0, 18.0]);
    }

    #[test]
    fn backward_by_hand() {
        let dx = reduce_backward(ReduceOp::Mean, &x(), &[1], &[3.0, 6.0]);
        assert_eq!(dx.data, vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        // Ties split evenly: max of [2, 7, 7] is 7, twice.
        let t = Array::new([3], vec![2.0, 7.0, 7.0]);
        let dx = reduce_backward(ReduceOp::Max, &t, &[0], &[1.0]);
        assert_eq!(dx.data, vec![0.0, 0.5, 0.5]);
        let dx = reduce_backward(ReduceOp::Min, &x(), &[0], &[1.0, 2.0, 3.0]);
        assert_eq!(dx.data, vec![1.0, 0.0, 3.0, 0.0, 2.0, 0.0]);
    }

    #[test]
    fn argmax_takes_the_first_maximum() {
        let t = Array::new([2, 3], vec![1.0, 9.0, 9.0, 4.0, 4.0, 0.0]);
        assert_eq!(argmax(&t, 1), (vec![2], vec![1, 0]));
        assert_eq!(argmax(&t, 0), (vec![3], vec![1, 0, 0]));
    }
}
