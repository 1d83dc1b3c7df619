"""verjus's ``rf_utils``: what RETURNN's ``tests/rf_utils.py`` does, on verjus.

RETURNN's rf tests build their inputs as templates (a ``TensorDict``) and
call ``run_model(extern_data, get_model, forward_step)``. This version fills
the templates with random data, builds the model, runs ``forward_step`` on
verjus, checks that the marked outputs are finite, and then runs one
batch entry alone (the one with the shortest sequence) and requires its
outputs to equal that entry's slice of the batched ones, which catches
padding leaking into results. The outputs are returned as a ``TensorDict``
whose ``raw_tensor`` s are numpy arrays, as RETURNN's are.

With ``VERJUS_RETURNN_COMPARE=<folder>`` set, each call is also recorded (inputs,
parameters, outputs) for the comparison with RETURNN's values
(``value_record.py``, ``tests/test_returnn_rf_values.py``).
"""

from __future__ import annotations

import contextlib
import unittest
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import value_record

import verjus.rf as rf
from verjus.rf import Dim, Tensor, TensorDict, batch_dim

# The random seed of the second run that tells whether outputs hold random draws.
OTHER_SEED = 1234


@contextlib.contextmanager
def tf_scope() -> Iterator[None]:
    """RETURNN's TensorFlow session scope: tests that need it compare with
    TensorFlow, which does not apply to verjus, so they are skipped."""
    raise unittest.SkipTest("needs TensorFlow (RETURNN's TF backend): not applicable on verjus")
    yield


class RunModelException(Exception):  # noqa: N818 (RETURNN's name)
    """A model run failed a check."""


class NonFiniteValuesException(RunModelException):
    """An output has non-finite values."""


class CompareResultsMismatchException(RunModelException):
    """Two runs that must agree did not."""


class CompareResultsMismatchSingleVsMultiBatchException(CompareResultsMismatchException):
    """A batch entry run alone differs from its slice of the batched run."""


def run_model(
    extern_data: TensorDict,
    get_model: rf.GetModelFunc,
    forward_step: rf.StepFunc,
    *,
    dyn_dim_max_sizes: Mapping[Dim, int] | None = None,
    dyn_dim_min_sizes: Mapping[Dim, int] | None = None,
    allow_inf_nan_in_output: bool = False,
    test_single_batch_entry: bool = True,
    data_rnd_seed: int = 42,
    data_fill_random: bool = True,
    **_backend_options: Any,
) -> TensorDict:
    """Runs the model on random ``extern_data`` (see the module docs) and returns the
    marked outputs. Options that choose RETURNN's TF comparison are accepted and unused."""
    call = value_record.next_call()
    if data_fill_random:
        extern_data.reset_content()
        extern_data.fill_random_(
            dyn_dim_max_sizes=dyn_dim_max_sizes,
            dyn_dim_min_sizes=dyn_dim_min_sizes,
            rnd=data_rnd_seed,
        )
    inputs = extern_data.as_raw_tensor_dict()
    params, out = _run(extern_data, get_model, forward_step)
    if value_record.folder() is not None:
        _record(call, inputs, params, out, extern_data, get_model, forward_step)
    if not allow_inf_nan_in_output:
        bad = [k for k, v in out.data.items() if not np.isfinite(v.raw_tensor).all()]
        if bad:
            raise NonFiniteValuesException(f"non-finite values in outputs {bad}")
    if test_single_batch_entry and batch_dim in extern_data.all_dims():
        _check_single_batch_entry(extern_data, get_model, forward_step, out)
    return out


def _run(
    extern_data: TensorDict,
    get_model: rf.GetModelFunc,
    forward_step: rf.StepFunc,
    *,
    forward_seed: int | None = None,
) -> tuple[dict[str, Any], TensorDict]:
    """The model's parameters (when recording) and the step's outputs, padding zeroed.
    ``forward_seed`` reseeds the random stream between ``get_model`` and the step."""
    rf.set_random_seed(42)
    model = get_model(epoch=1, step=0)
    params = value_record.parameters(model) if value_record.folder() is not None else {}
    if forward_seed is not None:
        rf.set_random_seed(forward_seed)
    rf.init_forward_step_run_ctx(epoch=1, step=0)
    forward_step(model=model, extern_data=extern_data)
    outputs = rf.get_run_ctx().outputs
    if not outputs.data:
        raise RunModelException("forward_step marked no output")
    for value in outputs.data.values():
        _zero_padding(value)
    return params, outputs


def _record(
    call: tuple[str, int],
    inputs: dict[str, Any],
    params: dict[str, Any],
    out: TensorDict,
    extern_data: TensorDict,
    get_model: rf.GetModelFunc,
    forward_step: rf.StepFunc,
) -> None:
    """Records the call (``value_record``); a second run with another seed for the
    step tells whether the outputs hold random draws."""
    out_raw = out.as_raw_tensor_dict(include_const_sizes=True)
    out_dims = value_record.dim_names(out)
    _, again = _run(extern_data, get_model, forward_step, forward_seed=OTHER_SEED)
    again_raw = again.as_raw_tensor_dict(include_const_sizes=True)
    value_record.record(
        *call,
        kind="forward",
        inputs=inputs,
        params=params,
        outputs=out_raw,
        output_dims=out_dims,
        seed_dependent=not value_record.same_values(out_raw, again_raw),
    )


