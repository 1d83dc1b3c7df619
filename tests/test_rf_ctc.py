"""``rf.ctc_loss``: values and logits gradients against
``torch.nn.functional.ctc_loss`` and RETURNN's ``rf.ctc_loss`` on its torch
backend (where installed), each entry alone against its slice of the batch
(lengths 1 and ``T``), the Viterbi approximation against an enumeration of
alignments, finite differences, a target too long for its input, bad input.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from verjus import rf

B, T, C, BLANK = 4, 6, 5, 0
IN_LENS = [T, 1, 4, T]
TARGETS = [[1, 2, 2], [3], [4, 1], [2, 2, 2]]
GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}


def padded(targets: list[list[int]]) -> np.ndarray:
    width = max(len(t) for t in targets)
    return np.array([t + [0] * (width - len(t)) for t in targets], np.int32)


class Setup:
    """Logits over ``[batch, time, classes]`` (a leaf) and targets over
    ``[batch, labels]``, both spatial dims dynamic."""

    def __init__(self, in_lens=IN_LENS, targets=TARGETS, seed: int = 0) -> None:
        self.in_lens, self.targets = in_lens, targets
        self.batch = rf.Dim(len(in_lens), name="batch")
        self.classes = rf.Dim(C, name="classes")
        as_lengths = lambda v: rf.convert_to_tensor(np.array(v, np.int32), dims=[self.batch])  # noqa: E731
        self.time = rf.Dim(as_lengths(in_lens), name="time")
        self.labels = rf.Dim(as_lengths([len(t) for t in targets]), name="labels")
        rng = np.random.default_rng(seed)
        self.xv = rng.standard_normal((len(in_lens), max(in_lens), C)).astype(np.float32) * 2
        self.rv = rng.uniform(0.5, 1.5, len(in_lens)).astype(np.float32)
        self.logits = rf.convert_to_tensor(
            self.xv,
            dims=[self.batch, self.time, self.classes],
            feature_dim=self.classes,
            requires_grad=True,
        )
        self.tg = rf.convert_to_tensor(
            padded(targets), dims=[self.batch, self.labels], sparse_dim=self.classes
        )

    def run(self, **kw) -> tuple[np.ndarray, np.ndarray]:
        """Losses ``[B]`` and the logits' gradient of ``sum(losses * r)``."""
        loss = rf.ctc_loss(
            logits=kw.pop("logits", self.logits),
            targets=self.tg,
            input_spatial_dim=self.time,
            targets_spatial_dim=self.labels,
            blank_index=BLANK,
            **kw,
        )
        r = rf.convert_to_tensor(self.rv, dims=[self.batch])
        rf.reduce_sum(loss * r, axis=[self.batch]).backward()
        return loss.numpy(), self.logits.grad.numpy()


def torch_ctc(s: Setup) -> tuple[np.ndarray, np.ndarray]:
    torch = pytest.importorskip("torch", reason="compares with torch.nn.functional.ctc_loss")
    x = torch.tensor(s.xv, requires_grad=True)
    lp = torch.log_softmax(x, dim=-1).transpose(0, 1)
    loss = torch.nn.functional.ctc_loss(
        lp,
        torch.from_numpy(padded(s.targets)).long(),
        torch.tensor(s.in_lens),
        torch.tensor([len(t) for t in s.targets]),
        blank=BLANK,
        reduction="none",
        zero_infinity=False,
    )
    finite = torch.isfinite(loss)
    (torch.where(finite, loss, 0.0) * torch.from_numpy(s.rv)).sum().backward()
    return loss.detach().numpy(), x.grad.numpy()


def test_against_torch_ctc_loss_values_and_gradients() -> None:
    s = Setup()
    mine, grad = s.run()
    theirs, their_grad = torch_ctc(s)
    np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)
    mask = np.arange(T)[None, :, None] < np.array(IN_LENS)[:, None, None]
    np.testing.assert_allclose(grad, their_grad * mask, **GRAD_TOL)


