"""``rf_utils`` for replaying RETURNN's rf tests on the real RETURNN (torch backend).

``tests/test_returnn_rf_values.py`` first runs RETURNN's rf tests on verjus with
``VERJUS_RETURNN_COMPARE`` set, so that each ``run_model`` call records its
extern data, parameters and outputs (``value_record.py``). Then it runs the same
tests again under RETURNN itself (``returnn.frontend`` on its torch backend, no
redirection to verjus) with this file as their ``rf_utils``: each call takes
the recorded extern data instead of random data, loads the recorded parameter
values by name into RETURNN's parameters, runs the step and compares every
output with verjus's value by value. The verdict of each call goes to a JSON
file beside its record (``VERJUS_RETURNN_REPLAY`` names the folder):
``agree``, ``mismatch`` (with the largest difference) or ``not comparable``
(with the reason). RETURNN's outputs are returned, so the test goes on as on
RETURNN.
"""

from __future__ import annotations

import contextlib
import json
import os
import unittest
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import returnn.frontend as rf
import torch
import value_record
from returnn.tensor import TensorDict
from returnn.torch.data.tensor_utils import tensor_dict_numpy_to_torch_, tensor_dict_torch_to_numpy_

ENV = "VERJUS_RETURNN_REPLAY"
# What "the same value" means: numpy.allclose with these tolerances.
TOLERANCE = 1e-4


@contextlib.contextmanager
def tf_scope() -> Iterator[None]:
    """RETURNN's TensorFlow session scope: not part of the comparison."""
    raise unittest.SkipTest("needs TensorFlow: not compared")
    yield


class NotComparable(Exception):  # noqa: N818
    """The recorded call cannot be replayed with the same values on RETURNN."""


def run_model(extern_data: TensorDict, get_model: Any, forward_step: Any, **_options: Any) -> Any:
    """Replays the recorded ``run_model`` call on RETURNN and compares its outputs
    (see the module docs); returns RETURNN's outputs."""
    return _replay(extern_data, get_model, forward_step, kind="forward")


def run_model_torch_train(
    extern_data: TensorDict, get_model: Any, train_step: Any, **_options: Any
) -> dict[str, float]:
    """Replays the recorded ``run_model_torch_train`` call on RETURNN and compares
    its losses; returns RETURNN's."""
    return _replay(extern_data, get_model, train_step, kind="train")


def _replay(extern_data: TensorDict, get_model: Any, step: Any, *, kind: str) -> Any:
    root = Path(os.environ[ENV])
    nodeid, index = value_record.next_call()
    path = value_record.record_path(root, nodeid, index)
    if not path.exists():
        raise unittest.SkipTest(f"verjus made no record of run_model call {index}")
    meta, arrays = value_record.load(path)
    verdict: dict[str, Any] = {"nodeid": nodeid, "index": index, "kind": kind}
    try:
        extern_data.reset_content()
        extern_data.assign_from_raw_tensor_dict_(arrays["in"])
        runner = _forward if kind == "forward" else _train
        out, out_raw, out_dims = runner(extern_data, get_model, step, meta, arrays["param"])
    except NotComparable as err:
        _write(path, verdict | {"status": "not comparable", "reason": str(err)})
        raise unittest.SkipTest(f"not comparable: {err}") from None
    except Exception as err:
        reason = f"RETURNN raised {type(err).__name__}: {str(err)[:300]}"
        _write(path, verdict | {"status": "not comparable", "reason": reason})
        raise
    finally:
        extern_data.reset_content()
        extern_data.assign_from_raw_tensor_dict_(arrays["in"])
    verdict |= _compare(arrays["out"], out_raw, meta["output_dims"], out_dims)
    if verdict["status"] == "mismatch" and meta["seed_dependent"]:
        verdict |= {
            "status": "not comparable",
            "reason": "the outputs hold random draws (on verjus they change with the seed),"
            f" which RETURNN draws differently ({verdict['reason']})",
        }
    _write(path, verdict)
    return out


def _write(path: Path, verdict: dict[str, Any]) -> None:
    path.with_suffix(".json").write_text(json.dumps(verdict))


def _start(extern_data: TensorDict, get_model: Any, meta: dict, params: dict) -> Any:
    """Selects the torch backend, puts the extern data on it and builds the model
    with verjus's parameter values."""
    rf.select_backend_torch()
    tensor_dict_numpy_to_torch_(extern_data)
    rf.set_random_seed(42)
    model = get_model(epoch=1, step=0)
    _load_parameters(model, meta["param_dims"], params)
    return model


def _load_parameters(model: Any, verjus_dims: dict[str, list[str]], values: dict) -> None:
    """Assigns verjus's parameter values to RETURNN's by dotted name; differing
    names, shapes or dim orders make the call not comparable."""
    named = dict(model.named_parameters()) if hasattr(model, "named_parameters") else {}
    if named.keys() != values.keys():
        only_returnn = sorted(named.keys() - values.keys())
        only_verjus = sorted(values.keys() - named.keys())
        raise NotComparable(
            f"parameter names differ: RETURNN only {only_returnn}, verjus only {only_verjus}"
        )
    for name, param in named.items():
        raw, value = param.raw_tensor, values[name]
        dims = [d.name for d in param.dims]
        if tuple(raw.shape) != value.shape:
            raise NotComparable(
                f"parameter {name}: RETURNN's shape {tuple(raw.shape)} {dims},"
                f" verjus's {value.shape} {verjus_dims[name]}"
            )
        if dims != verjus_dims[name] and sorted(dims) == sorted(verjus_dims[name]):
            raise NotComparable(
                f"parameter {name}: dims in another order, RETURNN {dims}"
                f" vs verjus {verjus_dims[name]}"
            )
        with torch.no_grad():
            raw.copy_(torch.from_numpy(np.asarray(value)).to(raw.dtype))


