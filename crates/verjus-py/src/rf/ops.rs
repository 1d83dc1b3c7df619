//! The RF ops as `rf_*` functions, with RETURNN's signatures: dim arguments
//! are keyword-only and take a `Dim` or a sequence of them. Each docstring
//! is the op's Python documentation (after RETURNN's), with the parameter
//! and return types the stub generator reads (`:param TYPE name:`,
//! `:rtype:`); `super::register` lists them.

use super::operators::number_op;
use super::tensor::dims_of;
use super::{backend, compute, PyDim, PyTensor};
use crate::error::to_py_err;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyFloat;
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
        return t.get().value();
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
    py.detach(f).map(PyTensor::from).map_err(to_py_err)
}

/// [`run`] for the frequent ops: the GIL is kept for tiny CPU inputs
/// (see [`compute`]).
fn run_on(
    py: Python<'_>,
    inputs: &[&RfTensor],
    f: impl FnOnce() -> Result<RfTensor> + Send,
) -> PyResult<PyTensor> {
    compute(py, inputs, f)
        .map(PyTensor::from)
        .map_err(to_py_err)
}

/// Combines ``a`` and ``b`` elementwise, lined up by dims.
///
/// The result's dims are the union of the operands' dims in order of
/// appearance (``a``'s, then ``b``'s new ones). Integer operands are computed
/// in float32 (exact below 2**24) and the result is cast back; ``/`` always
/// gives float32, a comparison bool, and an integer to a negative integer
/// power is an error.
///
/// :param Tensor | float a: the first operand
/// :param str kind: ``"add"`` / ``"+"``, ``"sub"`` / ``"-"``, ``"mul"`` / ``"*"``,
///   ``"truediv"`` / ``"/"``, ``"pow"`` / ``"**"``, ``"maximum"``, ``"minimum"``,
///   ``"logical_and"``, ``"logical_or"``, or a comparison kind of ``compare``
/// :param Tensor | float b: the second operand (at least one is a Tensor)
/// :param bool allow_broadcast_all_sources: if True, neither operand needs to
///   have all dims of the result; otherwise that is an error naming both dim
///   lists (it usually means a mix-up of dims)
/// :return: element-wise combination of ``a`` and ``b``
/// :rtype: Tensor
#[pyfunction]
#[pyo3(name = "combine", signature = (a, kind, b, *, allow_broadcast_all_sources = false))]
pub(super) fn rf_combine(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    kind: &str,
    b: &Bound<'_, PyAny>,
    allow_broadcast_all_sources: bool,
) -> PyResult<PyTensor> {
    let op = rf::parse_kind(kind).map_err(to_py_err)?;
    binary(py, a, op, b, allow_broadcast_all_sources)
}

/// Compares ``a`` and ``b`` elementwise, lined up by dims (as ``combine``).
///
/// :param Tensor | float a: the first operand
/// :param str kind: ``"equal"`` / ``"=="``, ``"not_equal"`` / ``"!="``,
///   ``"less"`` / ``"<"``, ``"less_equal"`` / ``"<="``, ``"greater"`` / ``">"``,
///   ``"greater_equal"`` / ``">="``
/// :param Tensor | float b: the second operand (at least one is a Tensor)
/// :param bool allow_broadcast_all_sources: if True, neither operand needs to
///   have all dims of the result; otherwise that is an error
/// :return: element-wise comparison of ``a`` and ``b``, dtype bool
/// :rtype: Tensor
#[pyfunction]
#[pyo3(name = "compare", signature = (a, kind, b, *, allow_broadcast_all_sources = false))]
pub(super) fn rf_compare(
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
            let (a, b) = (&*a.get().shared()?, &*b.get().shared()?);
            run_on(py, &[a, b], || rf::combine(a, op, b, allow))
        }
        (Ok(a), Err(_)) => {
            let (t, s, float) = (
                a.get().value()?,
                b.extract::<f64>()?,
                b.is_instance_of::<PyFloat>(),
            );
            run(py, move || number_op(&t, op, s, float, false))
        }
        (Err(_), Ok(b)) => {
            let (t, s, float) = (
                b.get().value()?,
                a.extract::<f64>()?,
                a.is_instance_of::<PyFloat>(),
            );
            run(py, move || number_op(&t, op, s, float, true))
        }
        _ => Err(PyTypeError::new_err(
            "combine: at least one operand must be a Tensor",
        )),
    }
}

