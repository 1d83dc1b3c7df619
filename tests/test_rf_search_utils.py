"""``rf.ctc_greedy_decode``, ``rf.top_k``, ``rf.edit_distance``,
``rf.label_smoothing`` and ``rf.label_smoothed_log_prob_gradient``: hand-worked
values, each entry alone against the batch over dynamic dims, ``torch.topk``
and RETURNN's rf on its torch backend where installed, bad input.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from verjus import rf


def lengths_dim(values: list[int], batch: rf.Dim, name: str) -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(values, np.int32), dims=[batch]), name=name)


def logits_for(paths: list[list[int]], classes: int) -> np.ndarray:
    """Logits whose argmax per frame is ``paths`` (padded with class 0)."""
    t_max = max(len(p) for p in paths)
    x = np.zeros((len(paths), t_max, classes), np.float32)
    for b, p in enumerate(paths):
        for t, c in enumerate(p):
            x[b, t, c] = 1.0 + t * 0.1
    return x


def test_ctc_greedy_decode_merges_repeats_and_drops_blanks_per_entry() -> None:
    # Blank 3 (last). Entry 1's frames past its length 2 would add labels.
    paths = [[0, 0, 3, 0, 1, 1, 3, 2], [2, 2, 1, 1, 0, 0, 0, 0], [3, 3, 3, 3, 3, 3, 3, 3]]
    batch, classes = rf.Dim(3, name="batch"), rf.Dim(4, name="classes")
    time = lengths_dim([8, 2, 8], batch, "time")
    logits = rf.convert_to_tensor(
        logits_for(paths, 4), dims=[batch, time, classes], feature_dim=classes
    )
    labels, out_dim = rf.ctc_greedy_decode(logits, in_spatial_dim=time, blank_index=3)
    lens = out_dim.dyn_size_ext.copy_transpose([batch]).numpy()
    np.testing.assert_array_equal(lens, [4, 1, 0])
    got = labels.copy_transpose([batch, out_dim]).numpy()
    np.testing.assert_array_equal(got[0], [0, 0, 1, 2])
    assert got[1, 0] == 2
    assert labels.sparse_dim == classes
    target_dim = rf.Dim(3, name="labels")
    labels, _ = rf.ctc_greedy_decode(
        logits, in_spatial_dim=time, blank_index=3, target_dim=target_dim
    )
    assert labels.sparse_dim == target_dim
    with pytest.raises(ValueError, match="blank last"):
        rf.ctc_greedy_decode(logits, in_spatial_dim=time, blank_index=2, target_dim=target_dim)


def test_top_k_against_torch_topk_values_indices_and_gradients() -> None:
    torch = pytest.importorskip("torch", reason="compares with torch.topk")
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((3, 7)).astype(np.float32)
    batch, feat = rf.Dim(3, name="batch"), rf.Dim(7, name="feat")
    x = rf.convert_to_tensor(xv, dims=[batch, feat], requires_grad=True)
    values, indices, k_dim = rf.top_k(x, axis=feat, k=3)
    assert k_dim.dimension == 3
    assert indices.sparse_dim == feat
    r = rng.standard_normal((3, 3)).astype(np.float32)
    rf.reduce_sum(
        values * rf.convert_to_tensor(r, dims=[batch, k_dim]), axis=[batch, k_dim]
    ).backward()
    xt = torch.tensor(xv, requires_grad=True)
    tv, ti = torch.topk(xt, 3, dim=-1)
    (tv * torch.from_numpy(r)).sum().backward()
    np.testing.assert_allclose(values.copy_transpose([batch, k_dim]).numpy(), tv.detach().numpy())
    np.testing.assert_array_equal(indices.copy_transpose([batch, k_dim]).numpy(), ti.numpy())
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy())


def test_top_k_skips_the_padding_of_a_dynamic_axis() -> None:
    batch = rf.Dim(2, name="batch")
    time = lengths_dim([4, 2], batch, "time")
    xv = np.array([[1.0, 5.0, 3.0, 2.0], [1.0, 2.0, 9.0, 8.0]], np.float32)
    x = rf.convert_to_tensor(xv, dims=[batch, time])
    values, indices, k_dim = rf.top_k(x, axis=time, k=2)
    np.testing.assert_array_equal(indices.copy_transpose([batch, k_dim]).numpy(), [[1, 2], [1, 0]])
    np.testing.assert_allclose(
        values.copy_transpose([batch, k_dim]).numpy(), [[5.0, 3.0], [2.0, 1.0]]
    )


def test_top_k_over_two_axes_ranks_jointly() -> None:
    beam, classes = rf.Dim(2, name="beam"), rf.Dim(3, name="classes")
    xv = np.array([[0.1, 0.9, 0.3], [0.8, 0.2, 0.95]], np.float32)
    x = rf.convert_to_tensor(xv, dims=[beam, classes])
    values, (ib, ic), _k_dim = rf.top_k(x, axis=[beam, classes], k=3)
    np.testing.assert_allclose(values.numpy(), [0.95, 0.9, 0.8])
    np.testing.assert_array_equal(ib.numpy(), [1, 0, 1])
    np.testing.assert_array_equal(ic.numpy(), [2, 1, 0])
    with pytest.raises(ValueError, match="exceeds"):
        rf.top_k(x, axis=classes, k=4)


def levenshtein(a: list[int], b: list[int]) -> int:
    """By the recursion, memoised (independent of the implementation's table)."""

    @functools.cache
    def d(i: int, j: int) -> int:
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))

    return d(len(a), len(b))


