"""``verjus.Network``: building, inference, parameters, summary, save and load."""

import json

import numpy as np
import pytest
from conftest import NETS
from safetensors.numpy import load_file

import verjus
from verjus import nn


def linear_net(out: int = 3, inp: int = 4) -> verjus.Network:
    return verjus.Network.from_def(nn.Sequential(nn.Linear(out, name="fc"), input_shape=(inp,)))


def test_from_def_accepts_dict_path_text_and_folder(tmp_path):
    path = NETS / "fashion_mlp.json"
    text = path.read_text()
    nets = [
        verjus.Network.from_def(json.loads(text)),
        verjus.Network.from_def(path),
        verjus.Network.from_def(str(path)),
        verjus.Network.from_def(text),
    ]
    (tmp_path / "network.json").write_text(text)
    nets.append(verjus.Network.from_def(tmp_path))
    for net in nets:
        assert net.inputs == [("image", (1, 28, 28))]
        assert net.outputs == [("logits", (10,))]
        assert net.parameter_count() == 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10


def test_definition_round_trips_through_the_network():
    definition = json.loads((NETS / "fashion_cnn.json").read_text())
    net = verjus.Network.from_def(definition)
    again = verjus.Network.from_def(net.to_def())
    assert again.to_def() == net.to_def()
    assert net.to_def()["layers"] == definition["layers"]


def test_forward_computes_the_linear_map():
    net = linear_net()
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    net.load_state_dict({"fc.weight": w, "fc.bias": b})
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = net.forward(x)
    assert y.dtype == np.float32
    assert y.shape == (5, 3)
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(net(x), y)


def test_forward_converts_other_floats_and_layouts():
    net = linear_net()
    x = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    want = net.forward(x)
    np.testing.assert_allclose(net.forward(x.astype(np.float64)), want, rtol=1e-6)
    strided = np.asfortranarray(x)
    np.testing.assert_allclose(net.forward(strided), want, rtol=1e-6)
    doubled = np.repeat(x, 2, axis=0)[::2]  # a non-contiguous view
    np.testing.assert_allclose(net.forward(doubled), want, rtol=1e-6)


def test_forward_refuses_integer_arrays():
    with pytest.raises(TypeError, match="int64"):
        linear_net().forward(np.zeros((2, 4), dtype=np.int64))


def test_forward_checks_the_number_and_names_of_inputs():
    net = linear_net()
    with pytest.raises(ValueError, match="1 input"):
        net.forward(np.zeros((1, 4), np.float32), np.zeros((1, 4), np.float32))
    with pytest.raises(ValueError, match="unknown"):
        net.forward(x=np.zeros((1, 4), np.float32))


def test_batch_size_changes_between_calls():
    net = verjus.Network.from_def(NETS / "fashion_cnn.json")
    rng = np.random.default_rng(2)
    x = rng.random((5, 1, 28, 28), dtype=np.float32)
    full = net.forward(x)
    assert full.shape == (5, 10)
    np.testing.assert_allclose(net.forward(x[2:3]), full[2:3], rtol=1e-4, atol=1e-5)


def test_summary_lists_layers_shapes_and_counts():
    net = verjus.Network.from_def(NETS / "fashion_cnn.json")
    text = net.summary(print_fn=None)
    assert "conv1" in text
    assert "Conv2d" in text
    assert "(batch, 32, 28, 28)" in text
    assert "(batch, 10)" in text
    assert "320" in text  # conv1: 32 * 9 + 32
    assert "parameters: 421,642" in text
    printed = []
    net.summary(print_fn=printed.append)
    assert printed == [text]


def test_state_dict_is_a_copy_and_load_state_dict_replaces():
    net = linear_net()
    state = net.state_dict()
    assert list(state) == ["fc.weight", "fc.bias"]
    state["fc.weight"][:] = 7.0  # editing the copy does not change the network
    assert not np.all(net.state_dict()["fc.weight"] == 7.0)
    net.load_state_dict(state)
    np.testing.assert_array_equal(net.state_dict()["fc.weight"], np.full((3, 4), 7.0))
    assert list(net.parameters()) == ["fc.weight", "fc.bias"]


def test_load_state_dict_checks_everything_before_changing_anything():
    net = linear_net()
    before = net.state_dict()
    good_w = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"fc\.bias") as info:
        net.load_state_dict({"fc.weight": good_w, "fc.bias": np.ones(5, np.float32)})
    assert "3" in str(info.value)
    assert "5" in str(info.value)
    with pytest.raises(ValueError, match=r"fc\.nope"):
        net.load_state_dict({"fc.weight": good_w, "fc.bias": np.ones(3, np.float32),
                             "fc.nope": good_w})  # fmt: skip
    with pytest.raises(ValueError, match=r"fc\.bias"):
        net.load_state_dict({"fc.weight": good_w})  # strict: missing bias
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(value, before[name])
    net.load_state_dict({"fc.weight": good_w}, strict=False)
    np.testing.assert_array_equal(net.state_dict()["fc.weight"], good_w)


def test_save_and_load_a_network_folder(tmp_path):
    net = verjus.Network.from_def(NETS / "fashion_mlp.json", seed=5)
    folder = net.save(tmp_path / "saved")
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["checkpoint.json", "network.json", "weights.safetensors"]
    again = verjus.Network.load(folder)
    assert again.to_def() == net.to_def()
    x = np.random.default_rng(3).random((4, 1, 28, 28), dtype=np.float32)
    np.testing.assert_array_equal(again(x), net(x))


def test_saved_weights_are_plain_safetensors(tmp_path):
    net = linear_net()
    net.save_weights(tmp_path / "w.safetensors")
    loaded = load_file(str(tmp_path / "w.safetensors"))
    assert sorted(loaded) == ["fc.bias", "fc.weight"]
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(loaded[name], value)


def test_repr_names_inputs_outputs_and_size():
    assert repr(linear_net()) == (
        "Network(inputs=[input(4,)], outputs=[fc(3,)], parameters=15, device='cpu')"
    )
