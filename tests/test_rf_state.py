"""``rf.state_dict`` / ``load_state_dict`` / ``save_state`` / ``load_state``:
parameters by RETURNN's dotted names, safetensors files that other readers
(``safetensors``, RETURNN's PyTorch state dict names) agree with, loads that
check every shape before changing anything."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from verjus import rf


class Model(rf.Module):
    """An LSTM between an embedding-sized Linear and an output Linear."""

    def __init__(self, seed: int) -> None:
        rf.set_random_seed(seed)
        self.in_dim, self.hid, self.out_dim = (
            rf.Dim(5, name="in"),
            rf.Dim(4, name="hid"),
            rf.Dim(3, name="out"),
        )
        self.proj = rf.Linear(self.in_dim, self.hid)
        self.lstm = rf.LSTM(self.hid, self.hid)
        self.out = rf.Linear(self.hid, self.out_dim, with_bias=False)


def test_state_dict_names_and_round_trip(tmp_path: Path) -> None:
    a, b = Model(1), Model(2)
    state = rf.state_dict(a)
    assert list(state) == [n for n, _ in a.named_parameters()]
    assert "lstm.rec_weight" in state
    assert "out.weight" in state
    for name, param in a.named_parameters():
        np.testing.assert_array_equal(state[name], param.numpy())
    assert not np.array_equal(rf.state_dict(b)["proj.weight"], state["proj.weight"])
    rf.save_state(a, tmp_path / "a.safetensors")
    rf.load_state(b, tmp_path / "a.safetensors")
    for name, value in rf.state_dict(b).items():
        np.testing.assert_array_equal(value, state[name])
    # The same values give the same bytes.
    rf.save_state(b, tmp_path / "b.safetensors")
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()


def test_the_file_is_safetensors(tmp_path: Path) -> None:
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    model = Model(3)
    rf.save_state(model, tmp_path / "m.safetensors")
    read = safetensors_numpy.load_file(str(tmp_path / "m.safetensors"))
    state = rf.state_dict(model)
    assert sorted(read) == sorted(state)
    for name, value in state.items():
        np.testing.assert_array_equal(read[name], value)
    # And a file written by safetensors loads.
    other = {n: v + 1.0 for n, v in state.items()}
    safetensors_numpy.save_file(other, str(tmp_path / "other.safetensors"))
    rf.load_state(model, tmp_path / "other.safetensors")
    for name, value in rf.state_dict(model).items():
        np.testing.assert_array_equal(value, other[name])


def test_strictness_and_shape_errors_leave_the_module_unchanged(tmp_path: Path) -> None:
    model = Model(4)
    state = rf.state_dict(model)
    with pytest.raises(KeyError, match=r"missing \['out.weight'\], unexpected \['extra'\]"):
        rf.load_state_dict(
            model,
            {**{n: v for n, v in state.items() if n != "out.weight"}, "extra": state["out.weight"]},
        )
    changed = {n: v + 1.0 for n, v in state.items()}
    changed["lstm.rec_weight"] = np.zeros((2, 2), np.float32)
    with pytest.raises(ValueError, match=r"lstm.rec_weight: expected shape \(.*\), got \(2, 2\)"):
        rf.load_state_dict(model, changed)
    for name, value in rf.state_dict(model).items():
        np.testing.assert_array_equal(value, state[name])
    # Not strict: names that match are loaded, the others skipped.
    partial = {"proj.bias": state["proj.bias"] + 2.0, "extra": np.zeros(1, np.float32)}
    rf.load_state_dict(model, partial, strict=False)
    np.testing.assert_array_equal(model.proj.bias.numpy(), state["proj.bias"] + 2.0)
    np.testing.assert_array_equal(model.proj.weight.numpy(), state["proj.weight"])
    with pytest.raises(TypeError, match=r"expected an rf\.Module"):
        rf.state_dict(state)


def test_bad_files_raise_naming_the_file(tmp_path: Path) -> None:
    model = Model(5)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"abc")
    # File problems are OSErrors naming the file, as for verjus.Network's
    # weights (the same reader).
    with pytest.raises(OSError, match=r"bad\.safetensors: not a valid safetensors file"):
        rf.load_state(model, bad)
    bad.write_bytes((10**6).to_bytes(8, "little") + b"{}")
    with pytest.raises(OSError, match=r"bad\.safetensors: .*invalid header length"):
        rf.load_state(model, bad)
    rf.save_state(model, bad)
    data = bad.read_bytes()
    bad.write_bytes(data[:-4])  # the last tensor is cut short
    with pytest.raises(OSError, match=r"bad\.safetensors: .*not fully covered"):
        rf.load_state(model, bad)


def test_names_match_returnn_on_pytorch() -> None:
    """RETURNN's frontend on PyTorch names the same model's parameters alike
    (its state dict, the names a RETURNN checkpoint holds)."""
    pytest.importorskip("torch")
    rf_returnn = pytest.importorskip("returnn.frontend")
    from returnn.tensor import Dim

    rf_returnn.select_backend_torch()
    in_dim, hid, out_dim = Dim(5, name="in"), Dim(4, name="hid"), Dim(3, name="out")

    class ReturnnModel(rf_returnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = rf_returnn.Linear(in_dim, hid)
            self.lstm = rf_returnn.LSTM(hid, hid)
            self.out = rf_returnn.Linear(hid, out_dim, with_bias=False)

    from returnn.torch.frontend.bridge import rf_module_to_pt_module

    pt = rf_module_to_pt_module(ReturnnModel())
    theirs = {n: tuple(v.shape) for n, v in pt.state_dict().items()}
    ours = {n: v.shape for n, v in rf.state_dict(Model(6)).items()}
    assert ours == theirs
