"""bfloat16 and float16 tensors (issue 37, item 1): rounding into them (ties to
even, range ends, NaN and infinities), numpy in and out (``ml_dtypes`` for
bfloat16 where installed, else float32 values), gradients through ``rf.cast``,
and safetensors weights in both types, for ``verjus.rf`` and the static graph."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import verjus
import verjus.rf as rf

# f32 values whose rounding pins the rules down (see the conformance check
# `cast` for the reasoning behind each).
CASES = np.array(
    [
        1.0 + 2.0**-8,  # bf16 tie: 1
        1.0 + 3 * 2.0**-8,  # bf16 tie: 1 + 2^-6
        1.0 + 2.0**-11,  # f16 tie: 1
        1.0 + 3 * 2.0**-11,  # f16 tie: 1 + 2^-9
        65519.0,  # f16: 65504
        65520.0,  # f16: inf
        2.0**-25,  # f16: 0
        3 * 2.0**-25,  # f16: 2^-23
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        -2.5,
    ],
    np.float32,
)
BF16 = [1.0, 1.0 + 2.0**-6, 1.0, 1.0, 65536.0, 65536.0, 2.0**-25, 3 * 2.0**-25]
F16 = [1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0, 1.0 + 2.0**-9, 65504.0, np.inf, 0.0, 2.0**-23]


def _cast(values: np.ndarray, dtype: str) -> rf.Tensor:
    d = rf.Dim(len(values), name="i")
    return rf.cast(rf.convert_to_tensor(values, dims=[d]), dtype)


@pytest.mark.parametrize(("dtype", "expected"), [("bfloat16", BF16), ("float16", F16)])
def test_cast_rounds_to_nearest_even_and_keeps_specials(dtype: str, expected: list) -> None:
    t = _cast(CASES, dtype)
    assert t.dtype == dtype
    back = rf.cast(t, "float32").numpy()
    np.testing.assert_array_equal(back[: len(expected)], np.array(expected, np.float32))
    np.testing.assert_array_equal(back[8:], np.array([-0.0, np.inf, -np.inf, np.nan, -2.5]))
    assert np.signbit(back[8])


def test_rounding_agrees_with_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    values = np.concatenate([CASES, rng.standard_normal(1000).astype(np.float32) * 100])
    for dtype, theirs in [("bfloat16", torch.bfloat16), ("float16", torch.float16)]:
        ours = rf.cast(_cast(values, dtype), "float32").numpy()
        expected = torch.from_numpy(values).to(theirs).float().numpy()
        np.testing.assert_array_equal(ours, expected, err_msg=dtype)


def test_numpy_gives_float16_and_ml_dtypes_bfloat16() -> None:
    assert _cast(CASES, "float16").numpy().dtype == np.float16
    ml_dtypes = pytest.importorskip("ml_dtypes")
    out = _cast(CASES, "bfloat16").numpy()
    assert out.dtype == ml_dtypes.bfloat16
    # And back in: a bfloat16 or float16 array keeps its type.
    d = rf.Dim(len(CASES), name="i")
    assert rf.convert_to_tensor(out, dims=[d]).dtype == "bfloat16"
    d4 = rf.Dim(4, name="j")
    assert rf.convert_to_tensor(CASES[:4].astype(np.float16), dims=[d4]).dtype == "float16"


def test_bfloat16_is_float32_values_without_ml_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import fails
    t = _cast(CASES, "bfloat16")
    assert t.dtype == "bfloat16"
    out = t.numpy()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out[: len(BF16)], np.array(BF16, np.float32))


def test_the_gradient_flows_through_float_casts_unrounded() -> None:
    d = rf.Dim(3, name="i")
    x = rf.convert_to_tensor(
        np.array([1.0, 2.0 + 2.0**-9, -3.0], np.float32), dims=[d], requires_grad=True
    )
    for dtype in ("bfloat16", "float16"):
        y = rf.cast(rf.cast(x, dtype), "float32") * (1.0 + 2.0**-10)
        loss = rf.reduce_sum(y, axis=d)
        g = rf.gradient(loss, x)
        assert g.dtype == "float32"
        # The gradient is float32 throughout: 1 + 2^-10 would round to 1 in bf16.
        np.testing.assert_array_equal(g.numpy(), np.full(3, 1.0 + 2.0**-10, np.float32))


def test_ops_on_reduced_precision_name_the_dtype() -> None:
    t = _cast(CASES, "bfloat16")
    with pytest.raises(ValueError, match="bfloat16"):
        rf.softmax(t, axis=t.dims[0])


def _torch_free_file(path: Path, arrays: dict[str, np.ndarray], dtype: str) -> None:
    """A safetensors file of ``arrays`` in ``dtype`` (``F16`` or ``BF16``), written
    by hand (the safetensors package writes bfloat16 only from torch)."""
    import json
    import struct

    header, chunks, offset = {}, [], 0
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name], np.float32)
        if dtype == "F16":
            raw = a.astype("<f2").tobytes()
        else:  # round to nearest even, then the upper 16 bits
            raw = rf.cast(_cast(a.reshape(-1), "bfloat16"), "float32").numpy()
            raw = (raw.view(np.uint32) >> 16).astype("<u2").tobytes()
        offsets = [offset, offset + len(raw)]
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": offsets}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(chunks))


class _Model(rf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = rf.Linear(rf.Dim(3, name="in"), rf.Dim(2, name="out"))


@pytest.mark.parametrize(("file_dtype", "dtype"), [("F16", "float16"), ("BF16", "bfloat16")])
def test_rf_load_state_widens_reduced_precision_files(
    tmp_path: Path, file_dtype: str, dtype: str
) -> None:
    state = {n: v * 1.001 for n, v in rf.state_dict(_Model()).items()}
    path = tmp_path / "w.safetensors"
    _torch_free_file(path, state, file_dtype)
    model = _Model()
    rf.load_state(model, path)
    for name, value in rf.state_dict(model).items():
        expected = rf.cast(_cast(state[name].reshape(-1), dtype), "float32").numpy()
        np.testing.assert_array_equal(value.reshape(-1), expected, err_msg=name)


MLP = {
    "inputs": [{"name": "x", "shape": [3]}],
    "layers": [{"name": "fc", "type": "Linear", "out_features": 2}],
    "outputs": ["fc"],
}


@pytest.mark.parametrize(("file_dtype", "dtype"), [("F16", "float16"), ("BF16", "bfloat16")])
def test_network_load_weights_widens_reduced_precision_files(
    tmp_path: Path, file_dtype: str, dtype: str
) -> None:
    net = verjus.Network.from_def(MLP, seed=1)
    state = {n: v * 1.001 for n, v in net.state_dict().items()}
    path = tmp_path / "w.safetensors"
    _torch_free_file(path, state, file_dtype)
    net.load_weights(path)
    for name, value in net.state_dict().items():
        expected = rf.cast(_cast(state[name].reshape(-1), dtype), "float32").numpy()
        np.testing.assert_array_equal(value.reshape(-1), expected, err_msg=name)
