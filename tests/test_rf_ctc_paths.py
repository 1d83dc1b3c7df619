"""CTC alignments and their durations (verjus.rf.ctc): ``ctc_best_path`` against
brute force over all paths, the durations read off paths, and ``ctc_loss``
broadcasting logits and targets over each other's batch dims."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import verjus.rf as rf
from verjus.rf import Dim

BLANK = 2  # classes 0, 1 and the blank


def _collapse(path: tuple[int, ...], label_loop: bool) -> list[int] | None:
    """The labels a path emits, or None if it is not a valid path of the topology."""
    if label_loop:
        merged = [c for i, c in enumerate(path) if i == 0 or c != path[i - 1]]
        return [c for c in merged if c != BLANK]
    return [c for c in path if c != BLANK]


def _brute_force(log_probs: np.ndarray, labels: list[int], label_loop: bool) -> tuple[int, ...]:
    best, best_path = -np.inf, None
    for path in itertools.product(range(log_probs.shape[1]), repeat=log_probs.shape[0]):
        if _collapse(path, label_loop) != labels:
            continue
        score = sum(log_probs[t, c] for t, c in enumerate(path))
        if score > best:
            best, best_path = score, path
    assert best_path is not None
    return best_path


def _setup(seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    batch = Dim(3, name="batch")
    time = Dim(rf.convert_to_tensor(np.array([5, 4, 3], np.int32), dims=[batch]), name="time")
    target_time = Dim(rf.convert_to_tensor(np.array([2, 2, 1], np.int32), dims=[batch]), name="tt")
    classes = Dim(3, name="classes")
    logits = rng.standard_normal((3, 5, 3)).astype(np.float32)
    labels = np.array([[0, 1], [1, 1], [0, 0]], np.int32)
    return batch, time, target_time, classes, logits, labels


@pytest.mark.parametrize("label_loop", [True, False])
def test_ctc_best_path_is_the_best_alignment(label_loop: bool) -> None:
    batch, time, target_time, classes, logits, labels = _setup(0)
    x = rf.convert_to_tensor(logits, dims=[batch, time, classes], feature_dim=classes)
    targets = rf.convert_to_tensor(labels, dims=[batch, target_time], sparse_dim=classes)
    path = rf.ctc_best_path(
        logits=x,
        targets=targets,
        input_spatial_dim=time,
        targets_spatial_dim=target_time,
        blank_index=BLANK,
        label_loop=label_loop,
    )
    assert set(path.dims) == {batch, time}
    assert path.sparse_dim == classes
    got = path.copy_transpose([batch, time]).numpy()
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    for b, (t_len, s_len) in enumerate([(5, 2), (4, 2), (3, 1)]):
        want = _brute_force(log_probs[b, :t_len], list(labels[b, :s_len]), label_loop)
        assert tuple(got[b, :t_len]) == want


def test_ctc_best_path_needs_enough_frames() -> None:
    batch = Dim(1, name="batch")
    time, target_time, classes = Dim(2, name="time"), Dim(2, name="tt"), Dim(3, name="classes")
    x = rf.convert_to_tensor(
        np.zeros((1, 2, 3), np.float32), dims=[batch, time, classes], feature_dim=classes
    )
    targets = rf.convert_to_tensor(np.array([[1, 1]], np.int32), dims=[batch, target_time])
    with pytest.raises(ValueError, match=r"ctc_best_path: entry 0: no alignment"):
        rf.ctc_best_path(
            logits=x,
            targets=targets,
            input_spatial_dim=time,
            targets_spatial_dim=target_time,
            blank_index=BLANK,
        )


def _paths(rows: list[list[int]]) -> tuple[Dim, Dim, rf.Tensor]:
    batch = Dim(len(rows), name="batch")
    lengths = np.array([len(r) for r in rows], np.int32)
    time = Dim(rf.convert_to_tensor(lengths, dims=[batch]), name="time")
    raw = np.full((len(rows), lengths.max()), 1, np.int32)  # padding: a label, must not count
    for i, r in enumerate(rows):
        raw[i, : len(r)] = r
    return batch, time, rf.convert_to_tensor(raw, dims=[batch, time], sparse_dim=Dim(3, name="c"))


def test_ctc_durations_from_path() -> None:
    b = BLANK
    rows = [[b, 0, 0, b, 1, 1, 1], [0, 1, b], [b, b]]
    batch, time, path = _paths(rows)
    out, out_dim = rf.ctc_durations_from_path(path=path, path_spatial_dim=time, blank_index=b)
    np.testing.assert_array_equal(out_dim.dyn_size_ext.numpy(), [5, 5, 1])
    got = out.copy_transpose([batch, out_dim]).numpy()
    # states: blank, label 1, blank, label 2, blank
    np.testing.assert_array_equal(got[0, :5], [1, 2, 1, 3, 0])
    np.testing.assert_array_equal(got[1, :5], [0, 1, 0, 1, 1])
    np.testing.assert_array_equal(got[2, :1], [2])


def test_ctc_no_label_loop_blank_durations_from_path() -> None:
    b = BLANK
    rows = [[b, 0, 0, b, b, 1], [b, b, b], [1]]
    batch, time, path = _paths(rows)
    out, out_dim = rf.ctc_no_label_loop_blank_durations_from_path(
        path=path, path_spatial_dim=time, blank_index=b
    )
    np.testing.assert_array_equal(out_dim.dyn_size_ext.numpy(), [4, 1, 2])
    got = out.copy_transpose([batch, out_dim]).numpy()
    np.testing.assert_array_equal(got[0, :4], [1, 0, 2, 0])
    np.testing.assert_array_equal(got[1, :1], [3])
    np.testing.assert_array_equal(got[2, :2], [0, 0])


def test_ctc_durations_check_the_given_dims() -> None:
    _, time, path = _paths([[0, BLANK, 1]])
    wrong = Dim(3, name="targets")
    with pytest.raises(ValueError, match=r"targets_spatial_dim .* does not have the size"):
        rf.ctc_durations_from_path(
            path=path, path_spatial_dim=time, blank_index=BLANK, targets_spatial_dim=wrong
        )


def test_ctc_loss_broadcasts_targets_over_the_logits_batch_dims() -> None:
    batch, time, target_time, classes, logits, labels = _setup(1)
    branch = Dim(2, name="branch")
    both = np.stack([logits, logits[:, :, ::-1]], axis=1)  # [batch, branch, time, classes]
    x = rf.convert_to_tensor(both, dims=[batch, branch, time, classes], feature_dim=classes)
    targets = rf.convert_to_tensor(labels, dims=[batch, target_time], sparse_dim=classes)
    kwargs = {"input_spatial_dim": time, "targets_spatial_dim": target_time, "blank_index": BLANK}
    loss = rf.ctc_loss(logits=x, targets=targets, **kwargs)
    assert set(loss.dims) == {batch, branch}
    got = loss.copy_transpose([batch, branch]).numpy()
    for k in range(2):
        one = rf.convert_to_tensor(
            np.ascontiguousarray(both[:, k]), dims=[batch, time, classes], feature_dim=classes
        )
        want = rf.ctc_loss(logits=one, targets=targets, **kwargs).numpy()
        np.testing.assert_allclose(got[:, k], want, rtol=1e-5)


def test_linear_output_has_its_out_dim_as_feature_dim() -> None:
    a, b = Dim(3, name="a"), Dim(4, name="b")
    x = rf.convert_to_tensor(np.ones((3,), np.float32), dims=[a])
    assert rf.Linear(a, b)(x).feature_dim == b
    idx = rf.convert_to_tensor(np.array([0, 2], np.int32), dims=[Dim(2, name="n")], sparse_dim=a)
    assert rf.Embedding(a, b)(idx).feature_dim == b
