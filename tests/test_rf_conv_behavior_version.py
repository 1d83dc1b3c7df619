"""``rf.conv`` / ``rf.pool`` under RETURNN's behavior version and config options,
against RETURNN's own on its torch backend.

RETURNN's result over a dynamic spatial dim depends on its settings: with a
behavior version up to 22 (the version of a config that sets none) the padding
frames enter the convolution or pooling as they are (no ``use_mask``), and below
24 ``padding="same"`` with strides pads as its torch backend does, by an amount
that depends on the padded size; the options ``rf_use_mask`` and
``rf_use_consistent_same_padding`` override both. verjus follows them where
RETURNN's settings are in effect (a behavior version set, or a RETURNN config
loaded), so a RETURNN config gives RETURNN's numbers (RETURNN's
``demo-rf-pt-benchmark.py`` sets no behavior version). The inputs' padding
frames hold random values, so that they show where they enter a result.

RETURNN's side runs in this interpreter where it has torch, else in the reference
interpreter ``/tmp/refvenv/bin/python``; without either the comparison skips.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import verjus.rf as rf
from verjus.rf import Dim

REFERENCE_PYTHON = Path("/tmp/refvenv/bin/python")
LATEST = 38  # RETURNN's newest behavior version (1.20261022)
LENS = [8, 5, 3]  # (8 - 1) % stride != 0 for strides 2 and 3: the torch padding differs
C_IN, C_OUT, FREQ = 2, 3, 5

# (name, behavior version, RETURNN config options, whether the padding frames are masked)
SETTINGS = [
    ("v0", 0, {}, False),
    ("v23", 23, {}, True),
    ("latest", LATEST, {}, True),
    ("latest-use_mask-False", LATEST, {"rf_use_mask": False}, False),
    ("latest-torch-same", LATEST, {"rf_use_consistent_same_padding": False}, True),
    ("v0-use_mask_conv-True", 0, {"rf_use_mask_conv": True, "rf_use_mask_pool": True}, True),
]
# (name, op options): 1-D over time, or 2-D over (time, freq)
OPS = [
    ("conv1d-k3", {"op": "conv", "nd": 1, "k": [3], "s": [1], "padding": "same"}),
    ("conv1d-k4", {"op": "conv", "nd": 1, "k": [4], "s": [1], "padding": "same"}),
    ("conv1d-k3-s2", {"op": "conv", "nd": 1, "k": [3], "s": [2], "padding": "same"}),
    ("conv1d-k4-s3", {"op": "conv", "nd": 1, "k": [4], "s": [3], "padding": "same"}),
    ("conv1d-k3-s2-valid", {"op": "conv", "nd": 1, "k": [3], "s": [2], "padding": "valid"}),
    ("conv1d-k3-s2-pad1", {"op": "conv", "nd": 1, "k": [3], "s": [2], "padding": 1}),
    ("conv1d-k1-s2", {"op": "conv", "nd": 1, "k": [1], "s": [2], "padding": "same"}),
    ("conv2d-k3x3-s3x1", {"op": "conv", "nd": 2, "k": [3, 3], "s": [3, 1], "padding": "same"}),
    ("conv2d-k3x2-s2x2", {"op": "conv", "nd": 2, "k": [3, 2], "s": [2, 2], "padding": "same"}),
    ("maxpool1d-k3-s2", {"op": "max", "nd": 1, "k": [3], "s": [2], "padding": "same"}),
    ("maxpool1d-k3", {"op": "max", "nd": 1, "k": [3], "s": [1], "padding": "same"}),
    ("maxpool2d-k1x2", {"op": "max", "nd": 2, "k": [1, 2], "s": [1, 2], "padding": "same"}),
    ("avgpool1d-k3-s2", {"op": "avg", "nd": 1, "k": [3], "s": [2], "padding": "same"}),
]


def _skip(setting: tuple, op: dict) -> str | None:
    """Why a combination is not compared, or None."""
    name, _, _, masked = setting
    if op["op"] == "avg" and masked and name in ("latest", "v0-use_mask_conv-True"):
        # RETURNN's masked average counts the (zeroed) padding frames of a
        # sequence in the windows at its end; verjus's native pool leaves them out
        # (see KNOWN_MISMATCHES in tests/test_returnn_rf_values.py).
        return "masked average pooling at the sequence ends differs by design"
    return None


# The same code builds and runs a case on RETURNN's rf and on verjus.rf.
CASE_CODE = """
def run_case(rf, Dim, op, x, lens, filt, to_numpy):
    batch = Dim(x.shape[0], name="batch")
    time = Dim(rf.convert_to_tensor(lens, dims=[batch]), name="time")
    spatial = [time] if op["nd"] == 1 else [time, Dim(x.shape[2], name="freq")]
    c_in = Dim(x.shape[-1], name="c_in")
    source = rf.convert_to_tensor(x, dims=[batch, *spatial, c_in])
    if op["op"] == "conv":
        c_out = Dim(filt.shape[0], name="c_out")
        fs = [Dim(k, name=f"f{i}") for i, k in enumerate(op["k"])]
        f = rf.convert_to_tensor(filt, dims=[c_out, c_in, *fs])
        y, out_spatial = rf.conv(
            source, in_dim=c_in, out_dim=c_out, in_spatial_dims=spatial, filter=f,
            filter_size=fs, padding=op["padding"], strides=op["s"],
        )
        channels = c_out
    else:
        y, out_spatial = rf.pool(
            source, mode=op["op"], pool_size=op["k"], padding=op["padding"],
            strides=op["s"], in_spatial_dims=spatial,
        )
        channels = c_in
    out = to_numpy(y.copy_transpose([batch, *out_spatial, channels]))
    out_lens = to_numpy(out_spatial[0].dyn_size_ext.copy_transpose([batch]))
    return out, out_lens
