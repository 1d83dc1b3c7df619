"""verjus.rf: the RF frontend, after RETURNN's ``returnn.frontend``.

Tensors name their axes with ``Dim`` objects, and ops match axes by dim, never
by position. Dims compare by identity: ``Dim(7, name="f") != Dim(7, name="f")``.
A dynamic dim, ``Dim(lengths, name="time")``, carries per-sequence lengths (an
int Tensor over e.g. ``[batch_dim]``); reductions, softmax and matmul mask the
padding by default (``use_mask=True``), and ops that make new dims over dynamic
ones (``concat``, ``pad``, ``slice``, ``conv``, ``pool``, ``merge_dims``) work
per sequence, so a sequence gives the same result in a batch as alone.

The dim logic (broadcasting by dims, matmul's dim order, masking) lives once, in
Rust (``crates/verjus-rf``); ``Dim`` and ``Tensor`` here are handles to it, and
every op runs there on the autograd tape with the GIL released. The ops are the
native module's functions, re-exported here under RETURNN's names (the list is
``verjus._verjus.rf_exports``), each in a thin wrapper whose TypeError names
``rf.<name>`` and its signature (``verjus.rf._public_ops``); ``help(verjus.rf.matmul)``
and the others say what each computes, its arguments, its result and how it masks. The operators
``+ - * / **``, comparisons and unary ``-`` combine tensors by dims.

Written in Python, on top of them:

- ``convert_to_tensor``, ``zeros``, ``ones``, ``zeros_like``, ``ones_like``,
  ``dropout`` (only while ``get_run_ctx().train_flag`` or ``on_forward=True``),
  ``gather`` (``verjus.rf.array_``; also an int index, ``axis`` from the
  indices' ``sparse_dim``), ``split`` (a tuple);
- ``conv`` (1-D/2-D, strides, dilation, groups), ``pool`` / ``max_pool`` /
  ``max_pool1d`` / ``pool1d`` / ``pool2d`` with RETURNN's int-or-sequence
  arguments (``verjus.rf.conv``);
- ``LayerNorm``, ``RMSNorm``, ``BatchNorm`` (masked statistics, running
  statistics), ``Normalize``, ``layer_norm``, ``rms_norm``, ``moments``,
  ``normalize`` (``verjus.rf.normalization``); ``Dropout``
  (``verjus.rf.dropout``); ``gating``, ``glu``, ``identity``, ``swish``
  (``verjus.rf.gating``); ``scaled_gradient`` (``verjus.rf.gradient``);
  ``sinusoidal_positional_encoding``, ``relative_positional_encoding``
  (``verjus.rf.positional_encoding``); ``RelPosSelfAttention``,
  ``LearnedRelativePositionalEncoding`` (``verjus.rf.rel_pos_attention``);
  ``replace_dim`` (``verjus.rf.replace_dim``); ``build_from_dict``;
  ``dropout_broadcast_default``; ``make_conv_out_spatial_dims``;
- ``rf.encoder.conformer``: ``ConformerEncoder``, ``ConformerEncoderLayer``,
  ``ConformerConvSubsample``, ``ConformerConvBlock``,
  ``ConformerPositionwiseFeedForward`` (RETURNN's options and parameter
  names; ``rf.encoder.base`` has the encoder interfaces);
- ``Module``, ``Functional``, ``Linear``, ``Embedding``
  (``verjus.rf.module``; ``named_parameters``, ``parameters``,
  ``named_modules``, ``modules``, ``children``, ``apply`` as in RETURNN);
  ``Parameter(dims, initial=..., trainable=...)`` with ``assign``
  (``verjus.rf.parameter``); ``ModuleList``, ``Sequential``, ``sequential``,
  ``ParameterList`` (``verjus.rf.container``); ``Conv1d``, ``Conv2d``
  (``verjus.rf.conv``);
- ``LSTM``, ``LstmState``, ``State`` (``verjus.rf.rec``: RETURNN's parameters
  and state container; ``lstm(x, state=, spatial_dim=)`` over a dynamic dim runs
  each sequence to its own length, ``spatial_dim=single_step_dim`` one step);
  ``ZoneoutLSTM`` (``verjus.rf.zoneout``: RETURNN's options, zoneout in
  training, its expectation at inference; stepped with ``scan``);
- ``while_loop``, ``scan`` (``verjus.rf.loop``, RETURNN's signatures: over a
  ``spatial_dim`` per sequence length, or ended by ``cond`` with a new dynamic
  dim; run eagerly on the tape, so gradients flow through every step;
  ``return_tensor_arrays=True`` gives ``TensorArray`` s), ``TensorArray``
  (``verjus.rf.tensor_array``), ``cum_concat_step`` (``verjus.rf.array_``);
- ``Loop`` (= ``verjus.rf.loop.Loop``) and ``verjus.rf.loop.State``: loops
  written inline, ``with rf.Loop() as loop: for _ in loop: ...``, with
  ``unstack`` / ``stack`` / ``last`` / ``end`` and recurrent ``State`` objects
  that modules called in the body ``get`` / ``assign`` themselves (see
  ``verjus.rf.loop``);
- ``rf.init``: ``Glorot``, ``He`` / ``HeNormal``, ``HeUniform``,
  ``VarianceScaling``, ``Normal`` (RETURNN's fan rules, values from the rf
  random stream);
- ``SGD``, ``Adam``, ``AdamW`` (``verjus.optim``'s classes given the parameters
  first, with schedules and clipping; they skip parameters with
  ``trainable=False``);
- ``RunCtx``, ``get_run_ctx``, ``init_train_step_run_ctx``,
  ``init_forward_step_run_ctx`` (``verjus.rf.run_ctx``; ``get_run_ctx().
  train_flag_ctx(flag)`` sets the flag for a block);
- ``register_parametrization``, ``remove_parametrization``,
  ``is_parametrized`` (``verjus.rf.parametrize``); ``weight_dropout``,
  ``weight_noise`` (training only, in a checkpoint scope: nothing weight-sized
  kept), ``weight_norm`` (``verjus.rf.parametrizations``);
  ``gradient_checkpoint_scope`` (``verjus.rf.gradient_checkpoint``: ops in it
  are recomputed in backward, same random numbers);
- ``state_dict``, ``load_state_dict``, ``save_state``, ``load_state``, ``read_state``
  (``verjus.rf.state``: parameters by RETURNN's dotted names, safetensors files
  written atomically; parametrizations are not saved, the code restores them);
- ``decoder.transformer`` (``TransformerDecoder``, ``TransformerDecoderLayer``,
  ``FeedForward``, ``FeedForwardGated``, ``make_norm``: RETURNN's decoder;
  they live in ``verjus.rf.feed_forward``, shared with the Conformer);
- ``label_smoothing``, ``smooth_one_hot``, ``label_smoothed_log_prob_gradient``
  (``verjus.rf.label_smoothing``); ``ctc_greedy_decode``, ``top_k``,
  ``edit_distance`` (``verjus.rf.search``; ``ctc_loss`` is a native op);
  ``search.beam_search`` (a step function's labels over a beam, ``top_k``
  over beam and vocabulary, the state gathered by back-pointers);
- more of RETURNN's names, composed of the above: ``calc_transposed_conv_out_length``,
  ``make_transposed_conv_out_spatial_dims``, ``expand_make_non_empty``,
  ``limit_repeats``, ``scaled_gradient_ext`` (a scale, no shift), ``stop_gradient_scope``,
  ``get_random_state`` / ``set_random_state``, ``control_flow_ctx``,
  ``set_parameter_copy_behavior_ctx``, ``TensorLayout``, ``rf.hooks``
  (``Module.register_forward_hook``), and RETURNN's module names ``rf.dims``,
  ``rf.loss``, ``rf.rand``, ``rf.types``, ... (``verjus.rf._returnn_modules``);
  docs/returnn.md lists what is still missing, and why.

``print(x)`` shows a tensor's values (a few of a big one; ``repr``, in error messages,
its dims only) and a model's dims, options and sub-modules; ``float(loss)`` and
``loss.item()`` give a one-value tensor's value. A number or a string where a Dim
belongs (``rf.LSTM(4, 6)``, ``axis=-1``) is a TypeError naming the argument
(``verjus.rf._dim_args``; for the native ops, ``rf.softmax(x, axis=-1)``, the
error names ``rf.softmax``, its signature and the Dim to give, ``verjus.rf._public_ops``).

``set_default_device("cpu" | "cuda")`` chooses where ``convert_to_tensor``,
``full``, ``random_*``, ``range_over_dim`` and ``Parameter`` create tensors; ops
run where their operands are. ``loss.backward()`` fills ``param.grad`` (once per
loss, as PyTorch; ``backward(retain_graph=True)`` allows another);
``gradient(y, x)`` gives ``dy/dx`` without it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from verjus import _verjus
from verjus._verjus import Dim, Tensor
from verjus.rf import backend as _backend_selection
from verjus.rf import decoder, init, tensor_api
from verjus.rf._dim_args import takes_dims
from verjus.rf._public_ops import PUBLIC_OPS
from verjus.rf.array_ import cum_concat_step, gather, split
from verjus.rf.attention import (
    CausalSelfAttention,
    CausalSelfAttentionState,
    CrossAttention,
    SelfAttention,
    SelfAttentionBase,
    dot_attention,
)
from verjus.rf.build_from_dict import build_from_dict
from verjus.rf.container import ModuleList, ParameterList, Sequential, sequential
from verjus.rf.conv import (
    Conv1d,
    Conv2d,
    conv,
    make_conv_out_spatial_dims,
    max_pool,
    max_pool1d,
    pool,
    pool1d,
    pool2d,
)
from verjus.rf.dropout import Dropout, dropout_broadcast_default
from verjus.rf.gating import gating, glu, identity, swish
from verjus.rf.gradient import scaled_gradient
from verjus.rf.gradient_checkpoint import gradient_checkpoint_scope
from verjus.rf.label_smoothing import (
    label_smoothed_log_prob_gradient,
    label_smoothing,
    smooth_one_hot,
)
from verjus.rf.loop import Loop, scan, while_loop
from verjus.rf.module import Embedding, Functional, Linear, Module, Parameter
from verjus.rf.normalization import (
    BatchNorm,
    LayerNorm,
    Normalize,
    RMSNorm,
    layer_norm,
    moments,
    normalize,
    rms_norm,
)
from verjus.rf.optim import SGD, Adam, AdamW, NAdam
from verjus.rf.parametrizations import (
    WeightDropout,
    WeightNoise,
    WeightNorm,
    weight_dropout,
    weight_noise,
    weight_norm,
)
from verjus.rf.parametrize import is_parametrized, register_parametrization, remove_parametrization
from verjus.rf.positional_encoding import (
    relative_positional_encoding,
    sinusoidal_positional_encoding,
)
from verjus.rf.rec import LSTM, LstmState, State
from verjus.rf.rel_pos_attention import LearnedRelativePositionalEncoding, RelPosSelfAttention
from verjus.rf.replace_dim import replace_dim
from verjus.rf.run_ctx import (
    RunCtx,
    get_run_ctx,
    init_forward_step_run_ctx,
    init_train_step_run_ctx,
)
from verjus.rf.search import ctc_greedy_decode, edit_distance, top_k
from verjus.rf.state import load_state, load_state_dict, read_state, save_state, state_dict
from verjus.rf.tensor_array import TensorArray
from verjus.rf.zoneout import ZoneoutLSTM

# The native ops (and ``batch_dim``) under RETURNN's names: each binding of
# crates/verjus-py/src/rf/ is listed once there, and arrives here with its docs, in
# a thin wrapper whose TypeError names ``rf.<name>`` and its signature
# (``verjus.rf._public_ops``).
globals().update(PUBLIC_OPS)

# ``print(x)`` shows the values. The native class has a ``__repr__`` (dims only, for
# error messages) and no ``__str__``; a special method is looked up on the class, not
# through its fallback to ``TensorApi``, so it is set here.
Tensor.__str__ = tensor_api.TensorApi.__str__

__all__ = [
    "LSTM",
    "SGD",
    "Adam",
    "AdamW",
    "BatchNorm",
    "CausalSelfAttention",
    "CausalSelfAttentionState",
    "Conv1d",
    "Conv2d",
    "CrossAttention",
    "Dim",
    "Dropout",
    "Embedding",
    "Functional",
    "LayerNorm",
    "Linear",
    "Loop",
    "LstmState",
    "Module",
    "ModuleList",
    "NAdam",
    "Normalize",
    "Parameter",
    "ParameterList",
    "RMSNorm",
    "RunCtx",
    "SelfAttention",
    "SelfAttentionBase",
    "Sequential",
    "State",
    "Tensor",
    "TensorArray",
    "ZoneoutLSTM",
    "conv",
    "convert_to_tensor",
    "cum_concat_step",
    "decoder",
    "dot_attention",
    "dropout",
    "gather",
    "gating",
    "get_run_ctx",
    "glu",
    "identity",
    "init",
    "init_forward_step_run_ctx",
    "init_train_step_run_ctx",
    "layer_norm",
    "max_pool",
    "max_pool1d",
    "moments",
    "normalize",
    "ones",
    "ones_like",
    "pool",
    "pool1d",
    "pool2d",
    "relative_positional_encoding",
    "rms_norm",
    "scaled_gradient",
    "scan",
    "sequential",
    "sinusoidal_positional_encoding",
    "split",
    "swish",
    "while_loop",
    "zeros",
    "zeros_like",
]
__all__ += list(_verjus.rf_exports)
# Parametrizations and gradient checkpointing (verjus.rf.parametrize,
# verjus.rf.parametrizations, verjus.rf.gradient_checkpoint).
__all__ += [
    "WeightDropout",
    "WeightNoise",
    "WeightNorm",
    "gradient_checkpoint_scope",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrization",
    "weight_dropout",
    "weight_noise",
    "weight_norm",
]
# Module state (verjus.rf.state).
__all__ += ["load_state", "load_state_dict", "read_state", "save_state", "state_dict"]

# numpy dtype kinds -> RF dtypes (other integer types become int64).
# The numpy type an array is given to the native module in: bool as 0/1, and
# bfloat16/float16 as float32 values that the native module rounds.
_STORAGE = {
    "float32": np.float32,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.float32,
    "bfloat16": np.float32,
    "float16": np.float32,
}


def _rf_dtype(array: np.ndarray) -> str:
    if array.dtype == np.bool_:
        return "bool"
    if array.dtype.name in ("float16", "bfloat16"):  # numpy's, ml_dtypes'
        return array.dtype.name
    if array.dtype.kind == "f":
        return "float32"
    if array.dtype == np.int32:
        return "int32"
    if array.dtype.kind in "iu":
        return "int64"
    raise TypeError(f"convert_to_tensor: cannot convert an array of {array.dtype}")


@takes_dims
def convert_to_tensor(
    value: Any,
    *,
    dims: Sequence[Dim] | None = None,
    dtype: str | None = None,
    sparse_dim: Dim | None = None,
    feature_dim: Dim | None = None,
    requires_grad: bool = False,
    shape: Sequence[Dim] | None = None,
    device: str | None = None,
    keep_scalar_on_cpu: bool = False,
    name: str | None = None,
    _backend: type | None = None,
) -> Tensor:
    """A ``Tensor`` holding ``value`` (a numpy array, a number or nested lists).

    ``dims`` (or RETURNN's older ``shape``) names the axes in order and must
    fit the shape (static dims their size, dynamic dims their longest
    sequence). ``dtype`` is ``"float32"``, ``"int32"``, ``"int64"``,
    ``"bool"``, ``"bfloat16"`` or ``"float16"``; by default a float16 or
    (``ml_dtypes``) bfloat16 array keeps its type and other floats become
    float32. ``requires_grad`` (a verjus
    extension) makes the tensor a leaf that ``gradient`` can differentiate by.
    ``device`` creates it there instead of on the default device
    (``keep_scalar_on_cpu``: a scalar stays on the CPU; RETURNN's
    ``_backend=NumpyBackend``: on the CPU, see ``verjus.rf._numpy_backend``). A
    Tensor is returned as it is.
    """
    if isinstance(value, Tensor):
        return value
    if dims is not None and shape is not None:
        raise ValueError("convert_to_tensor: give dims or shape, not both")
    dims = dims if dims is not None else (shape if shape is not None else ())
    if (keep_scalar_on_cpu and not dims) or _on_host_backend(_backend):
        device = "cpu"
    if device is not None and device != _verjus.rf_get_default_device():
        with _backend_selection.set_default_device_ctx(device):
            return convert_to_tensor(
                value,
                dims=dims,
                dtype=dtype,
                sparse_dim=sparse_dim,
                feature_dim=feature_dim,
                requires_grad=requires_grad,
                name=name,
            )
    tensor = _convert(value, dims, dtype, sparse_dim, feature_dim, requires_grad)
    if name is not None:
        tensor.name = name
    return tensor


def _on_host_backend(backend: type | None) -> bool:
    """Whether RETURNN's ``_backend`` option names the numpy (host) backend."""
    from verjus.rf._backend import Backend
    from verjus.rf._numpy_backend import NumpyBackend

    if backend is None:
        return False
    if not (isinstance(backend, type) and issubclass(backend, Backend)):
        raise TypeError(f"convert_to_tensor: _backend must be a Backend class, got {backend!r}")
    return issubclass(backend, NumpyBackend)


def _convert(
    value: Any,
    dims: Sequence[Dim],
    dtype: str | None,
    sparse_dim: Dim | None,
    feature_dim: Dim | None,
    requires_grad: bool,
) -> Tensor:
    array = np.asarray(value)
    dtype = dtype or _rf_dtype(array)
    if dtype not in _STORAGE:
        raise ValueError(f"convert_to_tensor: unknown dtype {dtype!r}")
    # Not np.ascontiguousarray, which turns a 0-d array (a scalar) into shape (1,).
    array = np.asarray(array, dtype=_STORAGE[dtype], order="C")
    return _verjus.rf_from_numpy(array, list(dims), dtype, requires_grad, sparse_dim, feature_dim)


def _filled(
    value: float,
    dims: Sequence[Dim],
    dtype: str | None,
    device: str | None,
    sparse_dim: Dim | None,
    feature_dim: Dim | None,
) -> Tensor:
    with _backend_selection.set_default_device_ctx(device):
        out = _verjus.rf_full(dims=dims, fill_value=value, dtype=dtype)
    if sparse_dim is not None:
        out.sparse_dim = sparse_dim
    if feature_dim is not None:
        out.feature_dim = feature_dim
    return out


@takes_dims
def zeros(
    dims: Sequence[Dim],
    *,
    dtype: str | None = None,
    device: str | None = None,
    sparse_dim: Dim | None = None,
    feature_dim: Dim | None = None,
) -> Tensor:
    """Zeros over ``dims`` (all of known size), on ``device`` (default: the default
    device), with ``sparse_dim`` (an int dtype) or ``feature_dim`` if given."""
    return _filled(0.0, dims, dtype, device, sparse_dim, feature_dim)


@takes_dims
def ones(
    dims: Sequence[Dim],
    *,
    dtype: str | None = None,
    device: str | None = None,
    sparse_dim: Dim | None = None,
    feature_dim: Dim | None = None,
) -> Tensor:
    """Ones over ``dims`` (all of known size), on ``device`` (default: the default
    device), with ``sparse_dim`` (an int dtype) or ``feature_dim`` if given."""
    return _filled(1.0, dims, dtype, device, sparse_dim, feature_dim)


def zeros_like(other: Tensor) -> Tensor:
    """Zeros with ``other``'s dims, dtype, ``sparse_dim`` and ``feature_dim``."""
    return _filled_like(other, 0.0)


def ones_like(other: Tensor) -> Tensor:
    """Ones with ``other``'s dims, dtype, ``sparse_dim`` and ``feature_dim``."""
    return _filled_like(other, 1.0)


def _filled_like(other: Tensor, value: float) -> Tensor:
    out = _verjus.rf_full_like(other, value)
    # As RETURNN's: the sparse and feature dims too (``out`` is a new handle).
    if other.sparse_dim is not None:
        out.sparse_dim = other.sparse_dim
    if other.feature_dim is not None:
        out.feature_dim = other.feature_dim
    return out


@takes_dims
def dropout(
    source: Tensor,
    drop_prob: float,
    *,
    axis: Dim | Sequence[Dim] | None = None,
    on_forward: bool = False,
) -> Tensor:
    """Inverted dropout in training (``get_run_ctx().train_flag``), or always with
    ``on_forward``; with ``axis`` the mask varies over those dims only. Outside
    training, ``source`` itself is returned."""
    train = on_forward or get_run_ctx().is_train_flag_enabled(func=dropout)
    if not train:
        return source
    return _verjus.rf_dropout(source, drop_prob, axis, train)


# Relative-position attention, the Conformer and what it builds on
# (verjus.rf.rel_pos_attention, verjus.rf.encoder, verjus.rf.build_from_dict).
__all__ += [
    "LearnedRelativePositionalEncoding",
    "RelPosSelfAttention",
    "build_from_dict",
    "dropout_broadcast_default",
    "encoder",
    "make_conv_out_spatial_dims",
    "replace_dim",
]

# Label smoothing and search (verjus.rf.label_smoothing, verjus.rf.search).
__all__ += [
    "ctc_greedy_decode",
    "edit_distance",
    "label_smoothed_log_prob_gradient",
    "label_smoothing",
    "smooth_one_hot",
    "top_k",
]

# Last: the encoders use the names above at import time (``rf.swish``, ``rf.LayerNorm``).
from verjus.rf import encoder  # noqa: E402

# Rotary / causal rel-pos attention, group norm, audio (``stft`` also as ``rf.stft``),
# schedules, random extras (verjus.rf.rotary, .rel_pos_causal_attention, .group_norm,
# .audio, .piecewise_linear, .running_mean, .random_extra).
from verjus.rf.audio import stft  # noqa: E402  (also binds the subpackage ``audio``)
from verjus.rf.group_norm import GroupNorm, GroupNormSpatial  # noqa: E402
from verjus.rf.piecewise_linear import PiecewiseLinear, PiecewiseLinearStepwiseScheduler  # noqa: E402
from verjus.rf.positional_encoding import sinusoidal_encoding  # noqa: E402
from verjus.rf.random_extra import (  # noqa: E402
    get_static_step_based_seed,
    random,
    random_choice_with_replacement,
    random_choice_without_replacement,
    random_truncated_normal,
    reset_step_random_state,
)
from verjus.rf.rel_pos_causal_attention import RelPosCausalSelfAttention  # noqa: E402
from verjus.rf.rotary import RotaryPosCausalSelfAttention, RotaryPosSelfAttention  # noqa: E402
from verjus.rf.running_mean import RunningMean  # noqa: E402

__all__ += [
    "GroupNorm",
    "GroupNormSpatial",
    "PiecewiseLinear",
    "PiecewiseLinearStepwiseScheduler",
    "RelPosCausalSelfAttention",
    "RotaryPosCausalSelfAttention",
    "RotaryPosSelfAttention",
    "RunningMean",
    "audio",
    "get_static_step_based_seed",
    "random",
    "random_choice_with_replacement",
    "random_choice_without_replacement",
    "random_truncated_normal",
    "reset_step_random_state",
    "sinusoidal_encoding",
    "stft",
]

# Math forms, reductions and cumsum (verjus.rf.math_, verjus.rf.reduce_extra, verjus.rf.cumsum).
from verjus.rf.cumsum import cumsum  # noqa: E402
from verjus.rf.math_ import (  # noqa: E402
    add,
    ceil,
    ceil_divide,
    clip_by_value,
    combine_bc,
    compare_bc,
    copy,
    dot,
    elu,
    equal,
    expm1,
    floor,
    floor_divide,
    greater,
    greater_equal,
    is_finite,
    is_infinite,
    is_neg_infinite,
    lerp,
    less,
    less_equal,
    log1p,
    log_add_exp,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    mod,
    mul,
    neg,
    not_equal,
    opt_logical_and,
    opt_logical_or,
    pow,
    reciprocal,
    relu_square,
    round,
    selu,
    squared_difference,
    sub,
    true_divide,
)
from verjus.rf.reduce_extra import (  # noqa: E402
    masked_fraction_of_shape,
    num_elements_of_shape,
    reduce,
    reduce_all,
    reduce_any,
    reduce_argmin,
    reduce_logmeanexp,
    reduce_out,
    top_k_mask,
    top_p_mask,
)

__all__ += [
    "add",
    "ceil",
    "ceil_divide",
    "clip_by_value",
    "combine_bc",
    "compare_bc",
    "copy",
    "cumsum",
    "dot",
    "elu",
    "equal",
    "expm1",
    "floor",
    "floor_divide",
    "greater",
    "greater_equal",
    "is_finite",
    "is_infinite",
    "is_neg_infinite",
    "lerp",
    "less",
    "less_equal",
    "log1p",
    "log_add_exp",
    "logical_and",
    "logical_not",
    "logical_or",
    "masked_fraction_of_shape",
    "maximum",
    "minimum",
    "mod",
    "mul",
    "neg",
    "not_equal",
    "num_elements_of_shape",
    "opt_logical_and",
    "opt_logical_or",
    "pow",
    "reciprocal",
    "reduce",
    "reduce_all",
    "reduce_any",
    "reduce_argmin",
    "reduce_logmeanexp",
    "reduce_out",
    "relu_square",
    "round",
    "selu",
    "squared_difference",
    "sub",
    "top_k_mask",
    "top_p_mask",
    "true_divide",
]

# Shapes, packing and scatter (verjus.rf.shape_ops, verjus.rf.packing, verjus.rf.scatter).
from verjus.rf.packing import masked_scatter, masked_select, pack_padded, pad_packed  # noqa: E402
from verjus.rf.scatter import (  # noqa: E402
    scatter,
    scatter_argmax,
    scatter_count,
    scatter_logmeanexp,
    scatter_logsumexp,
    scatter_mean,
    sparse_to_dense,
)
from verjus.rf.shape_ops import (  # noqa: E402
    concat_features,
    constant,
    expand_dims,
    last_frame_position_of_dim,
    linspace_over_dim,
    range_over_dim_strided,
    range_over_merged_dims,
    repeat,
    replace_dim_v2,
    reshape,
    reverse_sequence,
    search_sorted,
    set_sparse_dim,
    shift_left,
    shift_right,
    slice_update,
    sort,
    squeeze,
    stack,
    unstack,
    window,
)

__all__ += [
    "concat_features",
    "constant",
    "expand_dims",
    "last_frame_position_of_dim",
    "linspace_over_dim",
    "masked_scatter",
    "masked_select",
    "pack_padded",
    "pad_packed",
    "range_over_dim_strided",
    "range_over_merged_dims",
    "repeat",
    "replace_dim_v2",
    "reshape",
    "reverse_sequence",
    "scatter",
    "scatter_argmax",
    "scatter_count",
    "scatter_logmeanexp",
    "scatter_logsumexp",
    "scatter_mean",
    "search_sorted",
    "set_sparse_dim",
    "shift_left",
    "shift_right",
    "slice_update",
    "sort",
    "sparse_to_dense",
    "squeeze",
    "stack",
    "unstack",
    "window",
]

# RETURNN's object model and run context (verjus.rf.tensor_dict, verjus.rf.run_ctx,
# verjus.rf.backend; Tensor and Dim methods in verjus.rf.tensor_api).
from verjus.rf.backend import (  # noqa: E402
    GetModelFunc,
    StepFunc,
    get_default_array_index_dtype,
    get_default_float_dtype,
    get_default_int_dtype,
    get_selected_backend,
    is_executing_eagerly,
    is_float_dtype,
    select_backend,
    select_backend_numpy,
    select_backend_torch,
    set_default_device_ctx,
    set_default_float_dtype,
    set_default_float_dtype_ctx,
)
from verjus.rf.run_ctx import Loss, get_run_ctx_step, reset_run_ctx  # noqa: E402
from verjus.rf.tensor_dict import TensorDict  # noqa: E402

__all__ += [
    "GetModelFunc",
    "Loss",
    "StepFunc",
    "TensorDict",
    "get_default_array_index_dtype",
    "get_default_float_dtype",
    "get_default_int_dtype",
    "get_run_ctx_step",
    "get_selected_backend",
    "is_executing_eagerly",
    "is_float_dtype",
    "reset_run_ctx",
    "select_backend",
    "select_backend_numpy",
    "select_backend_torch",
    "set_default_device_ctx",
    "set_default_float_dtype",
    "set_default_float_dtype_ctx",
]

# Control flow and per-tensor device and gradient helpers (verjus.rf.control_flow,
# verjus.rf.device).
from verjus.rf.control_flow import assert_, cond  # noqa: E402
from verjus.rf.device import copy_to_device, set_requires_gradient  # noqa: E402

__all__ += ["assert_", "cond", "copy_to_device", "set_requires_gradient"]

# Further RETURNN names (verjus.rf.build_from_dict, .ctc, .random_extra,
# .transposed_conv); ctc_loss, random_uniform and random_normal wrap the native ones
# with RETURNN's broadcasting and options (their names are in __all__ from rf_exports).
from verjus.rf.build_from_dict import build_dict  # noqa: E402
from verjus.rf.ctc import (  # noqa: E402
    ctc_best_path,
    ctc_durations_from_path,
    ctc_no_label_loop_blank_durations_from_path,
)
from verjus.rf.ctc import ctc_loss as ctc_loss  # noqa: E402
from verjus.rf.random_extra import random_normal as random_normal  # noqa: E402
from verjus.rf.random_extra import random_uniform as random_uniform  # noqa: E402
from verjus.rf.transposed_conv import (  # noqa: E402
    TransposedConv1d,
    TransposedConv2d,
    transposed_conv,
)

__all__ += [
    "TransposedConv1d",
    "TransposedConv2d",
    "build_dict",
    "ctc_best_path",
    "ctc_durations_from_path",
    "ctc_no_label_loop_blank_durations_from_path",
    "transposed_conv",
]

# RETURNN-signature wrappers of native ops: ``pad`` with a Tensor value, ``slice`` with
# Tensor positions, ``sequence_mask`` with ``device``, ``where`` and ``full`` with
# RETURNN's dtypes of plain numbers (verjus.rf.pad, .slicing, .sequence_mask, .array_,
# .shape_ops; their names are in ``__all__`` already, from ``rf_exports``), and ops
# over nested structures of Tensors and Dims (verjus.rf.nested, as ``rf.nested``).
from verjus.rf import nested  # noqa: E402
from verjus.rf.array_ import where  # noqa: E402, F401
from verjus.rf.pad import pad  # noqa: E402, F401
from verjus.rf.sequence_mask import sequence_mask  # noqa: E402, F401
from verjus.rf.shape_ops import full  # noqa: E402
from verjus.rf.slicing import slice  # noqa: E402, F401

__all__ += ["nested"]

# Sine and cosine (native), conv lengths, RETURNN's fill (``full``) and use_mask default
# (verjus.rf.conv, verjus.rf.backend).
from verjus.rf.backend import use_mask_default  # noqa: E402
from verjus.rf.conv import calc_conv_out_length  # noqa: E402

fill = full  # RETURNN's alias


__all__ += ["calc_conv_out_length", "fill", "use_mask_default"]

# More of RETURNN's names, composed of the above: transposed-conv lengths
# (verjus.rf.transposed_conv), array helpers (.array_), the random state
# (.random_extra), the control flow context (.control_flow), the dim size device
# (.device), gradient and parameter-copy helpers (.gradient, .parameter), backend
# queries and type aliases (.backend), BatchNorm's distributed default
# (.normalization), tensor layouts (.tensor_layout) and method hooks (.hooks).
from verjus.rf import hooks, tensor_layout  # noqa: E402
from verjus.rf.array_ import expand_make_non_empty, limit_repeats  # noqa: E402
from verjus.rf.backend import (  # noqa: E402
    ItemKeyType,
    RawTensorTypes,
    get_raw_tensor_type,
    is_backend_raw_tensor_dim_tag_independent,
)
from verjus.rf.control_flow import control_flow_ctx, get_current_control_flow_ctx  # noqa: E402
from verjus.rf.device import get_default_dim_size_device  # noqa: E402
from verjus.rf.gradient import scaled_gradient_ext, stop_gradient_scope  # noqa: E402
from verjus.rf.normalization import batch_norm_distributed_default  # noqa: E402
from verjus.rf.parameter import set_parameter_copy_behavior_ctx  # noqa: E402
from verjus.rf.random_extra import get_random_state, set_random_state  # noqa: E402
from verjus.rf.tensor_layout import TensorLayout, get_tensor_layout  # noqa: E402
from verjus.rf.transposed_conv import (  # noqa: E402
    calc_transposed_conv_out_length,
    make_transposed_conv_out_spatial_dims,
)

__all__ += [
    "ItemKeyType",
    "RawTensorTypes",
    "TensorLayout",
    "batch_norm_distributed_default",
    "calc_transposed_conv_out_length",
    "control_flow_ctx",
    "expand_make_non_empty",
    "get_current_control_flow_ctx",
    "get_default_dim_size_device",
    "get_random_state",
    "get_raw_tensor_type",
    "get_tensor_layout",
    "hooks",
    "is_backend_raw_tensor_dim_tag_independent",
    "limit_repeats",
    "make_transposed_conv_out_spatial_dims",
    "scaled_gradient_ext",
    "set_parameter_copy_behavior_ctx",
    "set_random_state",
    "stop_gradient_scope",
    "tensor_layout",
]

# Last: RETURNN's groupings by its file names, as modules (``rf.dims``, ``rf.loss``,
# ``rf.rand``, ...) holding the names above (verjus.rf._returnn_modules).
from verjus.rf import _returnn_modules  # noqa: E402

globals().update(_returnn_modules.install(sys.modules[__name__]))
__all__ += list(_returnn_modules.MODULES)