def test_edit_distance_per_entry_over_dynamic_dims() -> None:
    kitten, sitting = [10, 8, 19, 19, 4, 13], [18, 8, 19, 19, 8, 13, 6]
    seqs_a = [kitten, [1, 2, 3], [], [5, 5]]
    seqs_b = [sitting, [1, 2, 3], [4], [5]]
    batch = rf.Dim(4, name="batch")

    def tensor(seqs):
        dim = lengths_dim([len(s) for s in seqs], batch, "seq")
        width = max(len(s) for s in seqs)
        arr = np.array([s + [99] * (width - len(s)) for s in seqs], np.int32)
        return rf.convert_to_tensor(arr, dims=[batch, dim]), dim

    (a, ad), (b, bd) = tensor(seqs_a), tensor(seqs_b)
    got = rf.edit_distance(a, ad, b, bd).numpy()
    expected = [levenshtein(x, y) for x, y in zip(seqs_a, seqs_b, strict=True)]
    assert expected[0] == 3
    np.testing.assert_array_equal(got, expected)


def test_label_smoothing_sparse_and_dense() -> None:
    batch, classes = rf.Dim(2, name="batch"), rf.Dim(5, name="classes")
    labels = rf.convert_to_tensor(np.array([1, 4], np.int32), dims=[batch], sparse_dim=classes)
    sm = rf.label_smoothing(labels, 0.2).copy_transpose([batch, classes]).numpy()
    expected = np.full((2, 5), 0.05, np.float32)
    expected[0, 1] = expected[1, 4] = 0.8
    np.testing.assert_allclose(sm, expected, rtol=1e-6)
    dense = rf.convert_to_tensor(np.eye(5, dtype=np.float32)[[1, 4]], dims=[batch, classes])
    out = rf.label_smoothing(dense, 0.2, axis=classes).copy_transpose([batch, classes]).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    with pytest.raises(ValueError, match="axis"):
        rf.label_smoothing(rf.convert_to_tensor(np.zeros(5, np.float32), dims=[classes]), 0.1)


