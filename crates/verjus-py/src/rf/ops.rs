//! The RF ops as `rf_*` functions, with RETURNN's signatures: dim arguments
//! are keyword-only and take a `Dim` or a sequence of them.

use super::tensor::{dims_of, rf_from_numpy};
use super::{backend, compute, PyDim, PyTensor};
use crate::error::to_py_err;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use verjus::ops::{BinaryOp, UnaryOp};
use verjus::rf::{self, Dim, ReduceMode, RfDType, RfTensor};
use verjus::{Result, Tensor};

/// A `Dim` or a sequence of `Dim`s.
fn dim_list(what: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<Dim>> {
    if let Ok(d) = obj.cast::<PyDim>() {
        return Ok(vec![d.get().0.clone()]);
    }
    match obj.extract::<Vec<PyRef<'_, PyDim>>>() {
        Ok(dims) => Ok(dims_of(&dims)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be a Dim or a sequence of Dims, got {}",
            obj.get_type()
        ))),
    }
}

/// A `Tensor` or a number (as a float32 scalar tensor).
fn operand(what: &str, obj: &Bound<'_, PyAny>) -> PyResult<RfTensor> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(t.get().0.clone());
    }
    let s = obj.extract::<f64>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a Tensor or a number, got {}",
            obj.get_type()
        ))
    })?;
    let value = Tensor::from_vec(Vec::new(), vec![s as f32]).map_err(to_py_err)?;
    RfTensor::from_tensor(value, Vec::new(), None, backend()?, false).map_err(to_py_err)
}

/// Runs `f` with the GIL released and wraps its tensor.
fn run(py: Python<'_>, f: impl FnOnce() -> Result<RfTensor> + Send) -> PyResult<PyTensor> {
    py.detach(f).map(PyTensor).map_err(to_py_err)
}

/// [`run`] for the frequent ops: the GIL is kept for tiny CPU inputs
/// (see [`compute`]).
fn run_on(
    py: Python<'_>,
    inputs: &[&RfTensor],
    f: impl FnOnce() -> Result<RfTensor> + Send,
) -> PyResult<PyTensor> {
    compute(py, inputs, f).map(PyTensor).map_err(to_py_err)
}

#[pyfunction]
#[pyo3(signature = (a, kind, b, *, allow_broadcast_all_sources = false))]
fn rf_combine(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    kind: &str,
    b: &Bound<'_, PyAny>,
    allow_broadcast_all_sources: bool,
) -> PyResult<PyTensor> {
    let op = rf::parse_kind(kind).map_err(to_py_err)?;
    binary(py, a, op, b, allow_broadcast_all_sources)
}

#[pyfunction]
#[pyo3(signature = (a, kind, b, *, allow_broadcast_all_sources = false))]
fn rf_compare(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    kind: &str,
    b: &Bound<'_, PyAny>,
    allow_broadcast_all_sources: bool,
) -> PyResult<PyTensor> {
    let op = rf::parse_kind(kind).map_err(to_py_err)?;
    if op.is_differentiable() {
        return Err(to_py_err(verjus::Error::invalid(
            "compare",
            format!("{kind:?} is not a comparison"),
        )));
    }
    binary(py, a, op, b, allow_broadcast_all_sources)
}

/// `a op b` for tensors or numbers (at least one a tensor).
fn binary(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    op: BinaryOp,
    b: &Bound<'_, PyAny>,
    allow: bool,
) -> PyResult<PyTensor> {
    match (a.cast::<PyTensor>(), b.cast::<PyTensor>()) {
        (Ok(a), Ok(b)) => {
            let (a, b) = (&a.get().0, &b.get().0);
            run_on(py, &[a, b], || rf::combine(a, op, b, allow))
        }
        (Ok(a), Err(_)) => {
            let (a, s) = (a.get().0.clone(), b.extract::<f64>()?);
            run(py, move || rf::combine_scalar(&a, op, s, false))
        }
        (Err(_), Ok(b)) => {
            let (b, s) = (b.get().0.clone(), a.extract::<f64>()?);
            run(py, move || rf::combine_scalar(&b, op, s, true))
        }
        _ => Err(PyTypeError::new_err(
            "combine: at least one operand must be a Tensor",
        )),
    }
}