/// Batched matrix multiplication of ``a`` and ``b`` by dims: the sum over the
/// ``reduce`` dims of ``a * b`` (non-batched matmul and dot product are special
/// cases).
///
/// Dims that ``a`` and ``b`` share besides ``reduce`` are batch dims; the
/// dims only one of them has are its free axes. Depending on which dims are in
/// ``a``, ``b`` and ``reduce``, this is a scaling, scalar product, outer
/// product, matrix-vector or matrix-matrix product (all possibly batched). It
/// runs as one batched GEMM; a permute or reshape is skipped when the layout
/// already fits.
///
/// :param Tensor a: the first operand
/// :param Tensor b: the second operand
/// :param Dim | Sequence[Dim] reduce: the dims to sum over; both ``a`` and ``b``
///   must have them
/// :param bool use_mask: if True (default), the padding frames of a dynamic
///   reduce dim count as 0, so every sequence sums over its own frames
/// :return: the product; dim order: the common dims in ``a``'s order, then
///   ``a``'s own dims, then ``b``'s own dims
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (a, b, *, reduce, use_mask = true))]
pub(super) fn rf_matmul(
    py: Python<'_>,
    a: PyRef<'_, PyTensor>,
    b: PyRef<'_, PyTensor>,
    reduce: &Bound<'_, PyAny>,
    use_mask: bool,
) -> PyResult<PyTensor> {
    let (a, b, reduce) = (&*a.shared()?, &*b.shared()?, dim_list("reduce", reduce)?);
    run_on(py, &[a, b], || rf::matmul(a, b, &reduce, use_mask))
}

fn reduce(
    py: Python<'_>,
    source: &PyTensor,
    mode: ReduceMode,
    axis: &Bound<'_, PyAny>,
    use_mask: bool,
) -> PyResult<PyTensor> {
    let (x, axis) = (&*source.shared()?, dim_list("axis", axis)?);
    run_on(py, &[x], || rf::reduce(x, mode, &axis, use_mask))
}

/// A masked reduction `rf_*(source, *, axis, use_mask=True)`: the docs start
/// with `$summary` and `$empty` (what a sequence of length 0 gives).
macro_rules! reduce_fn {
    ($name:ident, $mode:ident, $summary:literal, $empty:literal) => {
        #[doc = $summary]
        #[doc = ""]
        #[doc = "With ``use_mask``, the padding of each dynamic dim in ``axis`` is left out,"]
        #[doc = "so every sequence gets what it would get alone; "]
        #[doc = $empty]
        #[doc = ""]
        #[doc = ":param Tensor source: the tensor to reduce (float32)"]
        #[doc = ":param Dim | Sequence[Dim] axis: the dim(s) to reduce over"]
        #[doc = ":param bool use_mask: if True (default), use the sequence lengths of"]
        #[doc = "  dynamic dims to ignore padding frames"]
        #[doc = ":return: ``source`` with ``axis`` removed (plus the lengths' dims of a"]
        #[doc = "  masked dynamic dim that ``source`` lacks)"]
        #[doc = ":rtype: Tensor"]
        #[pyfunction]
        #[pyo3(signature = (source, *, axis, use_mask = true))]
        pub(super) fn $name(
            py: Python<'_>,
            source: PyRef<'_, PyTensor>,
            axis: &Bound<'_, PyAny>,
            use_mask: bool,
        ) -> PyResult<PyTensor> {
            reduce(py, &source, ReduceMode::$mode, axis, use_mask)
        }
    };
}

reduce_fn!(
    rf_reduce_sum,
    Sum,
    "The sum of ``source`` over the dims ``axis``.",
    "a sequence of length 0 sums to 0."
);
reduce_fn!(
    rf_reduce_mean,
    Mean,
    "The mean of ``source`` over the dims ``axis``.",
    "the mean divides by each sequence's own length, and is 0 for length 0."
);
reduce_fn!(
    rf_reduce_max,
    Max,
    "The maximum of ``source`` over the dims ``axis``.",
    "a sequence of length 0 gives -inf."
);
reduce_fn!(
    rf_reduce_min,
    Min,
    "The minimum of ``source`` over the dims ``axis``.",
    "a sequence of length 0 gives +inf."
);
reduce_fn!(
    rf_reduce_logsumexp,
    LogSumExp,
    "``log(sum(exp(source)))`` over the dims ``axis``, computed stably.",
    "a sequence of length 0 gives -inf, never NaN."
);