"""

# What every reference script starts with: RETURNN's rf on torch, the request
# (see ``run_reference``) and its inputs.
REFERENCE_HEADER = """
import json, sys
import numpy as np
import returnn.frontend as rf
from returnn.config import Config, global_config_ctx
from returnn.tensor import Dim
from returnn.util.basic import BehaviorVersion

rf.select_backend_torch()
request = json.load(sys.stdin)
data = dict(np.load(request["inputs"]))
"""

REFERENCE_SCRIPT = (
    REFERENCE_HEADER
    + """results = {}
"""
    + CASE_CODE
    + """
for case in request["cases"]:
    BehaviorVersion._reset((case["behavior_version"], 0))
    with global_config_ctx(Config(case["options"])):
        out, out_lens = run_case(
            rf, Dim, case["op"], data[f"x{case['op']['nd']}"], data["lens"],
            data.get(case["filter"]), lambda t: t.raw_tensor.detach().cpu().numpy(),
        )
    results[case["id"]] = out
    results[case["id"] + ":lens"] = out_lens
np.savez(request["outputs"], **results)
"""
)

_namespace: dict[str, Any] = {}
exec(CASE_CODE, _namespace)  # the shared case code above
run_case = _namespace["run_case"]


def reference_python() -> str:
    """An interpreter with RETURNN and torch: this one, else the reference venv's; or skip."""
    if importlib.util.find_spec("torch") and importlib.util.find_spec("returnn"):
        return sys.executable
    if REFERENCE_PYTHON.exists():
        return str(REFERENCE_PYTHON)
    pytest.skip(f"RETURNN's rf on torch is the reference: no torch here and no {REFERENCE_PYTHON}")