def test_target_too_long_for_its_input_is_inf_with_zero_gradient() -> None:
    """With ``zero_infinity=False`` (PyTorch's default; RETURNN's and verjus's
    is True: 0)."""
    # Entry 1 has 2 frames for "3 3" (needs 3: a blank between the repeats);
    # entry 2 has 2 frames for three labels.
    s = Setup(in_lens=[T, 2, 2], targets=[[1, 2], [3, 3], [1, 2, 3]])
    mine, grad = s.run(zero_infinity=False)
    assert np.isinf(mine[1])
    assert np.isinf(mine[2])
    assert np.isfinite(mine[0])
    assert not grad[1:].any()
    theirs, their_grad = torch_ctc(s)
    np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad[0], their_grad[0], **GRAD_TOL)


def test_each_entry_alone_equals_its_slice_of_the_batch() -> None:
    s = Setup()
    losses, grad = s.run()
    for b in range(B):
        alone = Setup(in_lens=[IN_LENS[b]], targets=[TARGETS[b]])
        alone.xv[0] = s.xv[b, : IN_LENS[b]]
        alone.logits = rf.convert_to_tensor(
            alone.xv,
            dims=[alone.batch, alone.time, alone.classes],
            feature_dim=alone.classes,
            requires_grad=True,
        )
        alone.rv[0] = s.rv[b]
        l1, g1 = alone.run()
        np.testing.assert_allclose(l1[0], losses[b], rtol=1e-6)
        np.testing.assert_allclose(g1[0], grad[b, : IN_LENS[b]], rtol=1e-5, atol=1e-7)
        assert not grad[b, IN_LENS[b] :].any()


def test_normalized_logits_skip_the_log_softmax() -> None:
    s = Setup()
    lp = rf.log_softmax(s.logits, axis=s.classes)
    mine, _ = s.run(logits=lp, logits_normalized=True)
    ref, _ = Setup().run()
    np.testing.assert_allclose(mine, ref, rtol=1e-6)


def viterbi_by_enumeration(lp: np.ndarray, target: list[int]) -> tuple[float, np.ndarray]:
    """The best alignment's score and one-hot, over every class sequence."""
    best, best_path = -np.inf, None
    for path in itertools.product(range(lp.shape[1]), repeat=lp.shape[0]):
        merged = [c for i, c in enumerate(path) if i == 0 or c != path[i - 1]]
        if [c for c in merged if c != BLANK] == target:
            score = sum(lp[t, c] for t, c in enumerate(path))
            if score > best:
                best, best_path = score, path
    onehot = np.zeros_like(lp)
    for t, c in enumerate(best_path):
        onehot[t, c] = 1.0
    return best, onehot


def test_max_approx_is_the_best_alignment() -> None:
    s = Setup(in_lens=[5, 3], targets=[[1, 1], [2]], seed=3)
    losses, grad = s.run(max_approx=True)
    for b, (n, target) in enumerate(zip(s.in_lens, s.targets, strict=True)):
        x = s.xv[b, :n].astype(np.float64)
        lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
        best, onehot = viterbi_by_enumeration(lp, target)
        np.testing.assert_allclose(losses[b], -best, rtol=1e-5)
        # Through log_softmax: d(-score)/dx = softmax * frames_used - onehot.
        expected = (np.exp(lp) - onehot) * s.rv[b]
        np.testing.assert_allclose(grad[b, :n], expected, rtol=1e-4, atol=1e-6)


