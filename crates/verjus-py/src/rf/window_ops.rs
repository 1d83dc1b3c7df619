//! The RF ops that cut or slide along dims: `rf_slice`, `rf_split`,
//! `rf_conv`, `rf_pool`. The Python wrappers in `verjus.rf` turn RETURNN's
//! int-or-sequence arguments into the per-dim lists the last three take.

use super::tensor::dims_of as dims;
use super::{PyDim, PyTensor};
use crate::error::to_py_err;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use verjus::rf::{self, ConvArgs, Dim, Padding, SliceRange, SliceSize, Window};

/// `"valid"`, `"same"` or one int per spatial dim.
fn parse_padding(op: &str, obj: &Bound<'_, PyAny>) -> PyResult<Padding> {
    if let Ok(name) = obj.extract::<String>() {
        return Padding::parse(op, &name).map_err(to_py_err);
    }
    obj.extract::<Vec<usize>>()
        .map(Padding::Explicit)
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{op}: padding must be \"valid\", \"same\" or ints >= 0, got {}",
                obj.get_type()
            ))
        })
}

fn pair(r: verjus::Result<(rf::RfTensor, Vec<Dim>)>) -> PyResult<(PyTensor, Vec<PyDim>)> {
    let (t, d) = r.map_err(to_py_err)?;
    Ok((PyTensor::from(t), d.into_iter().map(PyDim).collect()))
}

/// Slicing along one dim: ``source[start:end:step]`` along ``axis``, or
/// ``size`` entries from ``start`` (``x[start:start + size]``).
///
/// A slice of a dynamic dim from a non-negative ``start`` to its end is
/// dynamic again, each sequence keeping its own frames from ``start`` on
/// (lengths ``ceil((len - start) / step)``); a slice with an explicit ``end``
/// or ``size`` is static, as in RETURNN. Negative positions count from the end
/// of the axis; on a dynamic dim, whose end is the padded one, they are an
/// error.
///
/// :param Tensor source: the tensor
/// :param Dim axis: the dim to slice
/// :param int | None start: the first position (default 0)
/// :param int | None end: the end (excluded; default: the end of ``axis``)
/// :param int | None step: a positive step (default 1)
/// :param int | Dim | None size: how many entries to take from ``start``; a
///   Dim is then the out dim
/// :param Dim | None out_dim: reuse this dim for the result (its size must fit)
/// :return: the slice and its new dim
/// :rtype: tuple[Tensor, Dim]
#[pyfunction]
#[pyo3(signature = (source, *, axis, start = None, end = None, step = None, size = None, out_dim = None))]
#[allow(clippy::too_many_arguments)] // RETURNN's keywords, one each
pub(super) fn rf_slice(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    start: Option<i64>,
    end: Option<i64>,
    step: Option<i64>,
    size: Option<&Bound<'_, PyAny>>,
    out_dim: Option<PyRef<'_, PyDim>>,
) -> PyResult<(PyTensor, PyDim)> {
    let size = match size {
        None => None,
        Some(s) => Some(match s.cast::<PyDim>() {
            Ok(d) => SliceSize::Dim(d.get().0.clone()),
            Err(_) => SliceSize::Count(s.extract::<usize>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "slice: size must be an int or a Dim, got {}",
                    s.get_type()
                ))
            })?),
        }),
    };
    let range = SliceRange {
        start,
        end,
        step,
        size,
    };
    let (x, axis, out_dim) = (
        source.value()?,
        axis.0.clone(),
        out_dim.map(|d| d.0.clone()),
    );
    let (t, d) = py
        .detach(move || rf::slice(&x, &axis, &range, out_dim))
        .map_err(to_py_err)?;
    Ok((PyTensor::from(t), PyDim(d)))
}

/// ``source`` cut along ``axis`` into consecutive parts over ``out_dims``
/// (``verjus.rf.split`` returns them as a tuple); gradients flow to each
/// part's entries.
///
/// :param Tensor source: ``{..., axis}``
/// :param Dim axis: a static dim (a dynamic one cannot be cut per sequence so)
/// :param Sequence[Dim] out_dims: dims of known sizes adding up to ``axis``'s
/// :return: one tensor per out dim, ``axis`` replaced by it
/// :rtype: list[Tensor]
#[pyfunction]
#[pyo3(signature = (source, *, axis, out_dims))]
pub(super) fn rf_split(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    out_dims: Vec<PyRef<'_, PyDim>>,
) -> PyResult<Vec<PyTensor>> {
    let (x, axis, out_dims) = (source.value()?, axis.0.clone(), dims(&out_dims));
    let parts = py
        .detach(move || rf::split(&x, &axis, &out_dims))
        .map_err(to_py_err)?;
    Ok(parts.into_iter().map(PyTensor::from).collect())
}

