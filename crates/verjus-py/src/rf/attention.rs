//! The binding of `verjus::rf::dot_attention`: the fused computation behind
//! `rf.dot_attention` and the attention modules (`python/verjus/rf/attention.py`),
//! which handle the dropout on the weights.

use super::{compute, PyDim, PyTensor};
use crate::error::to_py_err;
use pyo3::prelude::*;
use verjus::rf;

/// Fused scaled dot-product attention (RETURNN's backend
/// ``scaled_dot_product_attention`` without dropout): the scores
/// ``scale * query . keys`` over ``key_dim``, a softmax over ``axis`` in which
/// keys of padded frames (and, when causal, later frames) get no weight, and
/// the weighted sum of ``values`` over ``axis``, in one op whose backward
/// recomputes the weights (no score tensor is kept).
///
/// :param Tensor query: over ``{batch dims..., query dims..., key_dim}``
///   (the query dims may be none, several, or ``axis`` itself)
/// :param Tensor keys: over ``{batch dims..., axis, key_dim}``
/// :param Tensor values: over ``{batch dims..., axis, value feature dim}``
/// :param Dim key_dim: the dim reduced for the scores
/// :param Dim axis: the keys' frames, softmax and sum over it
/// :param Dim | None causal_query_spatial_dim: if given, query position ``i``
///   sees keys ``0..=i`` (the query's only non-batch dim, as long as ``axis``)
/// :param float | None scale: default ``key_dim ** -0.5``
/// :return: over ``{batch dims..., query dims..., value feature dim}``
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (query, keys, values, *, key_dim, axis, causal_query_spatial_dim = None, scale = None))]
#[allow(clippy::too_many_arguments)] // RETURNN's keywords, one each
pub(super) fn rf_fused_dot_attention(
    py: Python<'_>,
    query: PyRef<'_, PyTensor>,
    keys: PyRef<'_, PyTensor>,
    values: PyRef<'_, PyTensor>,
    key_dim: PyRef<'_, PyDim>,
    axis: PyRef<'_, PyDim>,
    causal_query_spatial_dim: Option<PyRef<'_, PyDim>>,
    scale: Option<f32>,
) -> PyResult<PyTensor> {
    let (q, k, v) = (&*query.shared()?, &*keys.shared()?, &*values.shared()?);
    let (key_dim, axis) = (&key_dim.0, &axis.0);
    let causal = causal_query_spatial_dim.map(|d| d.0.clone());
    compute(py, &[q, k, v], || {
        rf::dot_attention(q, k, v, key_dim, axis, causal.as_ref(), scale)
    })
    .map(PyTensor::from)
    .map_err(to_py_err)
}
