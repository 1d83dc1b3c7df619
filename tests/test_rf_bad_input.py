"""verjus.rf on bad input: each case used to give a silently wrong result or a
message naming the wrong thing (an internal flattened index, no field)."""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf


def test_assign_reads_any_memory_order() -> None:
    b, f = rf.Dim(2, name="b"), rf.Dim(3, name="f")
    t = rf.convert_to_tensor(np.zeros((2, 3), np.float32), dims=[b, f], requires_grad=True)
    want = np.arange(6, dtype=np.float32).reshape(2, 3)
    for array in (np.asfortranarray(want), np.arange(6, dtype=np.float32).reshape(3, 2).T):
        t.assign(np.ascontiguousarray(array) * 0)
        t.assign(array)
        np.testing.assert_array_equal(t.numpy(), array)


@pytest.mark.parametrize("bad", [9, -1])
def test_a_label_outside_its_classes_is_an_error_not_a_zero_loss(bad: int) -> None:
    b, classes = rf.Dim(2, name="b"), rf.Dim(3, name="classes")
    logits = rf.convert_to_tensor(np.zeros((2, 3), np.float32), dims=[b, classes])

    def loss(labels: list[int]) -> rf.Tensor:
        target = rf.convert_to_tensor(np.array(labels), dims=[b], sparse_dim=classes)
        return rf.cross_entropy(
            estimated=logits, target=target, axis=classes, estimated_type="logits"
        )

    np.testing.assert_allclose(loss([0, 2]).numpy(), [np.log(3)] * 2, rtol=1e-6)
    outside = rf"index {bad} at \[b=1\] is outside dim classes of size 3"
    with pytest.raises(ValueError, match=outside):
        loss([0, bad])
    target = rf.convert_to_tensor(np.array([bad, 0]), dims=[b], sparse_dim=classes)
    with pytest.raises(ValueError, match=rf"one_hot: .*index {bad} at \[b=0\]"):
        rf.one_hot(target)


def test_a_per_entry_gather_names_the_bad_index_and_its_dim() -> None:
    f = rf.Dim(3, name="f")
    x = rf.convert_to_tensor(np.arange(6.0).reshape(2, 3), dims=[rf.batch_dim, f])
    picks = rf.convert_to_tensor(np.array([2, 0]), dims=[rf.batch_dim])
    np.testing.assert_array_equal(rf.gather(x, indices=picks, axis=f).numpy(), [2, 3])
    bad = rf.convert_to_tensor(np.array([1, 5]), dims=[rf.batch_dim])
    with pytest.raises(ValueError, match=r"index 5 at \[batch=1\] is outside dim f of size 3"):
        rf.gather(x, indices=bad, axis=f)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda p: rf.SGD(p, lr=float("nan")), "lr"),
        (lambda p: rf.SGD(p, lr=0.1, momentum=5.0), "momentum"),
        (lambda p: rf.Adam(p, lr=-1.0), "lr"),
        (lambda p: rf.Adam(p, lr=1e-3, eps=-1.0), "eps"),
        (lambda p: rf.Adam(p, lr=1e-3, betas=(0.9, 1.0)), "beta2"),
        (lambda p: rf.AdamW(p, lr=1e-3, weight_decay=float("inf")), "weight_decay"),
    ],
)
def test_optimizer_settings_are_checked_when_made(make, field: str) -> None:
    model = rf.Linear(rf.Dim(2, name="in"), rf.Dim(3, name="out"))
    with pytest.raises(ValueError, match=rf"{field} must"):
        make(model.parameters())


def test_only_a_single_value_has_a_truth_value() -> None:
    f = rf.Dim(3, name="f")
    x = rf.convert_to_tensor(np.array([0.0, 2.0, 0.0], np.float32), dims=[f])
    with pytest.raises(ValueError, match=r"truth value of a tensor of 3 values .* is ambiguous"):
        bool(x > 1)
    assert bool(rf.reduce_max(x, axis=f) > 1)
    assert not bool(rf.reduce_max(x, axis=f) > 2)


def test_modules_name_an_int_given_for_a_dim() -> None:
    with pytest.raises(TypeError, match=r"rf.LSTM: in_dim must be a Dim .*got int 4"):
        rf.LSTM(4, 6)
    with pytest.raises(TypeError, match=r"rf.Linear: out_dim must be a Dim"):
        rf.Linear(rf.Dim(3, name="in"), 5)


def test_loop_refuses_a_negative_max_seq_len() -> None:
    with pytest.raises(ValueError, match="max_seq_len must be >= 0, got -3"):
        rf.Loop(max_seq_len=-3)


def test_a_negative_dim_size_says_so() -> None:
    with pytest.raises(ValueError, match="Dim: the size must be >= 0, got -3"):
        rf.Dim(-3)
    with pytest.raises(TypeError, match="Dim: dimension must be an int >= 0"):
        rf.Dim("three")
