"""verjus.rf: the RF frontend, after RETURNN's ``returnn.frontend``.

Tensors name their axes with ``Dim`` objects, and ops match axes by dim, never
by position. Dims compare by identity: ``Dim(7, name="f") != Dim(7, name="f")``.
A dynamic dim, ``Dim(lengths, name="time")``, carries per-sequence lengths (an
int Tensor over e.g. ``[batch_dim]``); reductions, softmax and matmul mask the
padding by default (``use_mask=True``).

The dim logic (broadcasting by dims, matmul's dim order, masking) lives once, in
Rust (``crates/verjus-rf``); ``Dim`` and ``Tensor`` here are handles to it, and
every op runs there on the autograd tape with the GIL released.

- ``Dim``, ``batch_dim``, ``Tensor``, ``convert_to_tensor``;
- binary ops: the operators ``+ - * / **``, comparisons, unary ``-``, and
  ``combine`` / ``compare`` (output dims: the union in order of appearance; if
  neither operand has all of them it is an error unless
  ``allow_broadcast_all_sources=True``), ``where``;
- ``matmul(a, b, reduce=...)``: common dims in ``a``'s order, then ``a``'s own,
  then ``b``'s own;
- ``reduce_sum/mean/max/min/logsumexp/argmax(source, axis=...)``,
  ``softmax`` / ``log_softmax(x, axis=...)``;
- elementwise ``relu``, ``gelu``, ``sigmoid``, ``tanh``, ``exp``, ``log``,
  ``sqrt``, ``rsqrt``, ``abs``, ``square``, ``safe_log``; ``cast``,
  ``stop_gradient``; ``sequence_mask``, ``range_over_dim``;
- ``concat((x, dim), (y, dim2), out_dim=None)`` and ``pad(x, axes=, padding=)``
  return the new dim(s) with the tensor; over dynamic dims they work per
  sequence (``concat`` joins each sequence's own frames, ``pad`` pads after each
  sequence's own end; new lengths: the sum, old plus padding);
- ``slice(x, axis=, start=, end=, step=, size=, out_dim=)`` returns the new dim,
  ``split(x, axis=, out_dims=)`` a tuple of parts;
- ``conv`` (1-D/2-D, strides, dilation, groups), ``pool`` / ``max_pool`` /
  ``max_pool1d`` / ``pool1d`` / ``pool2d`` return the out spatial dims;
  ``padding="same"`` is RETURNN's consistent same padding, and padding frames of
  dynamic dims never enter a result (``verjus.rf.conv``);
- ``full(dims=, fill_value=)``, ``zeros``, ``ones``, ``zeros_like``,
  ``ones_like``, ``expand_dim``, ``merge_dims`` (returns the new dim; a dynamic
  dim only as the first merged dim), ``split_dims`` (its inverse);
- ``random_uniform``, ``random_normal``, ``set_random_seed``, ``dropout`` (only
  while ``get_run_ctx().train_flag`` or ``on_forward=True``);
- ``gather(source, indices=, axis=, clip_to_valid=False)`` (dims shared by
  source and indices are batch dims), ``one_hot``, ``cross_entropy(estimated=,
  target=, axis=, estimated_type=)`` against sparse or dense targets;
- ``set_default_device("cpu" | "cuda")`` / ``get_default_device()``: where
  ``convert_to_tensor``, ``full``, ``random_*``, ``range_over_dim`` and
  ``Parameter`` create tensors (a device without a backend in this build is an
  error); ops run where their operands are;
- ``gradient(y, x)``: ``dy/dx`` through the tape, with ``x``'s dims;
  ``loss.backward()`` fills ``param.grad``;
- ``Module``, ``Functional``, ``Linear``, ``Embedding``, ``LayerNorm``
  (``verjus.rf.module``; ``named_parameters``, ``parameters``,
  ``named_modules``, ``modules``, ``children``, ``apply`` as in RETURNN);
  ``Parameter(dims, initial=..., trainable=...)`` with ``assign``
  (``verjus.rf.parameter``); ``ModuleList``, ``Sequential``, ``sequential``,
  ``ParameterList`` (``verjus.rf.container``); ``Conv1d``, ``Conv2d``
  (``verjus.rf.conv``);
- ``rf.init``: ``Glorot``, ``He`` / ``HeNormal``, ``HeUniform``,
  ``VarianceScaling``, ``Normal`` (RETURNN's fan rules, values from the rf
  random stream);
- ``SGD``, ``Adam``, ``AdamW`` (``verjus.optim``'s classes given the parameters
  first, with schedules and clipping; they skip parameters with
  ``trainable=False``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_abs as abs
from verjus._verjus import rf_batch_dim as batch_dim
from verjus._verjus import rf_cast as cast
from verjus._verjus import rf_combine as combine
from verjus._verjus import rf_compare as compare
from verjus._verjus import rf_concat as concat
from verjus._verjus import rf_cross_entropy as cross_entropy
from verjus._verjus import rf_dropout as _dropout
from verjus._verjus import rf_exp as exp
from verjus._verjus import rf_expand_dim as expand_dim
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_full as full
from verjus._verjus import rf_full_like as _full_like
from verjus._verjus import rf_gelu as gelu
from verjus._verjus import rf_get_default_device as get_default_device
from verjus._verjus import rf_gradient as gradient
from verjus._verjus import rf_log as log
from verjus._verjus import rf_log_softmax as log_softmax
from verjus._verjus import rf_matmul as matmul
from verjus._verjus import rf_merge_dims as merge_dims
from verjus._verjus import rf_one_hot as one_hot
from verjus._verjus import rf_pad as pad
from verjus._verjus import rf_random_normal as random_normal
from verjus._verjus import rf_random_uniform as random_uniform
from verjus._verjus import rf_range_over_dim as range_over_dim
from verjus._verjus import rf_reduce_argmax as reduce_argmax
from verjus._verjus import rf_reduce_logsumexp as reduce_logsumexp
from verjus._verjus import rf_reduce_max as reduce_max
from verjus._verjus import rf_reduce_mean as reduce_mean
from verjus._verjus import rf_reduce_min as reduce_min
from verjus._verjus import rf_reduce_sum as reduce_sum
from verjus._verjus import rf_relu as relu
from verjus._verjus import rf_rsqrt as rsqrt
from verjus._verjus import rf_safe_log as safe_log
from verjus._verjus import rf_sequence_mask as sequence_mask
from verjus._verjus import rf_set_default_device as set_default_device
from verjus._verjus import rf_set_random_seed as set_random_seed
from verjus._verjus import rf_sigmoid as sigmoid
from verjus._verjus import rf_slice as slice
from verjus._verjus import rf_softmax as softmax
from verjus._verjus import rf_split_dims as split_dims
from verjus._verjus import rf_sqrt as sqrt
from verjus._verjus import rf_square as square
from verjus._verjus import rf_stop_gradient as stop_gradient
from verjus._verjus import rf_tanh as tanh
from verjus._verjus import rf_where as where
from verjus.rf import init
from verjus.rf.array_ import gather, split
from verjus.rf.container import ModuleList, ParameterList, Sequential, sequential
from verjus.rf.conv import (
    Conv1d,
    Conv2d,
    conv,
    max_pool,
    max_pool1d,
    pool,
    pool1d,
    pool2d,
)
from verjus.rf.module import Embedding, Functional, LayerNorm, Linear, Module, Parameter
from verjus.rf.optim import SGD, Adam, AdamW
from verjus.rf.run_ctx import (
    RunCtx,
    get_run_ctx,
    init_forward_step_run_ctx,
    init_train_step_run_ctx,
)

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "Conv1d",
    "Conv2d",
    "Dim",
    "Embedding",
    "Functional",
    "LayerNorm",
    "Linear",
    "Module",
    "ModuleList",
    "Parameter",
    "ParameterList",
    "RunCtx",
    "Sequential",
    "Tensor",
    "abs",
    "batch_dim",
    "cast",
    "combine",
    "compare",
    "concat",
    "conv",
    "convert_to_tensor",
    "cross_entropy",
    "dropout",
    "exp",
    "expand_dim",
    "full",
    "gather",
    "gelu",
    "get_default_device",
    "get_run_ctx",
    "gradient",
    "init",
    "init_forward_step_run_ctx",
    "init_train_step_run_ctx",
    "log",
    "log_softmax",
    "matmul",
    "max_pool",
    "max_pool1d",
    "merge_dims",
    "one_hot",
    "ones",
    "ones_like",
    "pad",
    "pool",
    "pool1d",
    "pool2d",
    "random_normal",
    "random_uniform",
    "range_over_dim",
    "reduce_argmax",
    "reduce_logsumexp",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_sum",
    "relu",
    "rsqrt",
    "safe_log",
    "sequence_mask",
    "sequential",
    "set_default_device",
    "set_random_seed",
    "sigmoid",
    "slice",
    "softmax",
    "split",
    "split_dims",
    "sqrt",
    "square",
    "stop_gradient",
    "tanh",
    "where",
    "zeros",
    "zeros_like",
]

# numpy dtype kinds -> RF dtypes (other integer types become int64).
_STORAGE = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.float32}


def _rf_dtype(array: np.ndarray) -> str:
    if array.dtype == np.bool_:
        return "bool"
    if array.dtype.kind == "f":
        return "float32"
    if array.dtype == np.int32:
        return "int32"
    if array.dtype.kind in "iu":
        return "int64"
    raise TypeError(f"convert_to_tensor: cannot convert an array of {array.dtype}")


def convert_to_tensor(
    value: Any,
    *,
    dims: Sequence[Dim] = (),
    dtype: str | None = None,
    sparse_dim: Dim | None = None,
    feature_dim: Dim | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """A ``Tensor`` holding ``value`` (a numpy array, a number or nested lists).

    ``dims`` names the axes in order and must fit the shape (static dims their
    size, dynamic dims their longest sequence). ``dtype`` is ``"float32"``,
    ``"int32"``, ``"int64"`` or ``"bool"``; by default floats become float32.
    ``requires_grad`` (a verjus extension) makes the tensor a leaf that
    ``gradient`` can differentiate by. A Tensor is returned as it is.
    """
    if isinstance(value, Tensor):
        return value
    array = np.asarray(value)
    dtype = dtype or _rf_dtype(array)
    if dtype not in _STORAGE:
        raise ValueError(f"convert_to_tensor: unknown dtype {dtype!r}")
    array = np.ascontiguousarray(array, dtype=_STORAGE[dtype])
    return _from_numpy(array, list(dims), dtype, requires_grad, sparse_dim, feature_dim)


def zeros(dims: Sequence[Dim], *, dtype: str | None = None) -> Tensor:
    """Zeros over ``dims`` (all of known size)."""
    return full(dims=dims, fill_value=0.0, dtype=dtype)


def ones(dims: Sequence[Dim], *, dtype: str | None = None) -> Tensor:
    """Ones over ``dims`` (all of known size)."""
    return full(dims=dims, fill_value=1.0, dtype=dtype)


def zeros_like(other: Tensor) -> Tensor:
    """Zeros with ``other``'s dims and dtype."""
    return _full_like(other, 0.0)


def ones_like(other: Tensor) -> Tensor:
    """Ones with ``other``'s dims and dtype."""
    return _full_like(other, 1.0)


def dropout(
    source: Tensor,
    drop_prob: float,
    *,
    axis: Dim | Sequence[Dim] | None = None,
    on_forward: bool = False,
) -> Tensor:
    """Inverted dropout in training (``get_run_ctx().train_flag``), or always with
    ``on_forward``; with ``axis`` the mask varies over those dims only."""
    train = on_forward or get_run_ctx().train_flag
    return _dropout(source, drop_prob, axis, train)