def _zero_padding(x: Tensor) -> None:
    """Sets the padding of ``x``'s dynamic dims to 0, as RETURNN's comparisons do."""
    dynamic = [
        d for d in x.dims if d.is_dynamic() and all(i in x.dims for i in d.dyn_size_ext.dims)
    ]
    if dynamic:
        x.raw_tensor = rf.where(rf.sequence_mask(dynamic), x, rf.zeros_like(x)).copy_transpose(
            list(x.dims)
        )


def run_model_torch_train(
    extern_data: TensorDict,
    get_model: rf.GetModelFunc,
    train_step: rf.StepFunc,
    *,
    dyn_dim_max_sizes: Mapping[Dim, int] | None = None,
    dyn_dim_min_sizes: Mapping[Dim, int] | None = None,
) -> dict[str, float]:
    """One training step on random data: the total loss, backprop, and each marked
    loss summed, as a mean and its inverse norm factor."""
    call = value_record.next_call()
    extern_data.reset_content()
    extern_data.fill_random_(
        dyn_dim_max_sizes=dyn_dim_max_sizes, dyn_dim_min_sizes=dyn_dim_min_sizes
    )
    inputs = extern_data.as_raw_tensor_dict()
    params, res = _train_step(extern_data, get_model, train_step)
    if value_record.folder() is not None:
        _, again = _train_step(extern_data, get_model, train_step, step_seed=OTHER_SEED)
        value_record.record(
            *call,
            kind="train",
            inputs=inputs,
            params=params,
            outputs=res,
            output_dims={},
            seed_dependent=not value_record.same_values(res, again),
        )
    return res


def _train_step(
    extern_data: TensorDict,
    get_model: rf.GetModelFunc,
    train_step: rf.StepFunc,
    *,
    step_seed: int | None = None,
) -> tuple[dict[str, Any], dict[str, float]]:
    """The model's parameters (when recording) and ``run_model_torch_train``'s results
    of one step; ``step_seed`` reseeds the random stream between ``get_model`` and the step."""
    rf.set_random_seed(42)
    for value in extern_data.data.values():
        if value.dtype == "float32":
            value.requires_grad = True  # as RETURNN's: the inputs' gradients are tested too
    model = get_model(epoch=1, step=0)
    params = value_record.parameters(model) if value_record.folder() is not None else {}
    if step_seed is not None:
        rf.set_random_seed(step_seed)
    rf.init_train_step_run_ctx(train_flag=True, step=0, epoch=1)
    train_step(model=model, extern_data=extern_data)
    ctx = rf.get_run_ctx()
    total = ctx.total_loss()
    res = {"total_loss": float(total.numpy())}
    total.backward()
    for name, loss in ctx.losses.items():
        res[f"{name}:summed"] = float(loss.get_summed_loss().numpy())
        res[f"{name}:mean"] = float(loss.get_mean_loss().numpy())
        inv = loss.get_inv_norm_factor()
        res[f"{name}:inv_norm_factor"] = (
            float(inv.numpy()) if isinstance(inv, Tensor) else float(inv)
        )
    return params, res


def _check_single_batch_entry(
    extern_data: TensorDict, get_model: rf.GetModelFunc, forward_step: rf.StepFunc, ref: TensorDict
) -> None:
    dyn = [
        d
        for d in extern_data.all_dims()
        if d.is_dynamic()
        and tuple(d.dyn_size_ext.dims) == (batch_dim,)
        and len(set(d.dyn_size.tolist())) > 1
    ]
    if not dyn:
        return
    index = int(np.argmin(dyn[0].dyn_size))
    # The entry's slice of each output, cut while the dims have the batch's sizes.
    want_outputs = {
        k: _slice_entry(v.raw_tensor, v.dims, index)
        for k, v in ref.data.items()
        if batch_dim in v.dims
    }
    raw = extern_data.as_raw_tensor_dict()
    single = {}
    for key, value in extern_data.data.items():
        single[key] = _slice_entry(raw[key], value.dims, index)
        for i, d in enumerate(value.dims):
            size_key = f"{key}:size{i}"
            if size_key in raw and d.is_dynamic() and batch_dim in d.dyn_size_ext.dims:
                single[size_key] = np.asarray(raw[size_key])[index : index + 1]
            elif d == batch_dim:
                single[size_key] = np.int32(1)
    extern_data.reset_content()
    extern_data.assign_from_raw_tensor_dict_(single)
    try:
        _, out = _run(extern_data, get_model, forward_step)
        for key, want in want_outputs.items():
            got = out.data[key].raw_tensor
            want = want[tuple(slice(0, n) for n in got.shape)]
            if want.shape != got.shape or not np.allclose(want, got, atol=1e-5, rtol=1e-5):
                raise CompareResultsMismatchSingleVsMultiBatchException(
                    f"output {key!r}: batch entry {index} alone differs from its slice of the batch"
                )
    finally:
        extern_data.reset_content()
        extern_data.assign_from_raw_tensor_dict_(raw)


def _slice_entry(raw: np.ndarray, dims: Any, index: int) -> np.ndarray:
    """``raw``'s entry ``index`` of the batch dim (kept as an axis of size 1), and
    each dynamic dim over the batch cut to that entry's length."""
    raw = np.asarray(raw)
    cut = []
    for d in dims:
        if d == batch_dim:
            cut.append(slice(index, index + 1))
        elif d.is_dynamic() and batch_dim in d.dyn_size_ext.dims:
            lengths = d.dyn_size_ext.copy_transpose(list(d.dyn_size_ext.dims)).raw_tensor
            axis = list(d.dyn_size_ext.dims).index(batch_dim)
            cut.append(slice(0, int(np.take(lengths, index, axis=axis).max())))
        else:
            cut.append(slice(None))
    return raw[tuple(cut)]
