"""``verjus.autocast`` (issue 37): matrix products of ``verjus.rf`` code in
bfloat16 or float16 with float32 results and gradients, the tape's saved bytes,
and RETURNN's ``torch_amp`` in the RF engine."""

from __future__ import annotations

import itertools
import json
import threading

import numpy as np
import pytest

import verjus
import verjus.rf as rf
from verjus.engine import Engine

batch, in_dim, hid, out_dim = (
    rf.Dim(64, name="batch"),
    rf.Dim(16, name="in"),
    rf.Dim(32, name="hid"),
    rf.Dim(4, name="out"),
)


class Mlp(rf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = rf.Linear(in_dim, hid)
        self.second = rf.Linear(hid, out_dim)

    def __call__(self, x: rf.Tensor) -> rf.Tensor:
        return self.second(rf.tanh(self.first(x)))


def _input(seed: int = 0) -> rf.Tensor:
    values = np.random.default_rng(seed).standard_normal((64, 16)).astype(np.float32)
    return rf.convert_to_tensor(values, dims=[batch, in_dim])


def _rounded(values: np.ndarray, dtype: str) -> np.ndarray:
    d = rf.Dim(values.size, name="flat")
    flat = rf.convert_to_tensor(values.reshape(-1).astype(np.float32), dims=[d])
    return rf.cast(rf.cast(flat, dtype), "float32").numpy().reshape(values.shape)


def _by_hand(model: Mlp, x: np.ndarray, dtype: str) -> np.ndarray:
    """The model in numpy (float64 sums of float32 values), each product's
    operands rounded to ``dtype``."""
    p = rf.state_dict(model)
    r = lambda a: _rounded(a, dtype).astype(np.float64)  # noqa: E731
    h = np.tanh((r(x) @ r(p["first.weight"]) + p["first.bias"]).astype(np.float32))
    return r(h) @ r(p["second.weight"]) + p["second.bias"]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_linear_layers_multiply_rounded_operands_into_float32(dtype: str) -> None:
    model, x = Mlp(), _input()
    plain = model(x).numpy()
    with verjus.autocast(dtype):
        y = model(x)
    assert y.dtype == "float32"
    np.testing.assert_allclose(y.numpy(), _by_hand(model, x.numpy(), dtype), rtol=1e-5, atol=1e-5)
    # It differs from float32 by the rounding, no more.
    err = np.abs(y.numpy() - plain).max()
    assert 0 < err < (0.05 if dtype == "bfloat16" else 0.01)
    # Outside the block (and with enabled=False), float32 again.
    np.testing.assert_array_equal(model(x).numpy(), plain)
    with verjus.autocast(dtype, enabled=False):
        np.testing.assert_array_equal(model(x).numpy(), plain)


@pytest.mark.parametrize("groups", [1, 8])  # 8: depthwise (the Conformer's)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_convolutions_read_rounded_input_and_filter(dtype: str, groups: int) -> None:
    time, chan = rf.Dim(10, name="time"), rf.Dim(8, name="chan")
    conv = rf.Conv1d(chan, chan, 3, padding="same", groups=groups)
    values = np.random.default_rng(2).standard_normal((4, 10, 8)).astype(np.float32)
    x = rf.convert_to_tensor(values, dims=[rf.Dim(4, name="b"), time, chan])
    with verjus.autocast(dtype):
        y, _ = conv(x, in_spatial_dim=time)
    filt = conv.filter.numpy()
    conv.filter.assign(_rounded(filt, dtype))  # by hand: the float32 conv of rounded values
    rounded_x = rf.convert_to_tensor(_rounded(values, dtype), dims=list(x.dims))
    expected, _ = conv(rounded_x, in_spatial_dim=time)
    np.testing.assert_array_equal(y.numpy(), expected.numpy())
    conv.filter.assign(filt)
    assert not np.array_equal(y.numpy(), conv(x, in_spatial_dim=time)[0].numpy())


def test_gradients_are_float32_and_close_to_float32_training() -> None:
    model, x = Mlp(), _input()

    def grads(dtype: str | None) -> dict[str, np.ndarray]:
        with verjus.autocast(dtype):
            loss = rf.reduce_sum(rf.reduce_sum(model(x) ** 2, axis=out_dim), axis=batch)
        params = dict(model.named_parameters())
        return {n: rf.gradient(loss, p).numpy() for n, p in params.items()}

    exact, mixed = grads(None), grads("bfloat16")
    for name in exact:
        assert mixed[name].dtype == np.float32
        scale = np.abs(exact[name]).max()
        assert np.abs(mixed[name] - exact[name]).max() < 0.05 * scale, name


def test_the_tape_keeps_rounded_activations_in_half_the_bytes() -> None:
    """Four Linear layers in a row with no elementwise op between them: what
    the tape keeps for backward is the products' operands. Autocast keeps
    them in 2 bytes (plus 2-byte copies of the weights)."""
    dims = [in_dim, hid, rf.Dim(32, name="h2"), rf.Dim(32, name="h3"), out_dim]
    layers = [rf.Linear(a, b, with_bias=False) for a, b in itertools.pairwise(dims)]
    big = rf.Dim(4096, name="big")
    x = rf.convert_to_tensor(
        np.random.default_rng(1).standard_normal((4096, 16)).astype(np.float32), dims=[big, in_dim]
    )

    def saved(dtype: str | None) -> int:
        before = verjus.memory_stats()["tape_saved_bytes"]
        with verjus.autocast(dtype):
            y = x
            for layer in layers:
                y = layer(y)
        kept = verjus.memory_stats()["tape_saved_bytes"] - before
        del y
        return kept

    activations = 4 * 4096 * (16 + 32 + 32 + 32)
    weights = 16 * 32 + 32 * 32 + 32 * 32 + 32 * 4
    assert saved(None) == activations
    assert saved("bfloat16") == activations // 2 + 2 * weights


def test_the_setting_belongs_to_the_thread_and_bad_dtypes_are_refused() -> None:
    seen = []
    with verjus.autocast("bfloat16"):
        model, x = Mlp(), _input()
        inside = model(x).numpy()
        worker = threading.Thread(target=lambda: seen.append(model(x).numpy()))
        worker.start()
        worker.join()
    with verjus.autocast(None):
        plain = model(x).numpy()
    np.testing.assert_array_equal(seen[0], plain)
    assert not np.array_equal(inside, plain)
    with pytest.raises(ValueError, match="bfloat16 or float16, not int32"):
        verjus.autocast("int32")
    with pytest.raises(ValueError, match='unknown dtype "half"'):
        verjus.autocast("half")


def _engine_run(tmp_path, **options) -> list[dict]:
    from test_engine import data, engine  # the small tagger's setup (tests/ is on the path)

    e = engine(tmp_path, epochs=2, **options)
    e.train(data(120, 0), {"dev": data(40, 1)})
    path = tmp_path / "run" / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_engine_honours_torch_amp(tmp_path) -> None:
    exact = _engine_run(tmp_path / "f32")
    mixed = _engine_run(tmp_path / "bf16", torch_amp={"dtype": "bfloat16"})
    dev_exact, dev_mixed = exact[-1]["dev"]["ce"], mixed[-1]["dev"]["ce"]
    assert dev_mixed != dev_exact
    assert abs(dev_mixed - dev_exact) < 0.05 * dev_exact
    # Without torch_amp the engine leaves the caller's autocast in effect.
    with verjus.autocast("bfloat16"):
        outer = _engine_run(tmp_path / "outer")
    assert outer[-1]["dev"]["ce"] == dev_mixed
    with pytest.raises(ValueError, match="torch_amp: expected 'bfloat16' or 'float16'"):
        Engine(get_model=None, extern_data={}, train_step=None, torch_amp="float8")