#[pyfunction]
#[pyo3(signature = (a, b, *, reduce, use_mask = true))]
fn rf_matmul(
    py: Python<'_>,
    a: PyRef<'_, PyTensor>,
    b: PyRef<'_, PyTensor>,
    reduce: &Bound<'_, PyAny>,
    use_mask: bool,
) -> PyResult<PyTensor> {
    let (a, b, reduce) = (&a.0, &b.0, dim_list("reduce", reduce)?);
    run_on(py, &[a, b], || rf::matmul(a, b, &reduce, use_mask))
}

fn reduce(
    py: Python<'_>,
    source: &PyTensor,
    mode: ReduceMode,
    axis: &Bound<'_, PyAny>,
    use_mask: bool,
) -> PyResult<PyTensor> {
    let (x, axis) = (&source.0, dim_list("axis", axis)?);
    run_on(py, &[x], || rf::reduce(x, mode, &axis, use_mask))
}

macro_rules! reduce_fn {
    ($name:ident, $mode:ident) => {
        #[pyfunction]
        #[pyo3(signature = (source, *, axis, use_mask = true))]
        fn $name(
            py: Python<'_>,
            source: PyRef<'_, PyTensor>,
            axis: &Bound<'_, PyAny>,
            use_mask: bool,
        ) -> PyResult<PyTensor> {
            reduce(py, &source, ReduceMode::$mode, axis, use_mask)
        }
    };
}

reduce_fn!(rf_reduce_sum, Sum);
reduce_fn!(rf_reduce_mean, Mean);
reduce_fn!(rf_reduce_max, Max);
reduce_fn!(rf_reduce_min, Min);
reduce_fn!(rf_reduce_logsumexp, LogSumExp);

#[pyfunction]
#[pyo3(signature = (source, *, axis, use_mask = true))]
fn rf_reduce_argmax(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    use_mask: bool,
) -> PyResult<PyTensor> {
    let (x, axis) = (source.0.clone(), axis.0.clone());
    run(py, move || rf::argmax(&x, &axis, use_mask))
}

#[pyfunction]
#[pyo3(signature = (x, *, axis, use_mask = true))]
fn rf_softmax(
    py: Python<'_>,
    x: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    use_mask: bool,
) -> PyResult<PyTensor> {
    let (x, axis) = (&x.0, &axis.0);
    run_on(py, &[x], || rf::softmax(x, axis, use_mask))
}

#[pyfunction]
#[pyo3(signature = (x, *, axis, use_mask = true))]
fn rf_log_softmax(
    py: Python<'_>,
    x: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    use_mask: bool,
) -> PyResult<PyTensor> {
    let (x, axis) = (&x.0, &axis.0);
    run_on(py, &[x], || rf::log_softmax(x, axis, use_mask))
}

macro_rules! unary_fn {
    ($name:ident, $op:ident) => {
        #[pyfunction]
        fn $name(py: Python<'_>, x: PyRef<'_, PyTensor>) -> PyResult<PyTensor> {
            let x = &x.0;
            run_on(py, &[x], || rf::activation(x, UnaryOp::$op))
        }
    };
}

unary_fn!(rf_relu, Relu);
unary_fn!(rf_gelu, Gelu);
unary_fn!(rf_sigmoid, Sigmoid);
unary_fn!(rf_tanh, Tanh);
unary_fn!(rf_exp, Exp);
unary_fn!(rf_log, Log);
unary_fn!(rf_sqrt, Sqrt);
unary_fn!(rf_rsqrt, Rsqrt);
unary_fn!(rf_abs, Abs);
unary_fn!(rf_square, Square);

#[pyfunction]
#[pyo3(signature = (x, *, eps = 1e-7))]
fn rf_safe_log(py: Python<'_>, x: PyRef<'_, PyTensor>, eps: f32) -> PyResult<PyTensor> {
    let x = x.0.clone();
    run(py, move || rf::safe_log(&x, eps))
}