def _forward(
    extern_data: TensorDict, get_model: Any, forward_step: Any, meta: dict, params: dict
) -> tuple[TensorDict, dict[str, Any], dict[str, list[str]]]:
    """RETURNN's outputs (padding zeroed), their raw arrays with the dims' sizes
    and each output's dim names."""
    model = _start(extern_data, get_model, meta, params)
    rf.init_forward_step_run_ctx(epoch=1, step=0)
    forward_step(model=model, extern_data=extern_data)
    outputs = rf.get_run_ctx().outputs
    tensor_dict_torch_to_numpy_(outputs)
    for value in outputs.data.values():
        value.raw_tensor = value.copy_masked(0).raw_tensor
    raw = outputs.as_raw_tensor_dict(include_const_sizes=True)
    return outputs, raw, value_record.dim_names(outputs)


def _train(
    extern_data: TensorDict, get_model: Any, train_step: Any, meta: dict, params: dict
) -> tuple[dict[str, float], dict[str, float], dict]:
    """RETURNN's ``run_model_torch_train`` results of one step: what the test gets,
    what is compared (the same dict) and the outputs' dims (none)."""
    model = _start(extern_data, get_model, meta, params)
    for value in extern_data.data.values():
        if value.raw_tensor.dtype.is_floating_point:
            value.raw_tensor.requires_grad = True
    rf.init_train_step_run_ctx(train_flag=True, step=0, epoch=1)
    train_step(model=model, extern_data=extern_data)
    ctx = rf.get_run_ctx()
    total = ctx.total_loss()
    res = {"total_loss": total.raw_tensor.detach().cpu().item()}
    total.raw_tensor.backward()
    for name, loss in ctx.losses.items():
        res[f"{name}:summed"] = loss.get_summed_loss().raw_tensor.detach().cpu().item()
        res[f"{name}:mean"] = loss.get_mean_loss().raw_tensor.detach().cpu().item()
        inv = loss.get_inv_norm_factor()
        if hasattr(inv, "raw_tensor"):
            inv = inv.raw_tensor.detach().sum().cpu().item()
        res[f"{name}:inv_norm_factor"] = inv
    return res, res, {}


def _compare(
    verjus: dict[str, Any],
    returnn: dict[str, Any],
    verjus_dims: dict[str, list[str]],
    returnn_dims: dict[str, list[str]],
) -> dict[str, Any]:
    """The verdict on verjus's raw outputs against RETURNN's: every key present in
    both with the same shape and values within ``TOLERANCE``."""
    if verjus.keys() != returnn.keys():
        return {
            "status": "mismatch",
            "reason": f"output keys differ: verjus {sorted(verjus)}, RETURNN {sorted(returnn)}",
        }
    worst, bad, notes = 0.0, [], []
    for key in sorted(verjus):
        a, b = np.asarray(verjus[key]), np.asarray(returnn[key])
        if a.shape != b.shape and key in verjus_dims:
            a, note = _reorder(a, verjus_dims[key], returnn_dims[key])
            notes += [f"{key}: {note}"] if note else []
        if a.shape != b.shape:
            return {
                "status": "mismatch",
                "reason": f"output {key!r}: verjus's shape {a.shape} {verjus_dims.get(key, '')},"
                f" RETURNN's {b.shape} {returnn_dims.get(key, '')}",
            }
        a, b = a.astype(np.float64), b.astype(np.float64)
        same = np.isclose(a, b, atol=TOLERANCE, rtol=TOLERANCE, equal_nan=True)
        with np.errstate(invalid="ignore"):  # inf - inf: equal infs count as 0 below
            diff = np.where(same & ~(np.isfinite(a) & np.isfinite(b)), 0.0, np.abs(a - b))
        worst = max(worst, float(np.nan_to_num(diff, nan=np.inf).max(initial=0.0)))
        if not same.all():
            bad.append(f"{key!r} ({int((~same).sum())} of {a.size} values)")
    if bad:
        return {
            "status": "mismatch",
            "max_diff": worst,
            "reason": f"outputs differ: {', '.join(bad)}, max abs diff {worst:.3g}",
        }
    return {"status": "agree", "max_diff": worst, "reason": "; ".join(notes)}


def _reorder(a: np.ndarray, have: list[str], want: list[str]) -> tuple[np.ndarray, str]:
    """``a`` (dims named ``have``) transposed to the dim order ``want`` where the
    names match one to one, with a note saying so; else ``a`` as it is."""
    if len(set(have)) != len(have) or sorted(have) != sorted(want):
        return a, ""
    return a.transpose([have.index(n) for n in want]), f"dims in another order {have} vs {want}"
