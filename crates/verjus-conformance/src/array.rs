//! Host arrays for the reference implementations: a dimension list and row-major
//! `f32` elements, nothing else.
//!
//! The references deliberately avoid `verjus_core::Shape` and `Tensor`: they redo
//! the index arithmetic themselves, so a mistake in the core's shape helpers cannot
//! hide behind a reference that shares it.

/// Row-major `f32` elements with their dimensions.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub dims: Vec<usize>,
    pub data: Vec<f32>,
}

impl Array {
    /// An array; panics when the element count does not match the dimensions
    /// (a bug in the suite, never in the backend under test).
    pub fn new(dims: impl Into<Vec<usize>>, data: Vec<f32>) -> Self {
        let dims = dims.into();
        assert_eq!(
            numel(&dims),
            data.len(),
            "Array::new: {} elements for dims {dims:?}",
            data.len()
        );
        Array { dims, data }
    }

    /// A zero-filled array.
    pub fn zeros(dims: impl Into<Vec<usize>>) -> Self {
        let dims = dims.into();
        let data = vec![0.0; numel(&dims)];
        Array { dims, data }
    }

    /// The same elements under other dimensions of equal element count.
    pub fn reshaped(mut self, dims: impl Into<Vec<usize>>) -> Self {
        let dims = dims.into();
        assert_eq!(numel(&dims), self.data.len(), "Array::reshaped to {dims:?}");
        self.dims = dims;
        self
    }
}

/// Product of the dimensions (1 for a scalar).
pub fn numel(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// Row-major strides in elements.
pub fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// The multi-index of flat position `index` in an array of `dims`.
pub fn unravel(mut index: usize, dims: &[usize]) -> Vec<usize> {
    let mut out = vec![0; dims.len()];
    for (o, &d) in out.iter_mut().zip(dims).rev() {
        if d > 0 {
            *o = index % d;
            index /= d;
        }
    }
    out
}

/// `(outer, len, inner)`: the element counts before, along and after `axis`.
pub fn split_at_axis(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    (numel(&dims[..axis]), dims[axis], numel(&dims[axis + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_and_unravel_agree() {
        let dims = [2, 3, 5];
        assert_eq!(strides(&dims), vec![15, 5, 1]);
        assert_eq!(unravel(23, &dims), vec![1, 1, 3]);
        assert_eq!(unravel(0, &[]), Vec::<usize>::new());
        assert_eq!(split_at_axis(&dims, 1), (2, 3, 5));
    }

    #[test]
    #[should_panic(expected = "Array::new")]
    fn new_checks_the_element_count() {
        let _ = Array::new([2, 2], vec![0.0; 3]);
    }
}