#[pyfunction]
#[pyo3(signature = (cond, true_, false_, *, allow_broadcast_all_sources = false))]
fn rf_where(
    py: Python<'_>,
    cond: PyRef<'_, PyTensor>,
    true_: &Bound<'_, PyAny>,
    false_: &Bound<'_, PyAny>,
    allow_broadcast_all_sources: bool,
) -> PyResult<PyTensor> {
    let c = cond.0.clone();
    let (x, y) = (operand("true_", true_)?, operand("false_", false_)?);
    run(py, move || {
        rf::where_(&c, &x, &y, allow_broadcast_all_sources)
    })
}

#[pyfunction]
fn rf_cast(py: Python<'_>, x: PyRef<'_, PyTensor>, dtype: &str) -> PyResult<PyTensor> {
    let (x, dtype) = (x.0.clone(), RfDType::parse(dtype).map_err(to_py_err)?);
    run(py, move || rf::cast(&x, dtype))
}

#[pyfunction]
fn rf_stop_gradient(x: PyRef<'_, PyTensor>) -> PyTensor {
    PyTensor(rf::stop_gradient(&x.0))
}

#[pyfunction]
fn rf_sequence_mask(py: Python<'_>, dims: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let (dims, be) = (dim_list("dims", dims)?, backend()?);
    run(py, move || rf::sequence_mask(&dims, &be))
}

#[pyfunction]
fn rf_range_over_dim(py: Python<'_>, dim: PyRef<'_, PyDim>) -> PyResult<PyTensor> {
    let (dim, be) = (dim.0.clone(), backend()?);
    run(py, move || rf::range_over_dim(&dim, &be))
}

#[pyfunction]
fn rf_gradient(
    py: Python<'_>,
    y: PyRef<'_, PyTensor>,
    x: PyRef<'_, PyTensor>,
) -> PyResult<PyTensor> {
    let (y, x) = (y.0.clone(), x.0.clone());
    run(py, move || rf::gradient(&y, &x))
}

#[pyfunction]
#[pyo3(signature = (source, *, indices, axis, clip_to_valid = false))]
fn rf_gather(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    indices: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    clip_to_valid: bool,
) -> PyResult<PyTensor> {
    let (x, i, axis) = (source.0.clone(), indices.0.clone(), axis.0.clone());
    run(py, move || rf::gather(&x, &i, &axis, clip_to_valid))
}

#[pyfunction]
fn rf_one_hot(py: Python<'_>, source: PyRef<'_, PyTensor>) -> PyResult<PyTensor> {
    let x = source.0.clone();
    run(py, move || rf::one_hot(&x))
}

#[pyfunction]
#[pyo3(signature = (*, estimated, target, axis, estimated_type))]
fn rf_cross_entropy(
    py: Python<'_>,
    estimated: PyRef<'_, PyTensor>,
    target: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    estimated_type: &str,
) -> PyResult<PyTensor> {
    let kind = rf::EstimatedType::parse(estimated_type).map_err(to_py_err)?;
    let (x, t, axis) = (estimated.0.clone(), target.0.clone(), axis.0.clone());
    run(py, move || rf::cross_entropy(&x, &t, &axis, kind))
}

#[pyfunction]
#[pyo3(signature = (*sources, allow_broadcast = false, out_dim = None))]
fn rf_concat(
    py: Python<'_>,
    sources: Vec<(PyRef<'_, PyTensor>, PyRef<'_, PyDim>)>,
    allow_broadcast: bool,
    out_dim: Option<PyRef<'_, PyDim>>,
) -> PyResult<(PyTensor, PyDim)> {
    if allow_broadcast {
        return Err(to_py_err(verjus::Error::invalid(
            "concat",
            "allow_broadcast=True is not supported yet",
        )));
    }
    let parts: Vec<(RfTensor, Dim)> = sources
        .iter()
        .map(|(t, d)| (t.0.clone(), d.0.clone()))
        .collect();
    let out_dim = out_dim.map(|d| d.0.clone());
    let (t, d) = py
        .detach(move || rf::concat(&parts, out_dim))
        .map_err(to_py_err)?;
    Ok((PyTensor(t), PyDim(d)))
}

