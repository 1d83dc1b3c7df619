//! Reference axis permutation: output axis `i` is input axis `perm[i]`. Generic
//! over the element type because permute accepts every dtype.

use crate::array::{numel, strides, unravel};

/// The permuted dims and elements.
pub fn permute<T: Copy>(dims: &[usize], data: &[T], perm: &[usize]) -> (Vec<usize>, Vec<T>) {
    let out_dims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let in_strides = strides(dims);
    let out = (0..numel(&out_dims))
        .map(|j| {
            let at: usize = unravel(j, &out_dims)
                .iter()
                .zip(perm)
                .map(|(&c, &p)| c * in_strides[p])
                .sum();
            data[at]
        })
        .collect();
    (out_dims, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_by_hand() {
        // The transpose of [[0, 1, 2], [3, 4, 5]].
        let (d, v) = permute(&[2, 3], &[0, 1, 2, 3, 4, 5], &[1, 0]);
        assert_eq!((d, v), (vec![3, 2], vec![0, 3, 1, 4, 2, 5]));
        // [1, 2, 2] -> axes (2, 0, 1): y[k, 0, j] = x[0, j, k].
        let (d, v) = permute(&[1, 2, 2], &[0i64, 1, 2, 3], &[2, 0, 1]);
        assert_eq!((d, v), (vec![2, 1, 2], vec![0, 2, 1, 3]));
        assert_eq!(permute::<i32>(&[], &[7], &[]), (vec![], vec![7]));
    }
}