def run_reference(
    tmp_path_factory: pytest.TempPathFactory,
    script: str,
    cases: list[dict[str, Any]],
    inputs: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """RETURNN's results of ``cases``: ``script`` run by ``reference_python()``
    reads ``{"cases", "inputs", "outputs"}`` (the npz files of ``inputs`` and
    of its results) on stdin."""
    folder = tmp_path_factory.mktemp("returnn")
    np.savez(folder / "inputs.npz", **inputs)
    request = {
        "cases": cases,
        "inputs": str(folder / "inputs.npz"),
        "outputs": str(folder / "outputs.npz"),
    }
    done = subprocess.run(
        [reference_python(), "-c", script],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(folder / "outputs.npz") as outputs:
        return dict(outputs)


def inputs() -> dict[str, np.ndarray]:
    """Inputs with random values in their padding frames too, and the filters."""
    g = np.random.default_rng(0)
    b, t = len(LENS), max(LENS)
    data = {
        "lens": np.array(LENS, np.int32),
        "x1": g.standard_normal((b, t, C_IN)).astype(np.float32),
        "x2": g.standard_normal((b, t, FREQ, C_IN)).astype(np.float32),
    }
    for name, op in OPS:
        if op["op"] == "conv":
            data[f"filter-{name}"] = g.standard_normal((C_OUT, C_IN, *op["k"])).astype(np.float32)
    return data


def cases() -> list[dict]:
    return [
        {
            "id": f"{setting[0]}/{name}",
            "behavior_version": setting[1],
            "options": setting[2],
            "op": op,
            "filter": f"filter-{name}",
        }
        for setting in SETTINGS
        for name, op in OPS
        if _skip(setting, op) is None
    ]


@pytest.fixture(scope="module")
def returnn_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """RETURNN's outputs of every case, by case id."""
    return run_reference(tmp_path_factory, REFERENCE_SCRIPT, cases(), inputs())


@contextlib.contextmanager
def returnn_settings(version: int, options: dict[str, Any]) -> Iterator[None]:
    """RETURNN's behavior ``version`` and a global config with ``options`` for the block."""
    basic = pytest.importorskip("returnn.util.basic", reason="RETURNN's settings are RETURNN's")
    from returnn.config import Config, global_config_ctx

    state = basic.BehaviorVersion._get_state()
    basic.BehaviorVersion._reset((version, 0))
    try:
        with global_config_ctx(Config(options)):
            yield
    finally:
        basic.BehaviorVersion._reset(state)


@pytest.mark.parametrize("setting", SETTINGS, ids=[s[0] for s in SETTINGS])
@pytest.mark.parametrize(("name", "op"), OPS, ids=[n for n, _ in OPS])
def test_equals_returnn(returnn_results: dict, setting: tuple, name: str, op: dict) -> None:
    why = _skip(setting, op)
    if why:
        pytest.skip(why)
    data = inputs()
    with returnn_settings(setting[1], setting[2]):
        out, out_lens = run_case(
            rf,
            Dim,
            op,
            data[f"x{op['nd']}"],
            data["lens"],
            data.get(f"filter-{name}"),
            lambda t: t.numpy(),
        )
    key = f"{setting[0]}/{name}"
    want, want_lens = returnn_results[key], returnn_results[key + ":lens"]
    np.testing.assert_array_equal(out_lens, want_lens)
    assert out.shape == want.shape
    masked = setting[3]
    # Unmasked, the padding frames of the output are RETURNN's too (a later
    # unmasked op reads them); masked, only the frames within the sequences.
    frames = np.arange(out.shape[1])[None, :] < want_lens[:, None] if masked else ...
    np.testing.assert_allclose(out[frames], want[frames], rtol=1e-5, atol=1e-5)


def test_verjus_behavior_without_returnn_settings() -> None:
    """Without RETURNN's settings in effect verjus masks (RETURNN's newest
    behavior): the padding frames leave the valid frames alone."""
    batch = Dim(2, name="batch")
    time = Dim(rf.convert_to_tensor(np.array([4, 2], np.int32), dims=[batch]), name="time")
    c = Dim(1, name="c")
    x = np.ones((2, 4, 1), np.float32)
    x[1, 2:] = 100.0  # padding
    source = rf.convert_to_tensor(x, dims=[batch, time, c])
    y, (out_time,) = rf.pool(
        source, mode="max", pool_size=3, padding="same", strides=1, in_spatial_dims=[time]
    )
    assert y.copy_transpose([batch, out_time, c]).numpy()[1, :2, 0].tolist() == [1.0, 1.0]
    assert rf.use_mask_default(default=True, default_false_for_behavior_version_up_to=22)


def test_a_returnn_config_without_behavior_version_is_version_0() -> None:
    """A RETURNN config in effect that sets no behavior version: RETURNN's 0,
    unmasked (as RETURNN's ``use_mask_default``); options override it."""
    pytest.importorskip("returnn.util.basic", reason="RETURNN's settings are RETURNN's")
    from returnn.config import Config, global_config_ctx
    from returnn.util.basic import BehaviorVersion

    from verjus.rf.backend import returnn_behavior_version

    state = BehaviorVersion._get_state()
    BehaviorVersion._reset((None, 0))
    try:
        assert returnn_behavior_version() is None
        with global_config_ctx(Config({})):
            assert returnn_behavior_version() == 0
            assert not rf.use_mask_default(
                default=True, default_false_for_behavior_version_up_to=22, func_name="conv"
            )
        with global_config_ctx(Config({"rf_use_mask_conv": True})):
            assert rf.use_mask_default(
                default=True, default_false_for_behavior_version_up_to=22, func_name="conv"
            )
        with global_config_ctx(Config({"rf_use_mask": False})):
            assert not rf.use_mask_default(default=True, func_name="BatchNorm")
    finally:
        BehaviorVersion._reset(state)