/// The index of the maximum of ``source`` along ``axis``.
///
/// :param Tensor source: the tensor to reduce
/// :param Dim axis: the dim to take the index along
/// :param bool use_mask: if True (default), the padding frames of a dynamic
///   ``axis`` never win; a sequence of length 0 gives 0
/// :return: int64 indices with ``axis`` removed, ``sparse_dim`` = ``axis``
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (source, *, axis, use_mask = true))]
pub(super) fn rf_reduce_argmax(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    use_mask: bool,
) -> PyResult<PyTensor> {
    let (x, axis) = (source.value()?, axis.0.clone());
    run(py, move || rf::argmax(&x, &axis, use_mask))
}

/// Softmax over ``axis``: ``exp(x) / reduce_sum(exp(x), axis=axis)``.
///
/// :param Tensor x: the logits (float32)
/// :param Dim axis: the dim to normalize over
/// :param bool use_mask: if True (default) and ``axis`` is dynamic, padding
///   frames get no probability and are 0 in the result; a sequence of length 0
///   gives all zeros, never NaN
/// :return: probabilities, with ``x``'s dims
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (x, *, axis, use_mask = true))]
pub(super) fn rf_softmax(
    py: Python<'_>,
    x: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    use_mask: bool,
) -> PyResult<PyTensor> {
    let (x, axis) = (&*x.shared()?, &axis.0);
    run_on(py, &[x], || rf::softmax(x, axis, use_mask))
}

/// Layer normalisation over static ``axis`` dims as one fused op: ``x``
/// normalised to mean 0 and variance 1, times ``scale``, plus ``bias``.
/// ``rf.layer_norm`` calls it where it applies (its composite form covers
/// dynamic axes and a scale or bias over other dims).
///
/// :param Tensor x: input (float32)
/// :param list[Dim] axis: the static dims to normalise over
/// :param float eps: added to the variance
/// :param Tensor|None scale: over exactly the ``axis`` dims
/// :param Tensor|None bias: over exactly the ``axis`` dims
/// :return: the normalised tensor, with ``x``'s dims
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (x, *, axis, eps, scale = None, bias = None))]
pub(super) fn rf_layer_norm(
    py: Python<'_>,
    x: PyRef<'_, PyTensor>,
    axis: &Bound<'_, PyAny>,
    eps: f32,
    scale: Option<PyRef<'_, PyTensor>>,
    bias: Option<PyRef<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let axis = dim_list("axis", axis)?;
    let x = &*x.shared()?;
    let (scale, bias) = (
        scale.map(|s| s.value()).transpose()?,
        bias.map(|b| b.value()).transpose()?,
    );
    run_on(py, &[x], || {
        rf::layer_norm(x, &axis, eps, scale.as_ref(), bias.as_ref())
    })
}

/// Log-softmax over ``axis``: ``x - reduce_logsumexp(x, axis=axis)``.
///
/// :param Tensor x: the logits (float32)
/// :param Dim axis: the dim to normalize over
/// :param bool use_mask: if True (default) and ``axis`` is dynamic, padding
///   frames get no probability and are -inf in the result; a sequence of
///   length 0 gives all -inf, never NaN
/// :return: log-probabilities, with ``x``'s dims
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (x, *, axis, use_mask = true))]
pub(super) fn rf_log_softmax(
    py: Python<'_>,
    x: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    use_mask: bool,
) -> PyResult<PyTensor> {
    let (x, axis) = (&*x.shared()?, &axis.0);
    run_on(py, &[x], || rf::log_softmax(x, axis, use_mask))
}

