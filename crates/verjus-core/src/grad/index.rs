//! The gradient of gathering slices along an axis (`index_select`).

use crate::ops;
use crate::{Backend, Result, Tensor};

/// Adds the gradient of `y = index_select(x, axis, indices)` into `dx`: slice
/// `j` of `dy` goes to slice `indices[j]`, summed over repeated indices.
///
/// Unlike the other rules this *accumulates*, so that a large source (an
/// embedding table) is not cleared again on every call: a caller that wants
/// the gradient alone passes zeros (as a fresh tensor is).
pub fn index_select(
    be: &dyn Backend,
    dy: &Tensor,
    axis: usize,
    indices: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    ops::index_add(be, dy, axis, indices, dx)
}
