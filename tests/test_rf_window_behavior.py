"""``rf.window`` under RETURNN's behavior version and config options, against
RETURNN's own on its torch backend, and per version without RETURNN.

RETURNN's ``rf.window`` over a dynamic spatial dim depends on its settings:
``use_mask`` (whether the padding frames are taken as 0 first) defaults to False
up to behavior version 22 (``rf.use_mask_default``, overridden by the options
``rf_use_mask`` / ``rf_use_mask_window``), and the ``"same"`` padding is
``rf.pad``'s with ``handle_dynamic_dims=False`` below 21: after the padded
frames, so the windows at the end of a shorter sequence hold its padding frames
(as they are, or zeros with ``use_mask``) instead of ``pad_value``. The inputs'
padding frames hold random values, so that they show where they enter a result.
RETURNN's side runs as in ``test_rf_conv_behavior_version``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_rf_behavior_versions import stand_in_settings
from test_rf_conv_behavior_version import (
    LATEST,
    REFERENCE_HEADER,
    returnn_settings,
    run_reference,
)

import verjus.rf as rf
from verjus.rf import Dim

LENS = [7, 4, 6]
B, T, F = len(LENS), max(LENS), 2

# (name, behavior version, RETURNN config options, whether the padding frames
# are taken as 0 by default)
SETTINGS = [
    ("v20", 20, {}, False),
    ("v22", 22, {}, False),
    ("latest", LATEST, {}, True),
    ("v20-use_mask_window", 20, {"rf_use_mask_window": True}, True),
    ("latest-use_mask-False", LATEST, {"rf_use_mask": False}, False),
]
# (name, rf.window's options besides the window size)
OPS = [
    ("same-w3", {"window": 3}),
    ("same-w4-pad7", {"window": 4, "pad_value": 7.0}),
    ("same-w4-left3", {"window": 4, "window_left": 3}),
    ("same-w3-s2", {"window": 3, "stride": 2}),
    ("same-w3-use_mask", {"window": 3, "use_mask": True}),
    ("same-w3-no-mask", {"window": 3, "use_mask": False}),
    ("valid-w3", {"window": 3, "padding": "valid"}),
]

# The same code builds and runs a case on RETURNN's rf and on verjus.rf.
CASE_CODE = """
def run_case(rf, Dim, op, x, lens, to_numpy):
    batch = Dim(x.shape[0], name="batch")
    time = Dim(rf.convert_to_tensor(lens, dims=[batch]), name="time")
    feat = Dim(x.shape[2], name="feat")
    source = rf.convert_to_tensor(x, dims=[batch, time, feat])
    window_dim = Dim(op["window"], name="window")
    options = {k: v for k, v in op.items() if k != "window"}
    y, out_time = rf.window(source, spatial_dim=time, window_dim=window_dim, **options)
    out = to_numpy(y.copy_transpose([batch, out_time, window_dim, feat]))
    out_lens = to_numpy(out_time.dyn_size_ext.copy_transpose([batch]))
    return out, out_lens
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
            rf, Dim, case["op"], data["x"], data["lens"],
            lambda t: t.raw_tensor.detach().cpu().numpy(),
        )
    results[case["id"]] = out
    results[case["id"] + ":lens"] = out_lens
np.savez(request["outputs"], **results)
"""
)

_namespace: dict[str, Any] = {}
exec(CASE_CODE, _namespace)  # the shared case code above
run_case = _namespace["run_case"]


def inputs() -> dict[str, np.ndarray]:
    """``[B, T, F]`` with random values in the padding frames too."""
    g = np.random.default_rng(0)
    return {
        "lens": np.array(LENS, np.int32),
        "x": g.standard_normal((B, T, F)).astype(np.float32),
    }


@pytest.fixture(scope="module")
def returnn_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """RETURNN's outputs of every case, by ``<setting>/<op>``."""
    cases = [
        {"id": f"{s_name}/{name}", "behavior_version": version, "options": options, "op": op}
        for s_name, version, options, _ in SETTINGS
        for name, op in OPS
    ]
    return run_reference(tmp_path_factory, REFERENCE_SCRIPT, cases, inputs())


