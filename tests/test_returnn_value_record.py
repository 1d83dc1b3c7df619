"""The records that ``tests/test_returnn_rf_values.py`` compares with RETURNN: written and
read back as they were, named per test and call, with the outputs' dim names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from returnn_suite import value_record

import verjus.rf as rf
from verjus.rf import Dim, Tensor, TensorDict, batch_dim


def test_record_round_trip(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(value_record.ENV, str(tmp_path))
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "test_rf_x.py::test_y[a/b] (call)")
    first, second = value_record.next_call(), value_record.next_call()
    assert first == ("test_rf_x.py::test_y[a/b]", 0)
    assert second[1] == 1
    params = {"lin.weight": (np.ones((2, 3), np.float32), ["in", "out"])}
    inputs = {"data": np.arange(6, dtype=np.float32).reshape(2, 3), "data:size0": np.int32(2)}
    outputs = {"output": np.zeros((2,), np.int32), "output:size0": 2}
    value_record.record(
        *first,
        kind="forward",
        inputs=inputs,
        params=params,
        outputs=outputs,
        output_dims={"output": ["batch"]},
        seed_dependent=False,
    )
    path = value_record.record_path(tmp_path, *first)
    assert path.parent == tmp_path
    assert "/" not in path.name
    meta, arrays = value_record.load(path)
    assert meta == value_record.load_meta(path)
    assert meta["param_dims"] == {"lin.weight": ["in", "out"]}
    assert not meta["seed_dependent"]
    assert value_record.same_values(arrays["in"], inputs)
    assert value_record.same_values(arrays["out"], outputs)
    assert not value_record.same_values(arrays["out"], {"output": np.ones((2,), np.int32)})


def test_dim_names_cover_lengths() -> None:
    time_dim = Dim(Tensor("time", [batch_dim], "int32"), name="time")
    feat = Dim(3, name="feat")
    data = TensorDict({"data": Tensor("data", [batch_dim, time_dim, feat], "float32")})
    data.fill_random_()
    rf.init_forward_step_run_ctx(epoch=1, step=0)
    assert value_record.dim_names(data) == {
        "data": ["batch", "time", "feat"],
        "data:size1": ["batch"],
    }