/// An elementwise function `rf_*(x)` of a float32 tensor, documented by
/// the `$summary` lines.
macro_rules! unary_fn {
    ($name:ident, $op:ident, $($summary:literal),+) => {
        $(#[doc = $summary])+
        #[doc = ""]
        #[doc = ":param Tensor x: a float32 tensor"]
        #[doc = ":return: the function of each entry, with ``x``'s dims"]
        #[doc = ":rtype: Tensor"]
        #[pyfunction]
        pub(super) fn $name(py: Python<'_>, x: PyRef<'_, PyTensor>) -> PyResult<PyTensor> {
            let x = &*x.shared()?;
            run_on(py, &[x], || rf::activation(x, UnaryOp::$op))
        }
    };
}

unary_fn!(rf_relu, Relu, "Rectified linear unit: ``max(x, 0)``.");
unary_fn!(
    rf_gelu,
    Gelu,
    "Gaussian error linear unit: ``x * P(X <= x)`` for ``X ~ N(0, 1)``, exact",
    "(with erf, without the tanh approximation)."
);
unary_fn!(
    rf_sigmoid,
    Sigmoid,
    "The logistic sigmoid: ``1 / (1 + exp(-x))``."
);
unary_fn!(rf_tanh, Tanh, "The hyperbolic tangent.");
unary_fn!(
    rf_silu,
    Silu,
    "SiLU (swish): ``x * sigmoid(x)``; ``swish`` is the same function."
);
unary_fn!(rf_exp, Exp, "``exp(x)``.");
unary_fn!(rf_sin, Sin, "The sine (of radians).");
unary_fn!(rf_cos, Cos, "The cosine (of radians).");
unary_fn!(
    rf_log,
    Log,
    "The natural logarithm (``-inf`` at 0; see ``safe_log``)."
);
unary_fn!(rf_sqrt, Sqrt, "The square root.");
unary_fn!(
    rf_rsqrt,
    Rsqrt,
    "The reciprocal square root: ``1 / sqrt(x)``."
);
unary_fn!(rf_abs, Abs, "The absolute value.");
unary_fn!(rf_square, Square, "``x * x``.");
unary_fn!(
    rf_softplus,
    Softplus,
    "``log(1 + exp(x))``, computed without overflow for large ``x``."
);
unary_fn!(
    rf_log_sigmoid,
    LogSigmoid,
    "``log(sigmoid(x))``, finite where ``sigmoid(x)`` underflows to 0."
);

/// ``log(max(x, eps))``: finite where ``x`` is 0, and so its gradient too.
///
/// :param Tensor x: a float32 tensor
/// :param float eps: the smallest value taken (RETURNN's default is the
///   dtype's smallest positive value; verjus uses 1e-7)
/// :return: the logarithm, with ``x``'s dims
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (x, *, eps = 1e-7))]
pub(super) fn rf_safe_log(py: Python<'_>, x: PyRef<'_, PyTensor>, eps: f32) -> PyResult<PyTensor> {
    let x = x.value()?;
    run(py, move || rf::safe_log(&x, eps))
}

/// ``true_`` where ``cond`` else ``false_``, elementwise, lined up by dims.
///
/// The result's dims are the union of the three operands' dims in order of
/// appearance (``cond``'s, ``true_``'s, ``false_``'s). The value not chosen is
/// never read, so an inf or NaN there does not reach the result or its
/// gradient.
///
/// :param Tensor cond: a bool tensor
/// :param Tensor | float true_: the values where ``cond`` holds (a number is a
///   float32 scalar)
/// :param Tensor | float false_: the values elsewhere
/// :param bool allow_broadcast_all_sources: if True, no operand needs to have
///   all dims of the result; otherwise that is an error
/// :return: ``true_ if cond else false_``, elementwise
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (cond, true_, false_, *, allow_broadcast_all_sources = false))]
pub(super) fn rf_where(
    py: Python<'_>,
    cond: PyRef<'_, PyTensor>,
    true_: &Bound<'_, PyAny>,
    false_: &Bound<'_, PyAny>,
    allow_broadcast_all_sources: bool,
) -> PyResult<PyTensor> {
    let c = cond.value()?;
    let (x, y) = (operand("true_", true_)?, operand("false_", false_)?);
    run(py, move || {
        rf::where_(&c, &x, &y, allow_broadcast_all_sources)
    })
}

