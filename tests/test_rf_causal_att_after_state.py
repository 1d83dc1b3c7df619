"""``rf.CausalSelfAttention`` and ``rf.RotaryPosCausalSelfAttention`` over a
sequence after a non-empty state (the state of an earlier chunk): the two chunks
one after the other equal the joined sequence at once (RETURNN's
``test_causal_self_att_after_concat_state``), and values and gradients equal
RETURNN's own on its torch backend (the same weights, dynamic chunks with
different lengths per sequence).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_rf_conformer import returnn_latest_behavior

from verjus import rf

TOL = {"rtol": 1e-5, "atol": 1e-5}
GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}
LENS1, LENS2 = [3, 1, 4], [2, 5, 3]
# RETURNN's outputs at padded frames are NaN (its causal attention over padded queries),
# which makes its gradients NaN: its second chunk is unpadded.
FULL = [4, 4, 4]
IN, OUT = 8, 6
KINDS = ["CausalSelfAttention", "RotaryPosCausalSelfAttention"]


def build(m: Any, dim_cls: type, kind: str) -> Any:
    return getattr(m, kind)(
        dim_cls(IN, name="in"),
        dim_cls(OUT, name="proj"),
        key_dim_total=dim_cls(8, name="k"),
        value_dim_total=dim_cls(8, name="v"),
        num_heads=2,
        att_dropout=0.0,
    )


def lengths_dim(lens: list[int], name: str) -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name=name)


def values(seed: int, lens: list[int], feat: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((3, max(lens), feat)).astype(np.float32)


def valid(lens: list[int]) -> np.ndarray:
    return np.arange(max(lens))[None, :] < np.array(lens)[:, None]


@pytest.mark.parametrize("kind", KINDS)
def test_two_chunks_equal_the_joined_sequence(kind: str) -> None:
    rf.set_random_seed(1)
    att = build(rf, rf.Dim, kind)
    t1, t2 = lengths_dim(LENS1, "t1"), lengths_dim(LENS2, "t2")
    x1 = rf.convert_to_tensor(values(2, LENS1, IN), dims=[rf.batch_dim, t1, att.in_dim])
    x2 = rf.convert_to_tensor(values(3, LENS2, IN), dims=[rf.batch_dim, t2, att.in_dim])
    x, time = rf.concat((x1, t1), (x2, t2))
    whole, _ = att(x, axis=time)
    y1, state = att(x1, axis=t1)
    y2, state2 = att(x2, axis=t2, state=state)
    chunks, _ = rf.concat((y1, t1), (y2, t2), out_dim=time)
    order = [rf.batch_dim, time, att.out_dim]
    mask = valid([a + b for a, b in zip(LENS1, LENS2, strict=True)])
    got, want = chunks.copy_transpose(order).numpy(), whole.copy_transpose(order).numpy()
    np.testing.assert_allclose(got[mask], want[mask], **TOL)
    # the new state holds the keys of both chunks, per sequence
    assert list(state2.accum_axis.dyn_size_ext.numpy()) == [5, 6, 7]
    # and steps after it go on as after the joined sequence
    step = rf.convert_to_tensor(values(4, [1], IN)[:, 0], dims=[rf.batch_dim, att.in_dim])
    y_after_chunks, _ = att(step, axis=rf.single_step_dim, state=state2)
    _, whole_state = att(x, axis=time)
    y_after_whole, _ = att(step, axis=rf.single_step_dim, state=whole_state)
    np.testing.assert_allclose(y_after_chunks.numpy(), y_after_whole.numpy(), **TOL)


@pytest.mark.parametrize("kind", KINDS)
def test_against_returnn_on_its_torch_backend(kind: str) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own attention modules are the reference")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    with returnn_latest_behavior():
        _compare_with_returnn(torch, rrf, Dim, Tensor, kind)


def _compare_with_returnn(torch: Any, rrf: Any, Dim: Any, Tensor: Any, kind: str) -> None:  # noqa: N803
    theirs, mine = build(rrf, Dim, kind), build(rf, rf.Dim, kind)
    for name, p in theirs.named_parameters():
        dict(mine.named_parameters())[name].assign(p.raw_tensor.detach().numpy())
    x1v, x2v = values(5, LENS1, IN), values(6, FULL, IN)
    rv = values(7, FULL, OUT)

    tb = Dim(3, name="b")

    def t_dim(lens: list[int], name: str) -> Dim:
        raw = torch.tensor(lens, dtype=torch.int32)
        return Dim(Tensor(name, [tb], dtype="int32", raw_tensor=raw), name=name)

    def t_tensor(a: np.ndarray, dims: list) -> Tensor:
        return Tensor("x", dims, dtype="float32", raw_tensor=torch.tensor(a, requires_grad=True))

    tt1, tt2 = t_dim(LENS1, "t1"), t_dim(FULL, "t2")
    tx1, tx2 = t_tensor(x1v, [tb, tt1, theirs.in_dim]), t_tensor(x2v, [tb, tt2, theirs.in_dim])
    _, t_state = theirs(tx1, axis=tt1)
    ty, _ = theirs(tx2, axis=tt2, state=t_state)
    ty = ty.copy_transpose([tb, tt2, theirs.out_dim]).raw_tensor
    (ty * torch.from_numpy(rv)).sum().backward()

    mt1, mt2 = lengths_dim(LENS1, "t1"), lengths_dim(FULL, "t2")
    mx1 = rf.convert_to_tensor(x1v, dims=[rf.batch_dim, mt1, mine.in_dim], requires_grad=True)
    mx2 = rf.convert_to_tensor(x2v, dims=[rf.batch_dim, mt2, mine.in_dim], requires_grad=True)
    _, m_state = mine(mx1, axis=mt1)
    my, _ = mine(mx2, axis=mt2, state=m_state)
    order = [rf.batch_dim, mt2, mine.out_dim]
    rf.reduce_sum(my * rf.convert_to_tensor(rv, dims=order), axis=order).backward()

    np.testing.assert_allclose(my.copy_transpose(order).numpy(), ty.detach().numpy(), **TOL)
    for name, p in theirs.named_parameters():
        ours = dict(mine.named_parameters())[name].grad.numpy()
        np.testing.assert_allclose(ours, p.raw_tensor.grad.numpy(), **GRAD_TOL, err_msg=name)
    want = tx1.raw_tensor.grad.numpy()[valid(LENS1)]
    np.testing.assert_allclose(mx1.grad.numpy()[valid(LENS1)], want, **GRAD_TOL)
    np.testing.assert_allclose(mx2.grad.numpy(), tx2.raw_tensor.grad.numpy(), **GRAD_TOL)
