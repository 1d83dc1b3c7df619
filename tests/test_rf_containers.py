"""verjus.rf: the Module walks (named_parameters, named_modules, children,
apply, get_deep/set_deep) in RETURNN's order, and Sequential, ModuleList,
ParameterList."""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf

F, H, C = rf.Dim(4, name="f"), rf.Dim(5, name="h"), rf.Dim(3, name="c")
H2 = rf.Dim(5, name="h2")


class Block(rf.Module):
    def __init__(self) -> None:
        self.gain = rf.Parameter([H], initial=1.0)
        self.inner = rf.Linear(H, H2)
        self.offset = rf.Parameter([H])


class Net(rf.Module):
    def __init__(self) -> None:
        self.proj = rf.Linear(F, H)
        self.block = Block()
        self.shared = self.proj  # the same module twice
        self.tied = self.block.gain  # the same parameter twice
        self.act = rf.relu  # not a module


def test_walks_follow_returnn_order_and_list_each_object_once() -> None:
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    # Module by module, breadth first; a module's own parameters before its
    # children's, so the tied parameter is named by the root's attribute.
    assert names == [
        "tied",
        "proj.weight",
        "proj.bias",
        "block.offset",
        "block.inner.weight",
        "block.inner.bias",
    ]
    assert [n for n, _ in net.block.named_parameters(recurse=False)] == ["gain", "offset"]
    assert len(list(net.parameters())) == 6
    assert [n for n, _ in net.named_modules()] == ["", "proj", "block", "block.inner"]
    assert [n for n, _ in net.named_modules(include_self=False, recurse=False)] == [
        "proj",
        "block",
    ]
    assert list(net.children()) == [net.proj, net.block]
    assert list(net.modules())[3] is net.block.inner
    assert net.has_parameters
    assert not rf.Module().has_parameters

    order: list[str] = []
    assert net.apply(lambda m: order.append(type(m).__name__)) is net
    assert order == ["Linear", "Linear", "Block", "Net"]  # children before the parent

    assert net.get_deep("block.inner.weight") is net.block.inner.weight
    assert net.get_deep("") is net
    new = rf.Linear(H, H2)
    net.set_deep("block.inner", new)
    assert net.block.inner is new
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        net.get_deep("block.missing")
    with pytest.raises(NotImplementedError, match="Net does not define __call__"):
        net(None)


def test_sequential_of_modules_and_callables() -> None:
    rf.set_random_seed(0)
    seq = rf.Sequential(rf.Linear(F, H), rf.relu, rf.Linear(H, C))
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert isinstance(seq[1], rf.Functional)
    assert len(seq) == 3
    x = rf.convert_to_tensor(
        np.random.default_rng(0).standard_normal((6, 4)), dims=[rf.batch_dim, F]
    )
    y = seq(x)
    want = rf.relu(seq[0](x))
    want = seq[2](want)
    assert y.dims == (rf.batch_dim, C)
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-6)
    outs: dict[str, rf.Tensor] = {}
    seq(x, collected_outputs=outs)
    assert list(outs) == ["0", "1", "2"]
    assert (outs["1"].numpy() >= 0).all()
    np.testing.assert_allclose(outs["2"].numpy(), y.numpy())

    # From a list or a dict (names are the keys), and rf.sequential.
    named = rf.Sequential({"enc": seq[0], "out": seq[2]})
    assert [n for n, _ in named.named_parameters()] == [
        "enc.weight",
        "enc.bias",
        "out.weight",
        "out.bias",
    ]
    from_list = rf.Sequential([seq[0], rf.relu, seq[2]])
    np.testing.assert_allclose(from_list(x).numpy(), y.numpy())
    np.testing.assert_allclose(rf.sequential(x, seq[0], rf.relu, seq[2]).numpy(), y.numpy())

    # Gradients reach the parameters inside.
    loss = rf.reduce_sum(y, axis=[rf.batch_dim, C])
    loss.backward()
    assert seq[0].weight.grad is not None
    assert np.abs(seq[0].weight.grad.numpy()).sum() > 0
    with pytest.raises(TypeError, match=r"rf\.Module or a callable"):
        rf.Sequential(seq[0], 3)


def test_module_list_append_extend_index_slice() -> None:
    layers = rf.ModuleList()
    assert len(layers) == 0
    a, b, c = rf.Linear(F, H), rf.Linear(H, H2), rf.Linear(H2, C)
    layers.append(a).extend([b, c])
    assert len(layers) == 3
    assert list(layers) == [a, b, c]
    assert (layers[0], layers[-1]) is not None
    assert layers[-1] is c
    assert [n for n, _ in layers.named_parameters()][:2] == ["0.weight", "0.bias"]
    tail = layers[1:]
    assert isinstance(tail, rf.ModuleList)
    assert list(tail) == [b, c]
    assert next(n for n, _ in tail.named_parameters()) == "0.weight"  # renumbered
    d = rf.Linear(H, H2)
    layers[1] = d
    assert list(layers) == [a, d, c]
    assert [k for k, _ in rf.ModuleList({"x": a, "y": c}).items()] == ["x", "y"]
    assert list(rf.ModuleList(layers)) == [a, d, c]
    with pytest.raises(NotImplementedError):
        layers(None)

    class Stack(rf.Module):
        def __init__(self) -> None:
            self.layers = rf.ModuleList([rf.Linear(H, H2) for _ in range(2)])

    names = [n for n, _ in Stack().named_parameters()]
    assert names == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"]


def test_parameter_list() -> None:
    p, q = rf.Parameter([F]), rf.Parameter([H])
    plist = rf.ParameterList([p])
    plist.append(q)
    assert len(plist) == 2
    assert list(plist) == [p, q]
    assert plist[1] is q
    assert [n for n, _ in plist.named_parameters()] == ["0", "1"]
    with pytest.raises(TypeError, match="expected a Parameter"):
        plist.append(rf.ones([F]))
