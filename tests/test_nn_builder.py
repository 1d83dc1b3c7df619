"""The Python builder (``verjus.nn``) writes the same NetworkDef as the JSON files."""

import json

import numpy as np
import pytest
from conftest import NETS

import verjus
from verjus import nn


def cnn_builder() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(32, 3, padding=1, name="conv1"),
        nn.ReLU(name="relu1"),
        nn.MaxPool2d(2, name="pool1"),
        nn.Conv2d(64, 3, padding=1, name="conv2"),
        nn.ReLU(name="relu2"),
        nn.MaxPool2d(2, name="pool2"),
        nn.Flatten(name="flatten"),
        nn.Linear(128, name="fc1"),
        nn.ReLU(name="relu3"),
        nn.Linear(10, name="fc2"),
        input_shape=(1, 28, 28),
        input_name="image",
        output_name="logits",
    )


def test_sequential_writes_the_example_cnn_definition():
    want = verjus.Network.from_def(NETS / "fashion_cnn.json").to_def()
    got = verjus.Network.from_def(cnn_builder()).to_def()
    assert got == want
    assert cnn_builder().to_def() == want


def test_builder_and_json_build_the_same_network():
    a = verjus.Network.from_def(cnn_builder(), seed=3)
    b = verjus.Network.from_def(NETS / "fashion_cnn.json", seed=3)
    assert a.parameter_count() == b.parameter_count() == 421_642
    for (na, va), (nb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert na == nb
        np.testing.assert_array_equal(va, vb)


def test_unnamed_sequential_layers_are_named_by_type_and_index():
    seq = nn.Sequential(nn.Flatten(), nn.Linear(4), nn.ReLU(), nn.Linear(2), input_shape=(2, 3))
    definition = seq.to_def()
    names = [layer["name"] for layer in definition["layers"]]
    assert names == ["flatten_1", "linear_1", "relu_1", "linear_2"]
    net = verjus.Network.from_def(seq)
    assert list(net.state_dict()) == [
        "linear_1.weight", "linear_1.bias", "linear_2.weight", "linear_2.bias",
    ]  # fmt: skip
    assert net.state_dict()["linear_1.weight"].shape == (4, 6)
    summary = net.summary(print_fn=None)
    assert "linear_2" in summary
    assert "relu_1" in summary
    # A given name is kept, and an automatic one steps around it.
    seq = nn.Sequential(nn.ReLU(), nn.ReLU(name="relu_1"), nn.ReLU(), input_shape=(2,))
    assert [layer["name"] for layer in seq.to_def()["layers"]] == ["relu_2", "relu_1", "relu_3"]


def test_definitions_saved_with_positional_names_still_load(tmp_path):
    """Before layers were named by type, Sequential named them "0", "1", ...:
    such definitions and their saved networks load as they were."""
    old = {
        "format_version": 1,
        "inputs": [{"name": "input", "shape": [2, 3]}],
        "layers": [
            {"name": "0", "type": "Flatten"},
            {"name": "1", "type": "Linear", "out_features": 4},
            {"name": "2", "type": "ReLU"},
            {"name": "3", "type": "Linear", "out_features": 2},
        ],
    }
    net = verjus.Network.from_def(old, seed=1)
    assert list(net.state_dict()) == ["1.weight", "1.bias", "3.weight", "3.bias"]
    assert net.outputs == [("3", (2,))]
    net.save(tmp_path / "old")
    loaded = verjus.Network.load(tmp_path / "old")
    assert loaded.to_def() == old
    x = np.ones((1, 2, 3), np.float32)
    np.testing.assert_array_equal(loaded(x), net(x))


def test_outputs_can_be_named_apart_from_their_layers():
    seq = nn.Sequential(nn.Linear(3), nn.ReLU(), input_shape=(2,), output_name="scores")
    definition = seq.to_def()
    assert definition["outputs"] == [{"name": "scores", "from": "relu_1"}]
    assert definition["format_version"] == 2
    assert verjus.Network.from_def(seq).outputs == [("scores", (3,))]
    assert nn.Sequential(nn.Linear(3), input_shape=(2,)).to_def()["format_version"] == 1
    x = nn.Input("x", (4,))
    h = nn.Linear(5, name="fc")(x)
    graph = nn.Graph(inputs=[x], outputs={"logits": h, "hidden": nn.ReLU()(h)})
    assert graph.to_def()["outputs"] == [
        {"name": "logits", "from": "fc"}, {"name": "hidden", "from": "relu1"},
    ]  # fmt: skip
    net = verjus.Network.from_def(graph)
    assert net.outputs == [("logits", (5,)), ("hidden", (5,))]
    assert verjus.Network.from_def(net.to_def()).outputs == net.outputs
    with pytest.raises(ValueError, match="output name"):
        nn.Sequential(nn.Linear(3), input_shape=(2,), output_name="").to_def()


def test_defaults_are_left_out_like_the_core_writes_them():
    layer = nn.Conv2d(8, (3, 3), stride=1, padding=(1, 2), bias=False).to_def("c")
    assert layer == {"name": "c", "type": "Conv2d", "out_channels": 8, "kernel": 3,
                     "padding": [1, 2], "bias": False}  # fmt: skip
    assert nn.MaxPool2d(2).to_def("p") == {"name": "p", "type": "MaxPool2d", "kernel": 2}
    assert nn.Softmax().to_def("s") == {"name": "s", "type": "Softmax"}
    assert nn.LogSoftmax(axis=0).to_def("s")["axis"] == 0


def test_nested_sequential_is_a_container_layer():
    block = nn.Sequential(nn.Linear(8, name="fc"), nn.ReLU(name="act"), name="block")
    seq = nn.Sequential(block, nn.Linear(3, name="head"), input_shape=(5,))
    net = verjus.Network.from_def(seq)
    names = ["block.fc.weight", "block.fc.bias", "head.weight", "head.bias"]
    assert list(net.state_dict()) == names
    assert net.outputs == [("head", (3,))]


def test_a_graph_thousands_of_layers_deep_builds():
    # Graph.to_def recursed once per layer and hit Python's recursion limit.
    x = nn.Input("x", (4,))
    node = x
    for _ in range(3000):
        node = nn.ReLU()(node)
    definition = nn.Graph([x], [node]).to_def()
    assert len(definition["layers"]) == 3000
    assert definition["layers"][-1]["inputs"] == ["relu2999"]
    net = verjus.Network.from_def(definition)
    value = np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(net(value), [[0.0, 2.0, 0.0, 4.0]])


def test_graph_form_writes_a_residual_dag():
    x = nn.Input("x", (6,))
    h = nn.Linear(6, name="fc")(x)
    y = nn.Add(name="residual")(nn.ReLU(name="act")(h), x)
    definition = nn.Graph(inputs=[x], outputs=[y]).to_def()
    assert definition["inputs"] == [{"name": "x", "shape": [6]}]
    assert [(d["name"], d["inputs"]) for d in definition["layers"]] == [
        ("fc", ["x"]),
        ("act", ["fc"]),
        ("residual", ["act", "x"]),
    ]
    assert definition["outputs"] == ["residual"]
    net = verjus.Network.from_def(definition)
    # With the weight and bias set to zero the block is the identity.
    zeros = {"fc.weight": np.zeros((6, 6), np.float32), "fc.bias": np.zeros(6, np.float32)}
    net.load_state_dict(zeros)
    xs = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(net(xs), xs)


def test_graph_with_two_inputs_and_two_outputs():
    a, b = nn.Input("a", (3,)), nn.Input("b", (4,))
    joined = nn.Concat(-1, name="cat")(a, b)
    out1 = nn.Linear(2, name="head1")(joined)
    out2 = nn.Linear(5, name="head2")(joined)
    net = verjus.Network.from_def(nn.Graph(inputs=[a, b], outputs=[out1, out2]))
    assert net.inputs == [("a", (3,)), ("b", (4,))]
    assert net.outputs == [("head1", (2,)), ("head2", (5,))]
    y1, y2 = net.forward(np.ones((7, 3), np.float32), np.ones((7, 4), np.float32))
    assert y1.shape == (7, 2)
    assert y2.shape == (7, 5)
    by_name = net.forward(b=np.ones((7, 4), np.float32), a=np.ones((7, 3), np.float32))
    np.testing.assert_array_equal(by_name[0], y1)


def test_calling_one_layer_twice_shares_its_parameters():
    x = nn.Input("x", (4,))
    fc = nn.Linear(4, name="fc")
    y = fc(nn.ReLU(name="act")(fc(x)))
    definition = nn.Graph(inputs=[x], outputs=[y]).to_def()
    assert definition["layers"][2] == {"name": "fc_2", "inputs": ["act"], "share": "fc",
                                       "type": "Linear", "out_features": 4}  # fmt: skip
    net = verjus.Network.from_def(definition)
    assert list(net.state_dict()) == ["fc.weight", "fc.bias"]


def test_unnamed_graph_layers_get_unique_names():
    x = nn.Input("x", (4,))
    y = nn.Linear(2)(nn.ReLU()(nn.Linear(4)(x)))
    names = [d["name"] for d in nn.Graph(inputs=[x], outputs=[y]).to_def()["layers"]]
    assert names == ["linear1", "relu1", "linear2"]


def test_builder_mistakes_are_clear_errors():
    with pytest.raises(ValueError, match="input_shape"):
        nn.Sequential(nn.ReLU()).to_def()
    with pytest.raises(ValueError, match="two layers are named 'a'"):
        nn.Sequential(nn.ReLU(name="a"), nn.ReLU(name="a"), input_shape=(2,)).to_def()
    with pytest.raises(ValueError, match=r"without '\.'"):
        nn.ReLU(name="a.b")
    with pytest.raises(TypeError, match="kernel_size"):
        nn.Conv2d(3, (1, 2, 3))
    with pytest.raises(TypeError, match="Sequential takes layers"):
        nn.Sequential("relu")
    stray = nn.Input("stray", (2,))
    with pytest.raises(ValueError, match="'stray' is used but not listed"):
        nn.Graph(inputs=[nn.Input("x", (2,))], outputs=[nn.ReLU()(stray)]).to_def()


def test_to_json_is_what_the_core_reads():
    seq = nn.Sequential(nn.Linear(3), input_shape=(2,))
    assert json.loads(seq.to_json()) == seq.to_def()
    net = verjus.Network.from_def(seq.to_json())
    assert net.outputs == [("linear_1", (3,))]
