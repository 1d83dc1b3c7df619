//! The binding of `verjus::rf::lstm`: the computation behind `rf.LSTM`
//! (`python/verjus/rf/rec.py`), with the keywords of RETURNN's backend
//! `lstm`.

use super::{PyDim, PyTensor};
use crate::error::to_py_err;
use pyo3::prelude::*;
use verjus::rf::{self, LstmParams};

/// The LSTM over ``spatial_dim`` of ``source`` (RETURNN's backend ``lstm``,
/// what ``rf.LSTM`` calls), in PyTorch's gate order (i, f, g, o).
///
/// The source's dims other than ``spatial_dim`` and ``in_dim`` are batch
/// dims. Over a dynamic ``spatial_dim`` each sequence runs to its own length:
/// frames past it output 0 and the final state is the state at the
/// sequence's last frame (length 0 gives the initial state back). With
/// ``spatial_dim=rf.single_step_dim`` the source has no time axis and one
/// step runs. RETURNN's one bias is added once per step (as PyTorch's
/// ``b_ih + b_hh``).
///
/// :param Tensor source: over ``{batch dims..., spatial_dim, in_dim}``, or
///   ``{batch dims..., in_dim}`` for one step
/// :param Tensor state_h: the hidden state, over ``out_dim`` and some of the
///   batch dims (broadcast over the others)
/// :param Tensor state_c: the cell state, like ``state_h``
/// :param Tensor ff_weight: over ``{4 * out_dim, in_dim}``
/// :param Tensor rec_weight: over ``{4 * out_dim, out_dim}`` (the same gates
///   dim)
/// :param Tensor | None bias: over ``{4 * out_dim}``, or None
/// :param Dim spatial_dim: the time dim, or ``single_step_dim``
/// :param Dim in_dim: the source's feature dim
/// :param Dim out_dim: the hidden size (static)
/// :return: the output over ``{spatial_dim, batch dims..., out_dim}``
///   (``{batch dims..., out_dim}`` for one step) and the new state ``(h, c)``
///   over ``{batch dims..., out_dim}``, all with feature dim ``out_dim``
/// :rtype: tuple[Tensor, tuple[Tensor, Tensor]]
#[pyfunction]
#[pyo3(signature = (
    source, *, state_h, state_c, ff_weight, rec_weight, bias, spatial_dim, in_dim, out_dim
))]
#[allow(clippy::too_many_arguments)] // RETURNN's keywords, one each
pub(super) fn rf_lstm(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    state_h: PyRef<'_, PyTensor>,
    state_c: PyRef<'_, PyTensor>,
    ff_weight: PyRef<'_, PyTensor>,
    rec_weight: PyRef<'_, PyTensor>,
    bias: Option<PyRef<'_, PyTensor>>,
    spatial_dim: PyRef<'_, PyDim>,
    in_dim: PyRef<'_, PyDim>,
    out_dim: PyRef<'_, PyDim>,
) -> PyResult<(PyTensor, (PyTensor, PyTensor))> {
    let (x, h, c) = (source.value()?, state_h.value()?, state_c.value()?);
    let (ff, rec, bias) = (
        ff_weight.value()?,
        rec_weight.value()?,
        bias.map(|b| b.value()).transpose()?,
    );
    let (spatial, in_dim, out_dim) = (spatial_dim.0.clone(), in_dim.0.clone(), out_dim.0.clone());
    let (y, h, c) = py
        .detach(move || {
            let p = LstmParams {
                ff_weight: &ff,
                rec_weight: &rec,
                bias: bias.as_ref(),
                in_dim: &in_dim,
                out_dim: &out_dim,
            };
            rf::lstm(&x, &h, &c, &p, &spatial)
        })
        .map_err(to_py_err)?;
    Ok((PyTensor::from(y), (PyTensor::from(h), PyTensor::from(c))))
}