def test_gradient_matches_finite_differences() -> None:
    s = Setup(in_lens=[4, 2], targets=[[1, 2], [3]], seed=5)
    _, grad = s.run()

    def total(xv: np.ndarray) -> float:
        t = Setup(in_lens=[4, 2], targets=[[1, 2], [3]], seed=5)
        logits = rf.convert_to_tensor(xv, dims=[t.batch, t.time, t.classes], feature_dim=t.classes)
        loss = rf.ctc_loss(
            logits=logits,
            targets=t.tg,
            input_spatial_dim=t.time,
            targets_spatial_dim=t.labels,
            blank_index=BLANK,
        )
        return float(np.dot(loss.numpy().astype(np.float64), t.rv))

    h = 1e-2
    for idx in [(0, 0, 1), (0, 3, 2), (1, 1, 3), (1, 0, 0)]:
        up, down = s.xv.copy(), s.xv.copy()
        up[idx] += h
        down[idx] -= h
        numeric = (total(up) - total(down)) / (2 * h)
        assert abs(numeric - grad[idx]) <= 2e-3 + 1e-2 * abs(numeric), idx


def test_against_returnn_rf_ctc_loss_on_its_torch_backend() -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf.ctc_loss runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own rf.ctc_loss is the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    s = Setup()
    mine, grad = s.run()
    batch, classes = Dim(B, name="batch"), Dim(C, name="classes")

    def lengths(v: list[int]) -> Tensor:
        return Tensor("len", [batch], dtype="int32", raw_tensor=torch.tensor(v, dtype=torch.int32))

    time = Dim(lengths(IN_LENS), name="time")
    labels = Dim(lengths([len(t) for t in TARGETS]), name="labels")
    x = torch.tensor(s.xv, requires_grad=True)
    logits = Tensor("x", [batch, time, classes], dtype="float32", raw_tensor=x)
    logits.feature_dim = classes
    targets = Tensor(
        "t",
        [batch, labels],
        dtype="int32",
        sparse_dim=classes,
        raw_tensor=torch.from_numpy(padded(TARGETS)),
    )
    loss = rrf.ctc_loss(
        logits=logits,
        targets=targets,
        input_spatial_dim=time,
        targets_spatial_dim=labels,
        blank_index=BLANK,
    )
    theirs = loss.copy_transpose([batch]).raw_tensor
    (theirs * torch.from_numpy(s.rv)).sum().backward()
    np.testing.assert_allclose(mine, theirs.detach().numpy(), rtol=1e-5, atol=1e-5)
    mask = np.arange(T)[None, :, None] < np.array(IN_LENS)[:, None, None]
    np.testing.assert_allclose(grad, x.grad.numpy() * mask, **GRAD_TOL)


def test_bad_input_is_a_clear_error() -> None:
    s = Setup()
    call = {
        "logits": s.logits,
        "targets": s.tg,
        "input_spatial_dim": s.time,
        "targets_spatial_dim": s.labels,
        "blank_index": BLANK,
    }
    blank_label = rf.convert_to_tensor(
        padded([[1, 0, 2], [3], [4, 1], [2, 2, 2]]),
        dims=[s.batch, s.labels],
        sparse_dim=s.classes,
    )
    with pytest.raises(ValueError, match=r"targets\[0, 1\] = 0"):
        rf.ctc_loss(**{**call, "targets": blank_label})
    with pytest.raises(ValueError, match="blank index 5"):
        rf.ctc_loss(**{**call, "blank_index": C})
    other = rf.Dim(B, name="other")
    wrong_batch = rf.convert_to_tensor(padded(TARGETS), dims=[other, s.labels])
    # Batch dims of only one side are broadcast (RETURNN's): here each row of the
    # targets then gets each entry's length, which reaches into the padding (0, blank).
    with pytest.raises(ValueError, match="is not a label"):
        rf.ctc_loss(**{**call, "targets": wrong_batch})
    plain = rf.convert_to_tensor(s.xv, dims=[s.batch, s.time, s.classes])
    with pytest.raises(ValueError, match="feature_dim"):
        rf.ctc_loss(**{**call, "logits": plain, "targets": wrong_batch})
    with pytest.raises(ValueError, match="label_loop"):
        rf.ctc_loss(**call, label_loop=False)
