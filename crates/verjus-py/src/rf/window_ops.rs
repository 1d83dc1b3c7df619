//! The RF ops that cut or slide along dims: `rf_slice`, `rf_split`,
//! `rf_conv`, `rf_pool`. The Python wrappers in `verjus.rf` turn RETURNN's
//! int-or-sequence arguments into the per-dim lists these take.

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
    Ok((PyTensor(t), d.into_iter().map(PyDim).collect()))
}

#[pyfunction]
#[pyo3(signature = (source, *, axis, start = None, end = None, step = None, size = None, out_dim = None))]
#[allow(clippy::too_many_arguments)] // RETURNN's keywords, one each
fn rf_slice(
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
        source.0.clone(),
        axis.0.clone(),
        out_dim.map(|d| d.0.clone()),
    );
    let (t, d) = py
        .detach(move || rf::slice(&x, &axis, &range, out_dim))
        .map_err(to_py_err)?;
    Ok((PyTensor(t), PyDim(d)))
}

#[pyfunction]
#[pyo3(signature = (source, *, axis, out_dims))]
fn rf_split(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    out_dims: Vec<PyRef<'_, PyDim>>,
) -> PyResult<Vec<PyTensor>> {
    let (x, axis, out_dims) = (source.0.clone(), axis.0.clone(), dims(&out_dims));
    let parts = py
        .detach(move || rf::split(&x, &axis, &out_dims))
        .map_err(to_py_err)?;
    Ok(parts.into_iter().map(PyTensor).collect())
}

#[pyfunction]
#[pyo3(signature = (
    source, *, in_dim, out_dim, in_spatial_dims, out_spatial_dims, filter, filter_size,
    padding, strides, dilation_rate, groups, bias
))]
#[allow(clippy::too_many_arguments)] // RETURNN's keywords, one each
fn rf_conv(
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
        filter: filter.0.clone(),
        filter_size,
        window: Window {
            size,
            strides,
            dilation: dilation_rate,
            padding: parse_padding("conv", padding)?,
        },
        groups,
        bias: bias.map(|b| b.0.clone()),
    };
    let x = source.0.clone();
    pair(py.detach(move || rf::conv(&x, &args)))
}

#[pyfunction]
#[pyo3(signature = (source, *, mode, pool_size, padding, dilation_rate, strides, in_spatial_dims, out_spatial_dims))]
#[allow(clippy::too_many_arguments)] // RETURNN's keywords, one each
fn rf_pool(
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
    let (x, spatial) = (source.0.clone(), dims(&in_spatial_dims));
    let out = out_spatial_dims.map(|o| dims(&o));
    pair(py.detach(move || rf::pool(&x, kind, &window, &spatial, out)))
}

/// Adds the functions to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rf_slice, m)?)?;
    m.add_function(wrap_pyfunction!(rf_split, m)?)?;
    m.add_function(wrap_pyfunction!(rf_conv, m)?)?;
    m.add_function(wrap_pyfunction!(rf_pool, m)?)?;
    Ok(())
}
