"""CTC helpers after RETURNN's ``returnn/frontend/loss.py``: ``ctc_loss`` with
RETURNN's broadcasting of the batch dims, ``ctc_best_path`` (the Viterbi
alignment) and the durations read off an alignment
(``ctc_durations_from_path``, ``ctc_no_label_loop_blank_durations_from_path``).

The loss is the native op; the wrapper only broadcasts ``logits`` and
``targets`` to the same batch dims first, as RETURNN's backends do (e.g. one
target sequence for several hypotheses of the logits). The best path is an
argmax, which carries no gradient, so its dynamic programme runs on the host
(numpy, vectorised over the batch). The durations are composed of rf ops.

The CTC topology (``label_loop=True``) has the states ``blank, label_1, blank,
label_2, ..., label_N, blank``: each frame stays in its state, moves to the
next one, or skips a blank between two different labels. Without label loop
(``label_loop=False``, RNA-like) a label state lasts exactly one frame, and
the blank between two equal labels may be skipped too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verjus import _verjus
from verjus._verjus import Dim, Tensor
from verjus.rf._dim_args import takes_dims

__all__ = [
    "ctc_best_path",
    "ctc_durations_from_path",
    "ctc_loss",
    "ctc_no_label_loop_blank_durations_from_path",
]


def _class_dim(who: str, logits: Tensor, targets: Tensor) -> Dim:
    if logits.feature_dim is not None:
        return logits.feature_dim
    if targets.sparse_dim is not None and targets.sparse_dim in logits.dims:
        return targets.sparse_dim
    raise ValueError(
        f"{who}: logits {list(logits.dims)} need a feature_dim (or targets a sparse_dim among"
        " the logits' dims) as the class dim"
    )


def _broadcast(
    who: str, logits: Tensor, targets: Tensor, input_spatial_dim: Dim, targets_spatial_dim: Dim
) -> tuple[Tensor, Tensor, list[Dim]]:
    """``logits`` and ``targets`` over the union of their batch dims; those dims."""
    from verjus import rf

    class_dim = _class_dim(who, logits, targets)
    for d, x, what in (
        (input_spatial_dim, logits, "logits"),
        (class_dim, logits, "logits"),
        (targets_spatial_dim, targets, "targets"),
    ):
        if d not in x.dims:
            raise ValueError(f"{who}: {d} is not a dim of {what} {list(x.dims)}")
    logits_batch = [d for d in logits.dims if d not in (input_spatial_dim, class_dim)]
    targets_batch = [d for d in targets.dims if d != targets_spatial_dim]
    missing_in_logits = [d for d in targets_batch if d not in logits_batch]
    missing_in_targets = [d for d in logits_batch if d not in targets_batch]
    if missing_in_logits:
        logits = rf.expand_dims(logits, missing_in_logits)
        logits.feature_dim = class_dim
    if missing_in_targets:
        sparse_dim = targets.sparse_dim
        targets = rf.expand_dims(targets, missing_in_targets)
        targets.sparse_dim = sparse_dim
    return logits, targets, logits_batch + missing_in_logits


@takes_dims
def ctc_loss(
    *,
    logits: Tensor,
    logits_normalized: bool = False,
    targets: Tensor,
    input_spatial_dim: Dim,
    targets_spatial_dim: Dim,
    blank_index: int,
    max_approx: bool = False,
    use_native_op: bool | None = None,
    label_loop: bool = True,
    zero_infinity: bool = True,
) -> Tensor:
    """The CTC loss per batch entry (the native ``ctc_loss``; see its docs), after
    broadcasting: ``logits`` and ``targets`` may each have batch dims the other
    lacks (RETURNN's), the result is over all of them.

    A target that no alignment to its frames produces (longer than the input,
    counting a blank between repeated labels) has the loss ``inf``. With
    ``zero_infinity`` (the default) that loss and its gradient are 0 instead:
    RETURNN's value, as each of its backends asks for it
    (``torch.nn.functional.ctc_loss(..., zero_infinity=True)`` on PyTorch, its
    own op's ``zero_infinity=True`` on TensorFlow), so one impossible sequence
    does not make a batch's summed loss (and the scores of an epoch) ``inf``.
    ``zero_infinity=False`` keeps the ``inf`` (PyTorch's default), with a zero
    gradient for the entry.

    :param logits: ``{batch dims..., input_spatial_dim, classes}``
    :param logits_normalized: the logits are log-probabilities already
    :param targets: int labels ``{batch dims..., targets_spatial_dim}``
    :param input_spatial_dim: the frames
    :param targets_spatial_dim: the label positions
    :param blank_index: the blank class
    :param max_approx: Viterbi: the best alignment instead of the sum
    :param use_native_op: accepted for RETURNN; there is one op
    :param label_loop: must be True (standard CTC)
    :param zero_infinity: an impossible target's loss is 0 (True, RETURNN's) or
        ``inf`` (False); its gradient is 0 either way. As PyTorch's option, which
        zeroes only infinite losses (a NaN from NaN logits stays)
    :return: the losses over the batch dims
    """
    logits, targets, _ = _broadcast(
        "ctc_loss", logits, targets, input_spatial_dim, targets_spatial_dim
    )
    loss = _verjus.rf_ctc_loss(
        logits=logits,
        logits_normalized=logits_normalized,
        targets=targets,
        input_spatial_dim=input_spatial_dim,
        targets_spatial_dim=targets_spatial_dim,
        blank_index=blank_index,
        max_approx=max_approx,
        use_native_op=use_native_op,
        label_loop=label_loop,
    )
    if zero_infinity:
        from verjus import rf

        loss = rf.where(rf.is_infinite(loss), 0.0, loss)
    return loss


def _lengths(dim: Dim, batch_dims: Sequence[Dim], shape: Sequence[int]) -> np.ndarray:
    """The lengths of ``dim`` as an int array over ``batch_dims`` (of ``shape``)."""
    ext = dim.dyn_size_ext if dim.dimension is None else None
    if ext is None or not ext.dims:
        return np.full(shape, dim.get_dim_value(), dtype=np.int64)
    extra = [d for d in ext.dims if d not in batch_dims]
    if extra:
        raise ValueError(
            f"ctc_best_path: the lengths of {dim} are over {extra}, not batch dims {batch_dims}"
        )
    order = [d for d in batch_dims if d in ext.dims]
    raw = np.asarray(ext.copy_transpose(order).numpy(), dtype=np.int64)
    raw = raw.reshape([n if d in ext.dims else 1 for d, n in zip(batch_dims, shape, strict=True)])
    return np.broadcast_to(raw, shape)


def _viterbi(
    log_probs: np.ndarray,
    in_len: np.ndarray,
    labels: np.ndarray,
    label_len: np.ndarray,
    blank: int,
    label_loop: bool,
) -> np.ndarray:
    """The best CTC path per entry: ``log_probs`` ``[N, T, C]``, ``labels``
    ``[N, S]``; returns ``[N, T]`` class indices (blank in the padding)."""
    n, t_max, _ = log_probs.shape
    s_max = labels.shape[1]
    num_states = 2 * s_max + 1
    rows = np.arange(n)[:, None]
    # The class each state emits: blank at even states, labels[k] at 2k+1.
    emit = np.full((n, num_states), blank, dtype=np.int64)
    emit[:, 1::2] = labels
    is_label = np.zeros(num_states, dtype=bool)
    is_label[1::2] = True
    valid_state = np.arange(num_states)[None, :] <= 2 * label_len[:, None]
    can_stay = np.broadcast_to(~is_label if not label_loop else True, (n, num_states))
    can_skip = np.zeros((n, num_states), dtype=bool)
    if s_max > 1:
        differs = (
            labels[:, 1:] != labels[:, :-1] if label_loop else np.ones_like(labels[:, 1:], bool)
        )
        can_skip[:, 3::2] = differs
    neg = -np.inf
    score = np.full((n, num_states), neg)
    score[:, :2] = 0.0
    score = np.where(valid_state, score + log_probs[rows, 0, emit], neg)
    back = np.zeros((t_max, n, num_states), dtype=np.int8)  # 0 stay, 1 from s-1, 2 from s-2
    for t in range(1, t_max):
        stay = np.where(can_stay, score, neg)
        step = np.concatenate([np.full((n, 1), neg), score[:, :-1]], axis=1)
        skip = np.concatenate([np.full((n, 2), neg), score[:, :-2]], axis=1)
        skip = np.where(can_skip, skip, neg)
        cand = np.stack([stay, step, skip])  # ties: the first (stay) wins
        best = np.argmax(cand, axis=0)
        new = np.take_along_axis(cand, best[None], axis=0)[0] + log_probs[rows, t, emit]
        new = np.where(valid_state, new, neg)
        active = (t < in_len)[:, None]
        score = np.where(active, new, score)
        back[t] = np.where(active, best, 0)
    path = np.full((n, t_max), blank, dtype=np.int64)
    for i in range(n):
        last, end = int(in_len[i]) - 1, 2 * int(label_len[i])
        if last < 0:
            continue
        finals = [end] + ([end - 1] if end > 0 else [])
        state = max(finals, key=lambda s: score[i, s])
        if score[i, state] == neg:
            raise ValueError(
                f"ctc_best_path: entry {i}: no alignment of its {label_len[i]} labels to its"
                f" {in_len[i]} frames (too few frames)"
            )
        for t in range(last, -1, -1):
            path[i, t] = emit[i, state]
            state -= back[t, i, state]
    return path


@takes_dims
def ctc_best_path(
    *,
    logits: Tensor,
    logits_normalized: bool = False,
    targets: Tensor,
    input_spatial_dim: Dim,
    targets_spatial_dim: Dim,
    blank_index: int,
    label_loop: bool = True,
) -> Tensor:
    """The most likely CTC alignment (Viterbi) of ``targets`` to the frames of
    ``logits`` (see the module docs for the topologies).

    :param logits: ``{batch dims..., input_spatial_dim, classes}`` (its
        ``feature_dim``, else the targets' ``sparse_dim``, is the class dim)
    :param logits_normalized: the logits are log-probabilities already (else
        ``log_softmax`` first)
    :param targets: int labels ``{batch dims..., targets_spatial_dim}``
    :param input_spatial_dim: the frames
    :param targets_spatial_dim: the label positions
    :param blank_index: the blank class
    :param label_loop: standard CTC (True), or a label lasts one frame (False)
    :return: int32 class indices over ``{batch dims..., input_spatial_dim}``
        (sparse dim the class dim; blank in the padding frames)
    """
    from verjus import rf

    who = "ctc_best_path"
    logits, targets, batch = _broadcast(
        who, logits, targets, input_spatial_dim, targets_spatial_dim
    )
    class_dim = logits.feature_dim
    if not logits_normalized:
        logits = rf.log_softmax(logits, axis=class_dim)
    lp = np.asarray(logits.copy_transpose([*batch, input_spatial_dim, class_dim]).numpy())
    labels = np.asarray(targets.copy_transpose([*batch, targets_spatial_dim]).numpy())
    shape = list(lp.shape[: len(batch)])
    n_classes = lp.shape[-1]
    in_len = _lengths(input_spatial_dim, batch, shape).reshape(-1)
    label_len = _lengths(targets_spatial_dim, batch, shape).reshape(-1)
    lp = lp.reshape(-1, *lp.shape[len(batch) :]).astype(np.float64)
    labels = labels.reshape(-1, labels.shape[-1]).astype(np.int64)
    if not 0 <= blank_index < n_classes:
        raise ValueError(f"{who}: blank_index {blank_index} is not a class of {class_dim}")
    inside = np.arange(labels.shape[1])[None, :] < label_len[:, None]
    if ((labels < 0) | (labels >= n_classes))[inside].any():
        raise ValueError(f"{who}: a target label is not a class of {class_dim}")
    labels = np.where(inside, labels, blank_index)
    path = _viterbi(lp, in_len, labels, label_len, blank_index, label_loop)
    path = path.reshape(*shape, path.shape[-1]).astype(np.int32)
    return rf.convert_to_tensor(
        path, dims=[*batch, input_spatial_dim], dtype="int32", sparse_dim=class_dim
    )


def _num_labels(new_label: Tensor, path_spatial_dim: Dim) -> Tensor:
    from verjus import rf

    return rf.reduce_sum(rf.cast(new_label, "int32"), axis=path_spatial_dim)


@takes_dims
def ctc_durations_from_path(
    *,
    path: Tensor,
    path_spatial_dim: Dim,
    blank_index: int,
    targets_spatial_dim: Dim | None = None,
    out_spatial_dim: Dim | None = None,
    check_dims: bool = True,
    stop_on_failed_check: bool = True,
) -> tuple[Tensor, Dim]:
    """The number of frames of each state of a CTC alignment: for ``N`` labels the
    ``2 N + 1`` states ``blank, label_1, blank, ..., label_N, blank``.

    :param path: int class indices ``{batch dims..., path_spatial_dim}`` (with label
        loops: a repeated label is one label)
    :param path_spatial_dim: the frames
    :param blank_index: the blank class
    :param targets_spatial_dim: the labels' dim, if known (else a new one, ``N``
        per entry)
    :param out_spatial_dim: the states' dim, if known (else ``2 N + 1``)
    :param check_dims: check that given dims have the sizes the path implies
    :param stop_on_failed_check: a failed check raises (else it is only reported)
    :return: int32 durations ``{batch dims..., out_spatial_dim}`` and ``out_spatial_dim``
    """
    from verjus import rf

    previous = rf.shift_right(path, axis=path_spatial_dim, pad_value=blank_index)
    is_label = path != blank_index
    new_label = is_label & (path != previous) & rf.sequence_mask(path_spatial_dim)
    num_labels = _num_labels(new_label, path_spatial_dim)
    targets_spatial_dim = _labels_dim(
        "ctc_durations_from_path", num_labels, targets_spatial_dim, check_dims, stop_on_failed_check
    )
    if out_spatial_dim is None:
        out_spatial_dim = targets_spatial_dim * 2 + 1
    elif check_dims:
        _check(out_spatial_dim, num_labels * 2 + 1, "out_spatial_dim", stop_on_failed_check)
    # Labels seen up to each frame; a blank frame sits in state 2k, a label frame in 2k - 1.
    seen = rf.cumsum(rf.cast(new_label, "int32"), spatial_dim=path_spatial_dim)
    state = seen * 2 - rf.cast(is_label, "int32")
    ones = rf.ones_like(state)
    out = rf.scatter(ones, indices=state, indices_dim=path_spatial_dim, out_dim=out_spatial_dim)
    return out, out_spatial_dim


@takes_dims
def ctc_no_label_loop_blank_durations_from_path(
    *,
    path: Tensor,
    path_spatial_dim: Dim,
    blank_index: int,
    targets_spatial_dim: Dim | None = None,
    out_spatial_dim: Dim | None = None,
    check_dims: bool = True,
    stop_on_failed_check: bool = True,
) -> tuple[Tensor, Dim]:
    """The number of blank frames before, between and after the labels of an
    alignment without label loops (``ctc_best_path(..., label_loop=False)``: each
    label frame is one label): ``N + 1`` durations for ``N`` labels.

    :param path: int class indices ``{batch dims..., path_spatial_dim}``
    :param path_spatial_dim: the frames
    :param blank_index: the blank class
    :param targets_spatial_dim: the labels' dim, if known (else a new one)
    :param out_spatial_dim: the durations' dim, if known (else ``N + 1``)
    :param check_dims: check that given dims have the sizes the path implies
    :param stop_on_failed_check: a failed check raises (else it is only reported)
    :return: int32 durations ``{batch dims..., out_spatial_dim}`` and ``out_spatial_dim``
    """
    from verjus import rf

    mask = rf.sequence_mask(path_spatial_dim)
    is_label = (path != blank_index) & mask
    num_labels = _num_labels(is_label, path_spatial_dim)
    targets_spatial_dim = _labels_dim(
        "ctc_no_label_loop_blank_durations_from_path",
        num_labels,
        targets_spatial_dim,
        check_dims,
        stop_on_failed_check,
    )
    if out_spatial_dim is None:
        out_spatial_dim = targets_spatial_dim + 1
    elif check_dims:
        _check(out_spatial_dim, num_labels + 1, "out_spatial_dim", stop_on_failed_check)
    # A blank frame counts for the gap after the labels seen so far; label frames
    # count nowhere (scattered with weight 0).
    seen = rf.cumsum(rf.cast(is_label, "int32"), spatial_dim=path_spatial_dim)
    weight = rf.cast((path == blank_index) & mask, "int32")
    out = rf.scatter(weight, indices=seen, indices_dim=path_spatial_dim, out_dim=out_spatial_dim)
    return out, out_spatial_dim


def _labels_dim(
    who: str, num_labels: Tensor, given: Dim | None, check_dims: bool, stop: bool
) -> Dim:
    if given is None:
        return Dim(num_labels, name="target_spatial")
    if check_dims:
        _check(given, num_labels, f"{who}: targets_spatial_dim", stop)
    return given


def _check(dim: Dim, want: Tensor, what: str, stop: bool) -> None:
    same = dim.get_size_tensor() == want
    ok = bool(np.all(np.asarray(same.numpy())))
    if not ok:
        message = f"{what} {dim} does not have the size the path implies"
        if stop:
            raise ValueError(message)
        print(f"WARNING: {message}")


ctc_loss.extends_native = _verjus.rf_ctc_loss  # the native op this wraps (see tests/test_docs.py)
