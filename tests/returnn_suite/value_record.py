"""Records each ``run_model`` call of RETURNN's rf tests on verjus, to be replayed on RETURNN.

With ``VERJUS_RETURNN_COMPARE=<folder>`` set, verjus's ``rf_utils`` saves, per
call, what RETURNN needs to run the same model on the same values: the extern
data as raw arrays (``TensorDict.as_raw_tensor_dict``), the model's parameters
by their dotted names, and the outputs (``as_raw_tensor_dict`` with the dims'
sizes, as RETURNN's own comparisons use it). ``replay/rf_utils.py`` runs the
test again under RETURNN with these values and compares
(``tests/test_returnn_rf_values.py`` drives both).

A call is named by the test's pytest node id and its count within the test,
so the replay finds the record of the same call.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

ENV = "VERJUS_RETURNN_COMPARE"
_calls: dict[str, int] = {}


def folder() -> Path | None:
    """The folder records go to, or None when recording is off."""
    given = os.environ.get(ENV)
    return Path(given) if given else None


def next_call() -> tuple[str, int]:
    """The current test's node id and the number of this ``run_model`` call in it."""
    nodeid = os.environ.get("PYTEST_CURRENT_TEST", "unknown").rsplit(" (", 1)[0]
    index = _calls.get(nodeid, 0)
    _calls[nodeid] = index + 1
    return nodeid, index


def record_path(root: Path, nodeid: str, index: int) -> Path:
    """The ``.npz`` file of call ``index`` of test ``nodeid`` in ``root``."""
    return root / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', nodeid)[:180]}__{index}.npz"


def save(
    path: Path,
    *,
    meta: dict[str, Any],
    inputs: dict[str, Any],
    params: dict[str, Any],
    outputs: dict[str, Any],
) -> None:
    """Writes one call's arrays (``in/``, ``param/``, ``out/`` keys) and ``meta`` (JSON)."""
    arrays = {"meta": np.array(json.dumps(meta))}
    for prefix, values in (("in", inputs), ("param", params), ("out", outputs)):
        arrays.update({f"{prefix}/{k}": np.asarray(v) for k, v in values.items()})
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)


def load_meta(path: Path) -> dict[str, Any]:
    """The ``meta`` of a record."""
    with np.load(path, allow_pickle=False) as data:
        return json.loads(str(data["meta"]))


def load(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """``meta`` and the ``{"in": ..., "param": ..., "out": ...}`` arrays of a record."""
    groups: dict[str, dict[str, np.ndarray]] = {"in": {}, "param": {}, "out": {}}
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        for key in data.files:
            if key != "meta":
                prefix, name = key.split("/", 1)
                groups[prefix][name] = data[key]
    return meta, groups


def parameters(model: Any) -> dict[str, tuple[np.ndarray, list[str]]]:
    """``{dotted name: (values, dim names)}`` of what ``get_model`` returned (none
    if it is no module), copied now: call it before the step can change them."""
    if not hasattr(model, "named_parameters"):
        return {}
    return {
        name: (np.array(p.numpy()), [d.name for d in p.dims])
        for name, p in model.named_parameters()
    }


def dim_names(outputs: Any) -> dict[str, list[str]]:
    """The dim names of each output of a ``TensorDict`` (verjus's or RETURNN's), and of
    the lengths of its dynamic dims, under the keys of ``as_raw_tensor_dict``."""
    names = {}
    for key, value in outputs.data.items():
        names[key] = [d.name for d in value.dims]
        for i, dim in enumerate(value.dims):
            lengths = dim.dyn_size_ext
            if lengths is not None and lengths.dims:
                names[f"{key}:size{i}"] = [d.name for d in lengths.dims]
    return names


def record(
    nodeid: str,
    index: int,
    *,
    kind: str,
    inputs: dict[str, Any],
    params: dict[str, tuple[np.ndarray, list[str]]],
    outputs: dict[str, Any],
    output_dims: dict[str, list[str]],
    seed_dependent: bool,
) -> None:
    """Saves one call: a ``run_model`` (``kind="forward"``) or ``run_model_torch_train``
    (``kind="train"``, ``outputs`` its dict of floats) call.

    :param inputs: the extern data's raw arrays as the run got them
    :param params: ``parameters(model)`` before the step
    :param outputs: the outputs' raw arrays with their dims' sizes
        (``as_raw_tensor_dict(include_const_sizes=True)``)
    :param output_dims: each output's dim names, in order
    :param seed_dependent: whether the outputs changed with the random seed (then
        they hold random draws, which RETURNN draws differently)
    """
    root = folder()
    if root is None:
        return
    meta = {
        "nodeid": nodeid,
        "index": index,
        "kind": kind,
        "seed_dependent": seed_dependent,
        "param_dims": {name: dims for name, (_, dims) in params.items()},
        "output_dims": output_dims,
    }
    arrays = {name: values for name, (values, _) in params.items()}
    save(record_path(root, nodeid, index), meta=meta, inputs=inputs, params=arrays, outputs=outputs)


def same_values(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two raw tensor dicts have the same keys, shapes and values (NaN equal to NaN)."""
    if a.keys() != b.keys():
        return False
    for key, x in a.items():
        x, y = np.asarray(x), np.asarray(b[key])
        if x.shape != y.shape or not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
            return False
    return True