/// ``x`` with another dtype. Float to float keeps the gradient; a cast to or
/// from an integer or bool is a constant; to bool is ``x != 0``.
///
/// :param Tensor x: the tensor
/// :param str dtype: ``"float32"``, ``"int32"``, ``"int64"`` or ``"bool"``
/// :return: the same data (and dims), but with a different dtype
/// :rtype: Tensor
#[pyfunction]
pub(super) fn rf_cast(py: Python<'_>, x: PyRef<'_, PyTensor>, dtype: &str) -> PyResult<PyTensor> {
    let (x, dtype) = (x.value()?, RfDType::parse(dtype).map_err(to_py_err)?);
    run(py, move || rf::cast(&x, dtype))
}

/// ``x``'s values with no gradient flowing back through them.
///
/// :param Tensor x: the tensor
/// :return: the same values and dims, a constant for the gradient
/// :rtype: Tensor
#[pyfunction]
pub(super) fn rf_stop_gradient(x: PyRef<'_, PyTensor>) -> PyResult<PyTensor> {
    Ok(PyTensor::from(rf::stop_gradient(&*x.shared()?)))
}

/// The mask of the valid frames of dynamic dims, from their sequence lengths.
///
/// :param Dim | Sequence[Dim] dims: the dims (static ones need no mask)
/// :return: bool, True where every dynamic dim among ``dims`` is within its
///   sequence's length, over the lengths' dims and those dims; a True scalar
///   when none is dynamic
/// :rtype: Tensor
#[pyfunction]
pub(super) fn rf_sequence_mask(py: Python<'_>, dims: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let (dims, be) = (dim_list("dims", dims)?, backend()?);
    run(py, move || rf::sequence_mask(&dims, &be))
}

/// ``[0, 1, ..., size - 1]`` over ``[dim]``, on the default device (or
/// ``device``).
///
/// :param Dim dim: a dim of known size (static, or the longest sequence of a
///   dynamic dim)
/// :param str | None dtype: ``"int32"`` (default, with ``sparse_dim`` =
///   ``dim``), ``"int64"`` or ``"float32"``
/// :param str | None device: ``"cpu"``, ``"cuda"``, ... (default: the default
///   device)
/// :return: the positions
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (dim, *, dtype = None, device = None))]
pub(super) fn rf_range_over_dim(
    py: Python<'_>,
    dim: PyRef<'_, PyDim>,
    dtype: Option<&str>,
    device: Option<&str>,
) -> PyResult<PyTensor> {
    let dtype = dtype.map(RfDType::parse).transpose().map_err(to_py_err)?;
    let be = match device {
        Some(name) => crate::device::backend(name)?,
        None => backend()?,
    };
    let dim = dim.0.clone();
    run(py, move || {
        let range = rf::range_over_dim(&dim, &be)?;
        match dtype {
            Some(dtype) if dtype != range.dtype() => rf::cast(&range, dtype),
            _ => Ok(range),
        }
    })
}

/// The gradient ``dy/dx`` through the autograd tape, without touching
/// ``.grad``.
///
/// :param Tensor y: a one-element tensor (e.g. a loss)
/// :param Tensor x: a tensor that requires a gradient (a parameter, or made
///   with ``requires_grad``), or one computed from such
/// :return: ``dy/dx`` with ``x``'s dims (zeros when ``y`` does not depend on
///   ``x``)
/// :rtype: Tensor
#[pyfunction]
pub(super) fn rf_gradient(
    py: Python<'_>,
    y: PyRef<'_, PyTensor>,
    x: PyRef<'_, PyTensor>,
) -> PyResult<PyTensor> {
    let (y, x) = (y.value()?, x.value()?);
    run(py, move || rf::gradient(&y, &x))
}

