//! Reference index-select (gather of slices along an axis) and index-add
//! (scatter-add of slices along an axis; repeated indices accumulate).

use crate::array::{split_at_axis, Array};

/// `y[.., j, ..] = x[.., indices[j], ..]` along `axis`.
pub fn index_select(x: &Array, axis: usize, indices: &[i64]) -> Array {
    let (outer, len, inner) = split_at_axis(&x.dims, axis);
    let mut dims = x.dims.clone();
    dims[axis] = indices.len();
    let mut data = Vec::with_capacity(outer * indices.len() * inner);
    for o in 0..outer {
        for &idx in indices {
            let idx = usize::try_from(idx)
                .ok()
                .filter(|&i| i < len)
                .expect("reference index_select: index in range");
            let base = (o * len + idx) * inner;
            data.extend_from_slice(&x.data[base..base + inner]);
        }
    }
    Array::new(dims, data)
}

/// `dst[.., indices[j], ..] += src[.., j, ..]` along `axis`.
pub fn index_add(dst: &Array, src: &Array, axis: usize, indices: &[i64]) -> Array {
    let (outer, len, inner) = split_at_axis(&dst.dims, axis);
    let count = indices.len();
    let mut acc: Vec<f64> = dst.data.iter().map(|&v| f64::from(v)).collect();
    for o in 0..outer {
        for (j, &idx) in indices.iter().enumerate() {
            let idx = usize::try_from(idx)
                .ok()
                .filter(|&i| i < len)
                .expect("reference index_add: index in range");
            for i in 0..inner {
                acc[(o * len + idx) * inner + i] +=
                    f64::from(src.data[(o * count + j) * inner + i]);
            }
        }
    }
    Array::new(
        dst.dims.clone(),
        acc.into_iter().map(|v| v as f32).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_and_add_by_hand() {
        // x = [[0, 1, 2], [3, 4, 5]]
        let x = Array::new([2, 3], (0..6).map(|v| v as f32).collect());
        let y = index_select(&x, 1, &[2, 0, 2]);
        assert_eq!(y.dims, vec![2, 3]);
        assert_eq!(y.data, vec![2.0, 0.0, 2.0, 5.0, 3.0, 5.0]);
        assert_eq!(index_select(&x, 0, &[1]).data, vec![3.0, 4.0, 5.0]);
        // Adding y back with the same indices: column 2 receives two slices.
        let d = index_add(&Array::zeros([2, 3]), &y, 1, &[2, 0, 2]);
        assert_eq!(d.data, vec![0.0, 0.0, 4.0, 3.0, 0.0, 10.0]);
        // index_add accumulates into the existing contents.
        let d = index_add(&x, &Array::new([1, 3], vec![1.0; 3]), 0, &[0]);
        assert_eq!(d.data, vec![1.0, 2.0, 3.0, 3.0, 4.0, 5.0]);
    }
}