def test_label_smoothed_log_prob_gradient_smooths_an_nll_gradient() -> None:
    batch, classes = rf.Dim(2, name="batch"), rf.Dim(4, name="classes")
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((2, 4)).astype(np.float32)
    x = rf.convert_to_tensor(xv, dims=[batch, classes], feature_dim=classes, requires_grad=True)
    lp = rf.log_softmax(x, axis=classes)
    smoothed = rf.label_smoothed_log_prob_gradient(lp, 0.3, exclude_labels=[0])
    np.testing.assert_allclose(smoothed.numpy(), lp.numpy())
    labels = rf.convert_to_tensor(np.array([1, 3], np.int32), dims=[batch], sparse_dim=classes)
    loss = rf.cross_entropy(
        estimated=smoothed, target=labels, axis=classes, estimated_type="log-probs"
    )
    rf.reduce_sum(loss, axis=[batch]).backward()
    # Target: 1 - 0.3 on the label, 0.3 / 2 on the other non-excluded class, 0 on 0.
    target = np.zeros((2, 4))
    target[0, [1, 2, 3]] = [0.7, 0.15, 0.15]
    target[1, [1, 2, 3]] = [0.15, 0.15, 0.7]
    p = np.exp(xv) / np.exp(xv).sum(-1, keepdims=True)
    np.testing.assert_allclose(x.grad.numpy(), p - target, rtol=1e-5, atol=1e-6)


def test_label_smoothed_log_prob_gradient_without_exclusions() -> None:
    batch, classes = rf.Dim(3, name="batch"), rf.Dim(5, name="classes")
    xv = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    x = rf.convert_to_tensor(xv, dims=[batch, classes], feature_dim=classes, requires_grad=True)
    smoothed = rf.label_smoothed_log_prob_gradient(rf.log_softmax(x, axis=classes), 0.2)
    labels = rf.convert_to_tensor(np.array([0, 2, 4], np.int32), dims=[batch], sparse_dim=classes)
    loss = rf.cross_entropy(
        estimated=smoothed, target=labels, axis=classes, estimated_type="log-probs"
    )
    rf.reduce_sum(loss * 2.0, axis=[batch]).backward()
    # The target of label_smoothing, the loss scaled by 2.
    target = np.full((3, 5), 0.05)
    target[[0, 1, 2], [0, 2, 4]] = 0.8
    p = np.exp(xv) / np.exp(xv).sum(-1, keepdims=True)
    np.testing.assert_allclose(x.grad.numpy(), 2 * (p - target), rtol=1e-5, atol=1e-6)


def test_against_returnn_rf_on_its_torch_backend() -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own rf is the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    paths = [[0, 0, 3, 0, 1, 1, 3, 2], [2, 2, 1, 1, 3, 0, 0, 0]]
    x = logits_for(paths, 4)
    batch, classes = Dim(2, name="batch"), Dim(4, name="classes")
    lens = torch.tensor([8, 5], dtype=torch.int32)
    time = Dim(Tensor("len", [batch], dtype="int32", raw_tensor=lens), name="time")
    theirs = Tensor("x", [batch, time, classes], dtype="float32", raw_tensor=torch.from_numpy(x))
    theirs.feature_dim = classes
    their_labels, their_dim = rrf.ctc_greedy_decode(theirs, in_spatial_dim=time, blank_index=3)
    vb, vc = rf.Dim(2, name="batch"), rf.Dim(4, name="classes")
    vt = lengths_dim([8, 5], vb, "time")
    mine = rf.convert_to_tensor(x, dims=[vb, vt, vc], feature_dim=vc)
    labels, out_dim = rf.ctc_greedy_decode(mine, in_spatial_dim=vt, blank_index=3)
    np.testing.assert_array_equal(
        out_dim.dyn_size_ext.copy_transpose([vb]).numpy(),
        their_dim.dyn_size_ext.copy_transpose([batch]).raw_tensor.numpy(),
    )
    got = labels.copy_transpose([vb, out_dim]).numpy()
    want = their_labels.copy_transpose([batch, their_dim]).raw_tensor.numpy()
    for b, n in enumerate(out_dim.dyn_size_ext.copy_transpose([vb]).numpy()):
        np.testing.assert_array_equal(got[b, :n], want[b, :n])

    probs = np.eye(4, dtype=np.float32)[[1, 3]]
    dense = Tensor("p", [batch, classes], dtype="float32", raw_tensor=torch.from_numpy(probs))
    want = rrf.label_smoothing(dense, 0.1, axis=classes).copy_transpose([batch, classes])
    mine = rf.label_smoothing(rf.convert_to_tensor(probs, dims=[vb, vc]), 0.1, axis=vc)
    np.testing.assert_allclose(
        mine.copy_transpose([vb, vc]).numpy(), want.raw_tensor.numpy(), rtol=1e-6
    )