/// The entries of ``source`` along ``axis`` at ``indices``: ``verjus.rf.gather``
/// without its defaults (it takes an int index and ``axis`` from the indices'
/// ``sparse_dim``).
///
/// :param Tensor source: ``[batch_dims..., axis, feature_dims...]``
/// :param Tensor indices: ``[batch_dims..., indices_dims...]``, int32 or int64;
///   dims shared with ``source`` are batch dims
/// :param Dim axis: the dim of ``source`` to gather from
/// :param bool clip_to_valid: if True, clip the indices into ``[0, len - 1]``
///   (each sequence's own length for a dynamic ``axis``)
/// :return: ``[batch_dims..., indices_dims..., feature_dims...]``
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (source, *, indices, axis, clip_to_valid = false))]
pub(super) fn rf_gather(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    indices: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    clip_to_valid: bool,
) -> PyResult<PyTensor> {
    let (x, i, axis) = (source.value()?, indices.value()?, axis.0.clone());
    run(py, move || rf::gather(&x, &i, &axis, clip_to_valid))
}

/// One-hot vectors of class indices (a special case of ``sparse_to_dense``).
///
/// Usually not needed: most ops take sparse tensors as they are, and much
/// more efficiently than dense ones.
///
/// :param Tensor source: integer class indices with a ``sparse_dim``
/// :return: float32 over ``source``'s dims plus its ``sparse_dim``: 1.0 at the
///   index, else 0.0
/// :rtype: Tensor
#[pyfunction]
pub(super) fn rf_one_hot(py: Python<'_>, source: PyRef<'_, PyTensor>) -> PyResult<PyTensor> {
    let x = source.value()?;
    run(py, move || rf::one_hot(&x))
}

/// Cross entropy ``-reduce_sum(target * log(estimated), axis=axis)``.
///
/// ``target`` is in probability space (normalized), or sparse: class indices
/// whose ``sparse_dim`` is ``axis``, giving ``-log p(target)``. A dense target
/// computes ``-matmul(target, log p, reduce=axis)`` as in RETURNN, so the
/// result has the target's dims first. The padding of dynamic dims is left
/// for the masked reduction that follows (e.g. ``reduce_mean``).
///
/// :param Tensor estimated: probs, log-probs or logits over ``axis``
/// :param Tensor target: probs (normalized) over ``axis``, or class indices
/// :param Dim axis: the class dim over which the softmax is computed
/// :param str estimated_type: ``"probs"``, ``"log-probs"`` or ``"logits"``
/// :return: the cross entropy, with the dims of ``estimated`` without ``axis``
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (*, estimated, target, axis, estimated_type))]
pub(super) fn rf_cross_entropy(
    py: Python<'_>,
    estimated: PyRef<'_, PyTensor>,
    target: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    estimated_type: &str,
) -> PyResult<PyTensor> {
    let kind = rf::EstimatedType::parse(estimated_type).map_err(to_py_err)?;
    let (x, t, axis) = (estimated.value()?, target.value()?, axis.0.clone());
    run(py, move || rf::cross_entropy(&x, &t, &axis, kind))
}

/// Concatenates the sources along their given dims into one new dim.
///
/// The sources must have the same other dims (in any order; the result
/// follows the first's). Static dims join as they are; dynamic dims join per
/// sequence: each sequence's own frames one after the other (new lengths: the
/// sum), so a sequence joined in a batch equals the same sequence joined
/// alone.
///
/// :param tuple[Tensor, Dim] sources: ``(tensor, dim)`` pairs; ``dim`` is the
///   axis to concatenate on
/// :param bool allow_broadcast: True (sources of different dims) is not
///   supported yet
/// :param Dim | None out_dim: reuse this dim for the concatenated dim (its
///   size must fit); by default a new one, static when all parts are
/// :return: the concatenated tensor and ``out_dim``
/// :rtype: tuple[Tensor, Dim]
#[pyfunction]
#[pyo3(signature = (*sources, allow_broadcast = false, out_dim = None))]
pub(super) fn rf_concat(
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
        .map(|(t, d)| Ok((t.value()?, d.0.clone())))
        .collect::<PyResult<_>>()?;
    let out_dim = out_dim.map(|d| d.0.clone());
    let (t, d) = py
        .detach(move || rf::concat(&parts, out_dim))
        .map_err(to_py_err)?;
    Ok((PyTensor::from(t), PyDim(d)))
}