#[pyfunction]
#[pyo3(signature = (source, *, axes, padding, out_dims = None, value = 0.0))]
fn rf_pad(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    axes: &Bound<'_, PyAny>,
    padding: Vec<(i64, i64)>,
    out_dims: Option<&Bound<'_, PyAny>>,
    value: f32,
) -> PyResult<(PyTensor, Vec<PyDim>)> {
    let padding = padding
        .into_iter()
        .map(
            |(lo, hi)| match (usize::try_from(lo), usize::try_from(hi)) {
                (Ok(lo), Ok(hi)) => Ok((lo, hi)),
                _ => Err(PyValueError::new_err(format!(
                    "pad: paddings must be non-negative, got ({lo}, {hi})"
                ))),
            },
        )
        .collect::<PyResult<Vec<_>>>()?;
    let (x, axes) = (source.0.clone(), dim_list("axes", axes)?);
    let out_dims = out_dims.map(|o| dim_list("out_dims", o)).transpose()?;
    let (t, dims) = py
        .detach(move || rf::pad(&x, &axes, &padding, out_dims, value))
        .map_err(to_py_err)?;
    Ok((PyTensor(t), dims.into_iter().map(PyDim).collect()))
}

#[pyfunction]
#[pyo3(signature = (*, dims, fill_value, dtype = None))]
fn rf_full(
    py: Python<'_>,
    dims: &Bound<'_, PyAny>,
    fill_value: f64,
    dtype: Option<&str>,
) -> PyResult<PyTensor> {
    let dtype = RfDType::parse(dtype.unwrap_or("float32")).map_err(to_py_err)?;
    let (dims, be) = (dim_list("dims", dims)?, backend()?);
    run(py, move || rf::full(&dims, fill_value, dtype, &be))
}

#[pyfunction]
fn rf_full_like(py: Python<'_>, other: PyRef<'_, PyTensor>, fill_value: f64) -> PyResult<PyTensor> {
    let x = other.0.clone();
    run(py, move || rf::full_like(&x, fill_value))
}

#[pyfunction]
fn rf_expand_dim(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    dim: PyRef<'_, PyDim>,
) -> PyResult<PyTensor> {
    let (x, dim) = (source.0.clone(), dim.0.clone());
    run(py, move || rf::expand_dim(&x, &dim))
}

#[pyfunction]
#[pyo3(signature = (source, *, dims, out_dim = None))]
fn rf_merge_dims(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    dims: &Bound<'_, PyAny>,
    out_dim: Option<PyRef<'_, PyDim>>,
) -> PyResult<(PyTensor, PyDim)> {
    let (x, dims) = (source.0.clone(), dim_list("dims", dims)?);
    let out_dim = out_dim.map(|d| d.0.clone());
    let (t, d) = py
        .detach(move || rf::merge_dims(&x, &dims, out_dim))
        .map_err(to_py_err)?;
    Ok((PyTensor(t), PyDim(d)))
}

#[pyfunction]
#[pyo3(signature = (source, *, axis, dims))]
fn rf_split_dims(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    dims: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let (x, axis, dims) = (source.0.clone(), axis.0.clone(), dim_list("dims", dims)?);
    run(py, move || rf::split_dims(&x, &axis, &dims))
}

#[pyfunction]
#[pyo3(signature = (dims, *, minval = 0.0, maxval = 1.0))]
fn rf_random_uniform(
    py: Python<'_>,
    dims: &Bound<'_, PyAny>,
    minval: f32,
    maxval: f32,
) -> PyResult<PyTensor> {
    let (dims, be) = (dim_list("dims", dims)?, backend()?);
    run(py, move || rf::random_uniform(&dims, minval, maxval, &be))
}

#[pyfunction]
#[pyo3(signature = (dims, *, mean = 0.0, stddev = 1.0))]
fn rf_random_normal(
    py: Python<'_>,
    dims: &Bound<'_, PyAny>,
    mean: f32,
    stddev: f32,
) -> PyResult<PyTensor> {
    let (dims, be) = (dim_list("dims", dims)?, backend()?);
    run(py, move || rf::random_normal(&dims, mean, stddev, &be))
}