/// 1-D or 2-D convolution over ``in_spatial_dims``, ``in_dim`` to ``out_dim``
/// channels, with one entry per spatial dim in each window argument
/// (``verjus.rf.conv`` takes RETURNN's ints and defaults).
///
/// ``padding="same"`` is RETURNN's consistent same padding (independent of
/// the longest sequence); the padding frames of dynamic dims are set to 0
/// first, so a sequence gives the same output in a batch as alone.
///
/// :param Tensor source: the input, over ``in_dim`` and ``in_spatial_dims``
/// :param Dim in_dim: the input channels
/// :param Dim out_dim: the output channels
/// :param Sequence[Dim] in_spatial_dims: 1 or 2 spatial dims
/// :param Sequence[Dim] | None out_spatial_dims: reuse these dims for the
///   output's spatial dims
/// :param Tensor filter: over ``[out_dim, in_dim (/ groups), *filter_size]``
/// :param Sequence[Dim] filter_size: the filter's spatial dims
/// :param str | Sequence[int] padding: ``"valid"``, ``"same"`` or entries
///   padded on both sides, per spatial dim
/// :param Sequence[int] strides: per spatial dim
/// :param Sequence[int] dilation_rate: per spatial dim
/// :param int groups: channel groups (``in_dim`` and ``out_dim`` divisible)
/// :param Tensor | None bias: over ``[out_dim]``
/// :return: the output (its feature dim ``out_dim``) and the out spatial dims
/// :rtype: tuple[Tensor, list[Dim]]
#[pyfunction]
#[pyo3(signature = (
    source, *, in_dim, out_dim, in_spatial_dims, out_spatial_dims, filter, filter_size,
    padding, strides, dilation_rate, groups, bias
))]
#[allow(clippy::too_many_arguments)] // RETURNN's keywords, one each
pub(super) fn rf_conv(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    in_dim: PyRef<'_, PyDim>,
    out_dim: PyRef<'_, PyDim>,
    in_spatial_dims: Vec<PyRef<'_, PyDim>>,
    out_spatial_dims: Option<Vec<PyRef<'_, PyDim>>>,
    filter: PyRef<'_, PyTensor>,
    filter_size: Vec<PyRef<'_, PyDim>>,
    padding: &Bound<'_, PyAny>,
    strides: Vec<usize>,
    dilation_rate: Vec<usize>,
    groups: usize,
    bias: Option<PyRef<'_, PyTensor>>,
) -> PyResult<(PyTensor, Vec<PyDim>)> {
    let filter_size = dims(&filter_size);
    let size = filter_size.iter().map(|d| d.size().unwrap_or(0)).collect();
    let args = ConvArgs {
        in_dim: in_dim.0.clone(),
        out_dim: out_dim.0.clone(),
        in_spatial_dims: dims(&in_spatial_dims),
        out_spatial_dims: out_spatial_dims.map(|o| dims(&o)),
        filter: filter.value()?,
        filter_size,
        window: Window {
            size,
            strides,
            dilation: dilation_rate,
            padding: parse_padding("conv", padding)?,
        },
        groups,
        bias: bias.map(|b| b.value()).transpose()?,
    };
    let x = source.value()?;
    pair(py.detach(move || rf::conv(&x, &args)))
}

/// Max or average pooling over 1 or 2 spatial dims, with one entry per
/// spatial dim in each window argument (``verjus.rf.pool`` takes RETURNN's
/// ints and defaults).
///
/// Padding frames never take part: they never win a max (out frames past a
/// sequence's end are 0, as in RETURNN) and an average divides by the number
/// of real frames in the window. Dilation above 1 is not supported yet.
///
/// :param Tensor source: the input
/// :param str mode: ``"max"`` or ``"avg"``
/// :param Sequence[int] pool_size: the window, per spatial dim
/// :param str | Sequence[int] padding: ``"valid"``, ``"same"`` or entries
///   padded on both sides, per spatial dim
/// :param Sequence[int] dilation_rate: per spatial dim
/// :param Sequence[int] strides: per spatial dim
/// :param Sequence[Dim] in_spatial_dims: 1 or 2 spatial dims
/// :param Sequence[Dim] | None out_spatial_dims: reuse these dims for the
///   output's spatial dims
/// :return: the output and the out spatial dims
/// :rtype: tuple[Tensor, list[Dim]]
#[pyfunction]
#[pyo3(signature = (source, *, mode, pool_size, padding, dilation_rate, strides, in_spatial_dims, out_spatial_dims))]
#[allow(clippy::too_many_arguments)] // RETURNN's keywords, one each
pub(super) fn rf_pool(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    mode: &str,
    pool_size: Vec<usize>,
    padding: &Bound<'_, PyAny>,
    dilation_rate: Vec<usize>,
    strides: Vec<usize>,
    in_spatial_dims: Vec<PyRef<'_, PyDim>>,
    out_spatial_dims: Option<Vec<PyRef<'_, PyDim>>>,
) -> PyResult<(PyTensor, Vec<PyDim>)> {
    let kind = rf::parse_pool_mode(mode).map_err(to_py_err)?;
    let window = Window {
        size: pool_size,
        strides,
        dilation: dilation_rate,
        padding: parse_padding("pool", padding)?,
    };
    let (x, spatial) = (source.value()?, dims(&in_spatial_dims));
    let out = out_spatial_dims.map(|o| dims(&o));
    pair(py.detach(move || rf::pool(&x, kind, &window, &spatial, out)))
}