/// Pads ``source`` with ``value`` left and right along ``axes``.
///
/// Right padding of a dynamic dim goes after each sequence's own end (new
/// lengths: old plus the padding), so a sequence padded in a batch equals
/// the same sequence padded alone (RETURNN's ``handle_dynamic_dims=True``).
///
/// :param Tensor source: the tensor
/// :param Dim | Sequence[Dim] axes: the dims to pad
/// :param Sequence[tuple[int, int]] padding: ``(left, right)`` per axis
/// :param Dim | Sequence[Dim] | None out_dims: reuse these dims for the padded
///   ones; by default new dims (dynamic for a dynamic axis)
/// :param float value: the value padded with
/// :return: the padded tensor and the out dim of each of ``axes``
/// :rtype: tuple[Tensor, list[Dim]]
#[pyfunction]
#[pyo3(signature = (source, *, axes, padding, out_dims = None, value = 0.0))]
pub(super) fn rf_pad(
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
    let (x, axes) = (source.value()?, dim_list("axes", axes)?);
    let out_dims = out_dims.map(|o| dim_list("out_dims", o)).transpose()?;
    let (t, dims) = py
        .detach(move || rf::pad(&x, &axes, &padding, out_dims, value))
        .map_err(to_py_err)?;
    Ok((PyTensor::from(t), dims.into_iter().map(PyDim).collect()))
}

/// A constant tensor over ``dims``, on the default device.
///
/// :param Dim | Sequence[Dim] dims: the dims, all of known size
/// :param float fill_value: the value of every entry
/// :param str | None dtype: ``"float32"`` (default), ``"int32"``, ``"int64"``
///   or ``"bool"``
/// :return: the tensor
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (*, dims, fill_value, dtype = None))]
pub(super) fn rf_full(
    py: Python<'_>,
    dims: &Bound<'_, PyAny>,
    fill_value: f64,
    dtype: Option<&str>,
) -> PyResult<PyTensor> {
    let dtype = RfDType::parse(dtype.unwrap_or("float32")).map_err(to_py_err)?;
    let (dims, be) = (dim_list("dims", dims)?, backend()?);
    run(py, move || rf::full(&dims, fill_value, dtype, &be))
}

/// A constant with ``other``'s dims and dtype (``zeros_like``, ``ones_like``).
///
/// :param Tensor other: the tensor whose dims and dtype are taken
/// :param float fill_value: the value of every entry
/// :return: the tensor, on ``other``'s device
/// :rtype: Tensor
#[pyfunction]
pub(super) fn rf_full_like(
    py: Python<'_>,
    other: PyRef<'_, PyTensor>,
    fill_value: f64,
) -> PyResult<PyTensor> {
    let x = other.value()?;
    run(py, move || rf::full_like(&x, fill_value))
}

/// ``source`` broadcast over the new last dim ``dim``.
///
/// This is never needed for broadcasting, which ops do by dims; it may be
/// for e.g. a convolution or concatenation.
///
/// :param Tensor source: the tensor
/// :param Dim dim: a dim of known size that ``source`` lacks
/// :return: ``source`` repeated along ``dim``
/// :rtype: Tensor
#[pyfunction]
pub(super) fn rf_expand_dim(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    dim: PyRef<'_, PyDim>,
) -> PyResult<PyTensor> {
    let (x, dim) = (source.value()?, dim.0.clone());
    run(py, move || rf::expand_dim(&x, &dim))
}

/// Merges (flattens) ``dims`` into one dim, placed where the first of them
/// was: for ``(batch, width, height, dim)`` and ``dims=(width, height)`` the
/// result is ``(batch, width*height, dim)``. ``split_dims`` is the inverse.
///
/// A dynamic dim can be merged only as the first of ``dims`` (with static
/// ones after it): each sequence's frames stay a prefix of the merged dim,
/// whose lengths are ``len * product(rest)``. Dims of unknown size give an
/// unknown dim.
///
/// :param Tensor source: the tensor
/// :param Sequence[Dim] dims: the dims to merge, in order
/// :param Dim | None out_dim: reuse this dim for the merged one
/// :return: the tensor and the merged dim
/// :rtype: tuple[Tensor, Dim]
#[pyfunction]
#[pyo3(signature = (source, *, dims, out_dim = None))]
pub(super) fn rf_merge_dims(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    dims: &Bound<'_, PyAny>,
    out_dim: Option<PyRef<'_, PyDim>>,
) -> PyResult<(PyTensor, PyDim)> {
    let (x, dims) = (source.value()?, dim_list("dims", dims)?);
    let out_dim = out_dim.map(|d| d.0.clone());
    let (t, d) = py
        .detach(move || rf::merge_dims(&x, &dims, out_dim))
        .map_err(to_py_err)?;
    Ok((PyTensor::from(t), PyDim(d)))
}