#[pyfunction]
fn rf_set_random_seed(seed: u64) {
    rf::set_random_seed(seed);
}

#[pyfunction]
#[pyo3(signature = (source, drop_prob, axis, train))]
fn rf_dropout(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    drop_prob: f32,
    axis: Option<&Bound<'_, PyAny>>,
    train: bool,
) -> PyResult<PyTensor> {
    let x = source.0.clone();
    let axis = axis.map(|a| dim_list("axis", a)).transpose()?;
    run(py, move || {
        rf::dropout(&x, drop_prob, axis.as_deref(), train)
    })
}

/// Adds the functions to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rf_from_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(rf_combine, m)?)?;
    m.add_function(wrap_pyfunction!(rf_compare, m)?)?;
    m.add_function(wrap_pyfunction!(rf_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(rf_reduce_sum, m)?)?;
    m.add_function(wrap_pyfunction!(rf_reduce_mean, m)?)?;
    m.add_function(wrap_pyfunction!(rf_reduce_max, m)?)?;
    m.add_function(wrap_pyfunction!(rf_reduce_min, m)?)?;
    m.add_function(wrap_pyfunction!(rf_reduce_logsumexp, m)?)?;
    m.add_function(wrap_pyfunction!(rf_reduce_argmax, m)?)?;
    m.add_function(wrap_pyfunction!(rf_softmax, m)?)?;
    m.add_function(wrap_pyfunction!(rf_log_softmax, m)?)?;
    m.add_function(wrap_pyfunction!(rf_relu, m)?)?;
    m.add_function(wrap_pyfunction!(rf_gelu, m)?)?;
    m.add_function(wrap_pyfunction!(rf_sigmoid, m)?)?;
    m.add_function(wrap_pyfunction!(rf_tanh, m)?)?;
    m.add_function(wrap_pyfunction!(rf_exp, m)?)?;
    m.add_function(wrap_pyfunction!(rf_log, m)?)?;
    m.add_function(wrap_pyfunction!(rf_sqrt, m)?)?;
    m.add_function(wrap_pyfunction!(rf_rsqrt, m)?)?;
    m.add_function(wrap_pyfunction!(rf_abs, m)?)?;
    m.add_function(wrap_pyfunction!(rf_square, m)?)?;
    m.add_function(wrap_pyfunction!(rf_safe_log, m)?)?;
    m.add_function(wrap_pyfunction!(rf_where, m)?)?;
    m.add_function(wrap_pyfunction!(rf_cast, m)?)?;
    m.add_function(wrap_pyfunction!(rf_stop_gradient, m)?)?;
    m.add_function(wrap_pyfunction!(rf_sequence_mask, m)?)?;
    m.add_function(wrap_pyfunction!(rf_range_over_dim, m)?)?;
    m.add_function(wrap_pyfunction!(rf_gradient, m)?)?;
    m.add_function(wrap_pyfunction!(rf_gather, m)?)?;
    m.add_function(wrap_pyfunction!(rf_concat, m)?)?;
    m.add_function(wrap_pyfunction!(rf_pad, m)?)?;
    m.add_function(wrap_pyfunction!(rf_full, m)?)?;
    m.add_function(wrap_pyfunction!(rf_full_like, m)?)?;
    m.add_function(wrap_pyfunction!(rf_expand_dim, m)?)?;
    m.add_function(wrap_pyfunction!(rf_merge_dims, m)?)?;
    m.add_function(wrap_pyfunction!(rf_split_dims, m)?)?;
    m.add_function(wrap_pyfunction!(rf_random_uniform, m)?)?;
    m.add_function(wrap_pyfunction!(rf_random_normal, m)?)?;
    m.add_function(wrap_pyfunction!(rf_set_random_seed, m)?)?;
    m.add_function(wrap_pyfunction!(rf_dropout, m)?)?;
    m.add_function(wrap_pyfunction!(rf_one_hot, m)?)?;
    m.add_function(wrap_pyfunction!(rf_cross_entropy, m)?)?;
    Ok(())
}