def run(op: dict, data: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A case on verjus.rf under the settings in effect."""
    return run_case(rf, Dim, op, data["x"], data["lens"], lambda t: t.numpy())


@pytest.mark.parametrize("setting", SETTINGS, ids=[s[0] for s in SETTINGS])
@pytest.mark.parametrize(("name", "op"), OPS, ids=[n for n, _ in OPS])
def test_equals_returnn(returnn_results: dict, setting: tuple, name: str, op: dict) -> None:
    with returnn_settings(setting[1], setting[2]):
        out, out_lens = run(op, inputs())
    key = f"{setting[0]}/{name}"
    want, want_lens = returnn_results[key], returnn_results[key + ":lens"]
    np.testing.assert_array_equal(out_lens, want_lens)
    assert out.shape == want.shape
    # The padding frames of the output too: a later unmasked op reads them.
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


# -- per version, without RETURNN ----------------------------------------------------------


def expected(x: np.ndarray, lens: list[int], *, padded: bool, masked: bool) -> np.ndarray:
    """The centered windows of 3 over the valid frames of ``x`` ``[B, T, F]``:
    ``padded``: right of each sequence its padding frames (as they are, zeros
    if ``masked``), then zeros after the longest (``handle_dynamic_dims=False``);
    else zeros right after its end."""
    out = np.zeros((B, T, 3, F), np.float32)
    for b, n in enumerate(lens):
        seq = x[b].copy() if padded else x[b, :n]
        if masked:
            seq[n:] = 0.0
        frames = np.pad(seq, [(1, 1), (0, 0)])
        for t in range(n):
            out[b, t] = frames[t : t + 3]
    return out


@pytest.mark.parametrize(
    ("version", "options", "use_mask", "padded", "masked"),
    [
        (None, None, None, False, True),  # no RETURNN settings: RETURNN's newest
        (LATEST, None, None, False, True),
        (21, None, None, False, False),
        (20, None, None, True, False),
        (0, None, None, True, False),
        (20, None, True, True, True),
        (20, {"rf_use_mask_window": True}, None, True, True),
        (20, {"rf_use_mask": True}, False, True, False),  # the argument wins
        (LATEST, {"rf_use_mask": False}, None, False, False),
    ],
)
def test_window_per_version(
    version: int | None, options: dict | None, use_mask: bool | None, padded: bool, masked: bool
) -> None:
    """The valid frames' windows: from version 21 on each sequence's end is
    padded with zeros (whatever ``use_mask``), below 21 the windows at a shorter
    sequence's end hold its padding frames, as they are up to version 22 unless
    ``use_mask`` (the argument, else RETURNN's ``rf_use_mask*`` options)."""
    data = inputs()
    with stand_in_settings(version, options):
        out, out_lens = run({"window": 3, "use_mask": use_mask}, data)
    np.testing.assert_array_equal(out_lens, LENS)
    want = expected(data["x"], LENS, padded=padded, masked=masked)
    valid = np.arange(T)[None, :] < np.array(LENS)[:, None]
    np.testing.assert_allclose(out[valid], want[valid], rtol=1e-6, atol=1e-6)


def test_use_mask_zeroes_the_padding_in_the_result() -> None:
    """``"valid"`` windows never take padding frames into a valid one, but the
    result's padding frames take them, as they are unless masked (RETURNN's
    default from version 23 on)."""
    data = inputs()
    op = {"window": 3, "padding": "valid"}
    with stand_in_settings(23):
        masked, _ = run(op, data)
    with stand_in_settings(22):
        unmasked, lens = run(op, data)
    x = data["x"]
    np.testing.assert_array_equal(lens, np.array(LENS) - 2)
    b, n = 1, LENS[1]  # the result's first padding frame n - 2: the window ends at frame n
    np.testing.assert_array_equal(unmasked[b, n - 2], x[b, n - 2 : n + 1])
    np.testing.assert_array_equal(masked[b, n - 2], np.concatenate([x[b, n - 2 : n], [[0.0] * F]]))
