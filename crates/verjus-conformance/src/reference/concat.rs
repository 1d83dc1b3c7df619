//! Reference concatenation along an axis and its inverse, split.

use crate::array::{split_at_axis, Array};

/// `concat(parts)` along `axis`; the parts agree on every other axis.
pub fn concat(parts: &[&Array], axis: usize) -> Array {
    let mut dims = parts[0].dims.clone();
    dims[axis] = parts.iter().map(|p| p.dims[axis]).sum();
    let (outer, _, inner) = split_at_axis(&dims, axis);
    let mut data = Vec::with_capacity(crate::array::numel(&dims));
    for o in 0..outer {
        for p in parts {
            let chunk = p.dims[axis] * inner;
            data.extend_from_slice(&p.data[o * chunk..(o + 1) * chunk]);
        }
    }
    Array::new(dims, data)
}

/// Splits `x` along `axis` into parts of the given axis lengths.
pub fn split(x: &Array, axis: usize, sizes: &[usize]) -> Vec<Array> {
    assert_eq!(
        sizes.iter().sum::<usize>(),
        x.dims[axis],
        "reference split: sizes"
    );
    let (outer, len, inner) = split_at_axis(&x.dims, axis);
    let mut start = 0;
    sizes
        .iter()
        .map(|&s| {
            let mut dims = x.dims.clone();
            dims[axis] = s;
            let mut data = Vec::with_capacity(outer * s * inner);
            for o in 0..outer {
                let base = (o * len + start) * inner;
                data.extend_from_slice(&x.data[base..base + s * inner]);
            }
            start += s;
            Array::new(dims, data)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concat_and_split_by_hand() {
        let a = Array::new([2, 1], vec![1.0, 2.0]);
        let b = Array::new([2, 2], vec![3.0, 4.0, 5.0, 6.0]);
        let c = concat(&[&a, &b], 1);
        assert_eq!(c.dims, vec![2, 3]);
        assert_eq!(c.data, vec![1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);
        assert_eq!(
            concat(&[&b, &b], 0).data,
            [b.data.clone(), b.data.clone()].concat()
        );
        assert_eq!(split(&c, 1, &[1, 2]), vec![a, b]);
        let parts = split(&c, 1, &[0, 3]);
        assert_eq!(parts[0].dims, vec![2, 0]);
    }
}
