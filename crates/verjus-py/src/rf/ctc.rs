//! The binding of `verjus::rf::ctc_loss`: RETURNN's `rf.ctc_loss`, with its
//! keywords.

use super::{PyDim, PyTensor};
use crate::error::to_py_err;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use verjus::rf::{self, CtcOptions};

/// The CTC loss per batch entry (RETURNN's ``rf.ctc_loss``): minus the log
/// of the summed probability of every alignment of ``targets`` to the
/// frames of ``logits`` (one class per frame; merging repeats, then removing
/// blanks, gives the target), by the log-space forward-backward algorithm
/// over each entry's own input and target lengths (the two spatial dims'
/// lengths; a static dim counts in full).
///
/// The class dim is ``logits.feature_dim`` (else ``targets.sparse_dim``);
/// the other dims of ``logits`` are batch dims, and ``targets`` must have
/// the same. Unless ``logits_normalized``, ``log_softmax`` over the class dim
/// comes first, so the logits' gradient is ``softmax - posterior`` per frame.
/// A target that no alignment produces (it needs ``target_length + repeats``
/// frames, more than the input has) gets the loss ``inf`` and a zero
/// gradient, as ``torch.nn.functional.ctc_loss`` (RETURNN's PyTorch backend
/// passes ``zero_infinity=True`` and gets 0 instead). Lengths outside the
/// dims, or a label that is the blank or not a class, raise ValueError.
///
/// :param Tensor logits: over ``{batch dims..., input_spatial_dim, classes}``
/// :param bool logits_normalized: the logits are log-probabilities already
/// :param Tensor targets: int labels over ``{batch dims..., targets_spatial_dim}``
/// :param Dim input_spatial_dim: the frames
/// :param Dim targets_spatial_dim: the label positions
/// :param int blank_index: the blank class
/// :param bool max_approx: Viterbi: the best alignment instead of the sum
/// :param bool | None use_native_op: accepted for RETURNN; there is one op
/// :param bool label_loop: must be True (standard CTC)
/// :return: the losses over the batch dims
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (
    *, logits, logits_normalized = false, targets, input_spatial_dim, targets_spatial_dim,
    blank_index, max_approx = false, use_native_op = None, label_loop = true
))]
#[allow(clippy::too_many_arguments)] // RETURNN's keywords, one each
pub(super) fn rf_ctc_loss(
    py: Python<'_>,
    logits: PyRef<'_, PyTensor>,
    logits_normalized: bool,
    targets: PyRef<'_, PyTensor>,
    input_spatial_dim: PyRef<'_, PyDim>,
    targets_spatial_dim: PyRef<'_, PyDim>,
    blank_index: i64,
    max_approx: bool,
    use_native_op: Option<bool>,
    label_loop: bool,
) -> PyResult<PyTensor> {
    let _ = use_native_op;
    if !label_loop {
        return Err(PyValueError::new_err(
            "ctc_loss: label_loop=False is not supported",
        ));
    }
    let blank_index = usize::try_from(blank_index).map_err(|_| {
        PyValueError::new_err(format!("ctc_loss: blank_index {blank_index} is negative"))
    })?;
    let (x, t) = (logits.value()?, targets.value()?);
    let class_dim = x
        .feature_dim()
        .or(t.sparse_dim().filter(|d| x.axis_of(d).is_some()))
        .cloned()
        .ok_or_else(|| {
            PyValueError::new_err(
                "ctc_loss: logits need a feature_dim (or targets a sparse_dim among the logits' dims) as the class dim",
            )
        })?;
    let (si, st) = (input_spatial_dim.0.clone(), targets_spatial_dim.0.clone());
    let opts = CtcOptions {
        blank_index,
        logits_normalized,
        max_approx,
    };
    py.detach(move || rf::ctc_loss(&x, &t, &si, &st, &class_dim, opts))
        .map(PyTensor::from)
        .map_err(to_py_err)
}