/// Splits ``axis`` into ``dims`` (in its place), the inverse of ``merge_dims``:
/// for ``(batch, time, window*feature)``, ``axis`` the last and
/// ``dims=(window, feature)``, the result is ``(batch, time, window, feature)``.
///
/// ``dims`` are static and their product is the size of ``axis``, except that
/// the first may be dynamic when ``axis`` is: then its lengths times the
/// product of the others must be ``axis``'s lengths.
///
/// :param Tensor source: the tensor
/// :param Dim axis: the dim to split
/// :param Sequence[Dim] dims: what ``axis`` is split into
/// :return: ``source`` with ``axis`` replaced by ``dims``
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (source, *, axis, dims))]
pub(super) fn rf_split_dims(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    axis: PyRef<'_, PyDim>,
    dims: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let (x, axis, dims) = (source.value()?, axis.0.clone(), dim_list("dims", dims)?);
    run(py, move || rf::split_dims(&x, &axis, &dims))
}

/// Uniform random values in ``[minval, maxval)``, float32 on the default
/// device, from the RF random stream (``set_random_seed``): the same values
/// on every device.
///
/// :param Dim | Sequence[Dim] dims: the dims, all of known size
/// :param float minval: the lower bound (included)
/// :param float maxval: the upper bound (excluded)
/// :return: the random tensor
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (dims, *, minval = 0.0, maxval = 1.0))]
pub(super) fn rf_random_uniform(
    py: Python<'_>,
    dims: &Bound<'_, PyAny>,
    minval: f32,
    maxval: f32,
) -> PyResult<PyTensor> {
    let (dims, be) = (dim_list("dims", dims)?, backend()?);
    run(py, move || rf::random_uniform(&dims, minval, maxval, &be))
}

/// Normal random values, float32 on the default device, from the RF random
/// stream (``set_random_seed``): the same values on every device.
///
/// :param Dim | Sequence[Dim] dims: the dims, all of known size
/// :param float mean: the mean
/// :param float stddev: the standard deviation
/// :return: the random tensor
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (dims, *, mean = 0.0, stddev = 1.0))]
pub(super) fn rf_random_normal(
    py: Python<'_>,
    dims: &Bound<'_, PyAny>,
    mean: f32,
    stddev: f32,
) -> PyResult<PyTensor> {
    let (dims, be) = (dim_list("dims", dims)?, backend()?);
    run(py, move || rf::random_normal(&dims, mean, stddev, &be))
}

/// Restarts the RF random stream (``random_*``, ``dropout``, the ``rf.init``
/// initializers) at ``seed``, so what follows is reproducible.
///
/// :param int seed: the seed
#[pyfunction]
pub(super) fn rf_set_random_seed(seed: u64) {
    rf::set_random_seed(seed);
}

/// Inverted dropout, or ``source`` itself unless ``train``: entries are zeroed
/// with probability ``drop_prob`` and the rest scaled by
/// ``1 / (1 - drop_prob)`` (``verjus.rf.dropout`` decides ``train``).
///
/// :param Tensor source: a float32 tensor
/// :param float drop_prob: the probability of dropping an entry
/// :param Dim | Sequence[Dim] | None axis: the dims the mask varies over (it is
///   shared along the others); None: all dims
/// :param bool train: whether to drop at all
/// :return: the tensor after dropout
/// :rtype: Tensor
#[pyfunction]
#[pyo3(signature = (source, drop_prob, axis, train))]
pub(super) fn rf_dropout(
    py: Python<'_>,
    source: PyRef<'_, PyTensor>,
    drop_prob: f32,
    axis: Option<&Bound<'_, PyAny>>,
    train: bool,
) -> PyResult<PyTensor> {
    let x = source.value()?;
    let axis = axis.map(|a| dim_list("axis", a)).transpose()?;
    run(py, move || {
        rf::dropout(&x, drop_prob, axis.as_deref(), train)
    })
}
