"""Search utilities, after RETURNN's ``rf.ctc_greedy_decode``, ``rf.top_k``
and ``rf.edit_distance``, and ``beam_search`` over a step-wise decoder (the
``rf.top_k``-based recognition loop of RETURNN's RF model recipes, which
RETURNN leaves to user code, as one function).

Indices and labels are picked on the host (NumPy: an argmax, a sort, a
Levenshtein table per entry; none of them has a gradient), over each entry's
own length of its dynamic dims; ``top_k``'s values are then gathered from the
source on the tape, so gradients flow to the chosen entries. The results are
created on the default device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_expand_dim as _expand_dim
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_where as _where
from verjus.rf._dim_args import takes_dims
from verjus.rf.array_ import gather
from verjus.rf.loop.functional import _flatten, _unflatten

__all__ = ["beam_search", "ctc_greedy_decode", "edit_distance", "top_k"]


def _host(t: Tensor, dims: Sequence[Dim]) -> np.ndarray:
    """``t``'s values with axes in the order of ``dims`` (size-1 axes where
    ``t`` lacks a dim, to broadcast)."""
    have = list(t.dims)
    arr = np.asarray(t.numpy())
    missing = [d for d in have if d not in dims]
    if missing:
        raise ValueError(f"dims {[d.name for d in missing]} are not among {[d.name for d in dims]}")
    arr = np.transpose(arr, [have.index(d) for d in dims if d in have])
    shape = [arr.shape[[d for d in dims if d in have].index(d)] if d in have else 1 for d in dims]
    return arr.reshape(shape)


def _sizes(dims: Sequence[Dim], *tensors: Tensor) -> list[int]:
    sizes = []
    for d in dims:
        t = next(t for t in tensors if d in t.dims)
        sizes.append(t.shape[list(t.dims).index(d)])
    return sizes


def _lengths(dim: Dim, batch: Sequence[Dim], shape: Sequence[int], size: int) -> np.ndarray:
    """The lengths of ``dim`` over ``batch`` (``size`` everywhere when static)."""
    if dim.dyn_size_ext is None:
        return np.full(shape, size, np.int64)
    return np.broadcast_to(_host(dim.dyn_size_ext, batch), shape).astype(np.int64)


def _new(values: np.ndarray, dims: Sequence[Dim], sparse_dim: Dim | None = None) -> Tensor:
    dtype = "float32" if values.dtype.kind == "f" else "int32"
    return _from_numpy(np.ascontiguousarray(values), list(dims), dtype, False, sparse_dim, None)


@takes_dims
def ctc_greedy_decode(
    logits: Tensor,
    *,
    in_spatial_dim: Dim,
    blank_index: int,
    out_spatial_dim: Dim | None = None,
    target_dim: Dim | None = None,
    wb_target_dim: Dim | None = None,
) -> tuple[Tensor, Dim]:
    """Greedy CTC decoding, as RETURNN: the best class per frame, repeats
    merged, blanks removed, per entry over its own frames.

    :param logits: over ``{batch dims..., in_spatial_dim, wb_target_dim}``
    :param in_spatial_dim: the frames
    :param blank_index: the blank class
    :param out_spatial_dim: not supported (a new dim is made)
    :param target_dim: the labels' ``sparse_dim`` (its size must be
        ``blank_index``: the blank comes last); by default ``wb_target_dim``
    :param wb_target_dim: the class dim with the blank; by default
        ``logits.feature_dim``
    :return: int32 labels over ``{batch dims..., out_spatial_dim}`` and the new
        dynamic ``out_spatial_dim`` (lengths over the batch dims)
    """
    wb_target_dim = wb_target_dim or logits.feature_dim
    if wb_target_dim is None:
        raise ValueError("ctc_greedy_decode: give wb_target_dim, or logits with a feature_dim")
    if out_spatial_dim is not None:
        raise ValueError(
            "ctc_greedy_decode: out_spatial_dim is not supported; a new dim is returned"
        )
    if target_dim is not None and target_dim.dimension != blank_index:
        raise ValueError(
            f"ctc_greedy_decode: target_dim {target_dim.name} must have size blank_index "
            f"{blank_index} (blank last), got {target_dim.dimension}"
        )
    for d in (in_spatial_dim, wb_target_dim):
        if d not in logits.dims:
            raise ValueError(f"ctc_greedy_decode: {d.name} is not a dim of logits")
    batch = [d for d in logits.dims if d not in (in_spatial_dim, wb_target_dim)]
    x = _host(logits, [*batch, in_spatial_dim, wb_target_dim])
    shape = list(x.shape[:-2])
    frames = _lengths(in_spatial_dim, batch, shape, x.shape[-2])
    best = np.argmax(x, axis=-1).reshape(-1, x.shape[-2])
    decoded = []
    for row, n in zip(best, frames.reshape(-1), strict=True):
        row = row[:n]
        keep = (row != blank_index) & np.concatenate([[True], row[1:] != row[:-1]])
        decoded.append(row[keep])
    width = max((len(r) for r in decoded), default=0)
    labels = np.zeros((len(decoded), width), np.int32)
    for i, r in enumerate(decoded):
        labels[i, : len(r)] = r
    lengths = np.array([len(r) for r in decoded], np.int32).reshape(shape)
    out_dim = Dim(_new(lengths, batch), name="ctc_greedy_decode")
    out = _new(labels.reshape([*shape, width]), [*batch, out_dim], target_dim or wb_target_dim)
    return out, out_dim


@takes_dims
def top_k(
    source: Tensor,
    *,
    axis: Dim | Sequence[Dim],
    k: int | None = None,
    k_dim: Dim | None = None,
    sorted: bool = True,
) -> tuple[Tensor, Tensor | list[Tensor], Dim]:
    """The ``k`` largest values over ``axis`` and their indices, as RETURNN
    (``torch.topk``): ``axis`` is replaced by ``k_dim``; other dims are batch
    dims; padding of a dynamic ``axis`` is never chosen (unless ``k`` exceeds
    an entry's length). Over several axes the values are ranked jointly and
    there is one index tensor per axis. Equal values are ranked by position.

    :param source: over ``axis`` and batch dims
    :param axis: the dim (or dims) to choose from
    :param k: how many; by default ``k_dim``'s size
    :param k_dim: the new dim; by default ``Dim(k, name="top-k-dim")``
    :param sorted: accepted for RETURNN; the values are always in descending order
    :return: ``(values, indices, k_dim)``: values over ``{batch dims...,
        k_dim}``; int32 indices, ``sparse_dim`` their axis (a list for several axes)
    """
    del sorted
    axes = [axis] if isinstance(axis, Dim) else list(axis)
    if k is None:
        if k_dim is None or k_dim.dimension is None:
            raise ValueError("top_k: give k, or a static k_dim")
        k = k_dim.dimension
    k_dim = k_dim or Dim(k, name="top-k-dim")
    if k_dim.dimension != k:
        raise ValueError(f"top_k: k_dim {k_dim.name} has size {k_dim.dimension}, not k={k}")
    for a in axes:
        if a not in source.dims:
            raise ValueError(f"top_k: axis {a.name} is not a dim of source")
    batch = [d for d in source.dims if d not in axes]
    x = _host(source, [*batch, *axes]).astype(np.float64)
    shape = list(x.shape[: len(batch)])
    sizes = list(x.shape[len(batch) :])
    for i, a in enumerate(axes):
        if a.dyn_size_ext is not None:
            n = _lengths(a, batch, shape, sizes[i]).reshape(shape + [1] * len(axes))
            pos_shape = [1] * (len(batch) + len(axes))
            pos_shape[len(batch) + i] = -1
            pos = np.arange(sizes[i]).reshape(pos_shape)
            x = np.where(pos < n, x, -np.inf)
    flat = x.reshape([*shape, -1])
    if k > flat.shape[-1]:
        names = [a.name for a in axes]
        raise ValueError(f"top_k: k={k} exceeds the {flat.shape[-1]} entries over {names}")
    order = np.argsort(-flat, axis=-1, kind="stable")[..., :k]
    indices = []
    for i in reversed(range(len(axes))):
        indices.insert(0, _new((order % sizes[i]).astype(np.int32), [*batch, k_dim], axes[i]))
        order = order // sizes[i]
    values = source
    for a, idx in zip(axes, indices, strict=True):
        values = gather(values, indices=idx, axis=a)
    return values, indices[0] if isinstance(axis, Dim) else indices, k_dim


@takes_dims
def edit_distance(
    a: Tensor, a_spatial_dim: Dim, b: Tensor, b_spatial_dim: Dim, *, dtype: str = "int32"
) -> Tensor:
    """The Levenshtein distance (insertions, deletions, substitutions, each 1)
    between each entry's sequences, over their own lengths, as RETURNN.

    :param a: labels over ``{batch dims..., a_spatial_dim}``
    :param a_spatial_dim: ``a``'s sequence dim
    :param b: labels over ``{batch dims..., b_spatial_dim}``
    :param b_spatial_dim: ``b``'s sequence dim
    :param dtype: ``"int32"`` (the only one)
    :return: int32 distances over the batch dims (``a``'s, then ``b``'s others)
    """
    if dtype != "int32":
        raise ValueError(f"edit_distance: dtype must be int32, got {dtype}")
    for t, d, name in ((a, a_spatial_dim, "a"), (b, b_spatial_dim, "b")):
        if d not in t.dims:
            raise ValueError(f"edit_distance: {d.name} is not a dim of {name}")
    batch = [d for d in a.dims if d != a_spatial_dim]
    batch += [d for d in b.dims if d != b_spatial_dim and d not in batch]
    shape = _sizes(batch, a, b)
    xa = np.broadcast_to(_host(a, [*batch, a_spatial_dim]), [*shape, *_sizes([a_spatial_dim], a)])
    xb = np.broadcast_to(_host(b, [*batch, b_spatial_dim]), [*shape, *_sizes([b_spatial_dim], b)])
    la = _lengths(a_spatial_dim, batch, shape, xa.shape[-1]).reshape(-1)
    lb = _lengths(b_spatial_dim, batch, shape, xb.shape[-1]).reshape(-1)
    xa, xb = xa.reshape(len(la), -1), xb.reshape(len(lb), -1)
    out = np.array([_levenshtein(xa[i, : la[i]], xb[i, : lb[i]]) for i in range(len(la))], np.int32)
    return _new(out.reshape(shape), batch)


def _levenshtein(s: np.ndarray, t: np.ndarray) -> int:
    row = np.arange(len(t) + 1)
    for i, c in enumerate(s, 1):
        prev, row = row, np.empty_like(row)
        row[0] = i
        for j in range(1, len(t) + 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (c != t[j - 1]))
    return int(row[-1])


# The score of a continuation that is ruled out (RETURNN's recipes use the same).
_RULED_OUT = -1.0e30


def beam_search(
    step: Callable[[Tensor, Any], tuple[Tensor, Any]],
    *,
    initial_state: Any,
    batch_dims: Sequence[Dim],
    vocab_dim: Dim,
    beam_size: int,
    bos_index: int,
    eos_index: int,
    max_seq_len: int | Tensor,
) -> tuple[Tensor, Tensor, Dim, Dim]:
    """Beam search over a step-wise decoder (label-synchronous, as RETURNN's RF
    recognition recipes): each step extends every hypothesis by every label,
    keeps the ``beam_size`` best by summed log-probability (``top_k`` over the
    beam and ``vocab_dim`` jointly) and gathers the decoder state by the
    chosen hypotheses' back-pointers.

    A hypothesis ends when it emits ``eos_index`` (its score includes the eos
    log-prob; the eos is not part of its labels) or reaches ``max_seq_len``
    labels. An ended hypothesis stays ended: its only continuation is eos at
    log-prob 0, so its score is frozen. The search stops when every hypothesis
    of every entry has ended. No length normalisation.

    :param step: ``step(labels, state) -> (log_probs, new_state)``: ``labels``
        int32 over ``{batch dims..., beam dim}`` (sparse ``vocab_dim``; ``bos_index``
        at the first step), ``log_probs`` normalised log-probabilities over
        ``{batch dims..., beam dim, vocab_dim}`` (e.g. ``rf.log_softmax`` of a
        ``TransformerDecoder``'s logits with ``spatial_dim=rf.single_step_dim``)
    :param initial_state: the decoder's state over ``batch_dims`` (a Tensor or
        a nested ``rf.State``/dict/list of them; other leaves, e.g. Dims, are
        kept). Its Tensors get the beam dim, and after each step every state
        Tensor with the beam dim is gathered by the back-pointers.
    :param batch_dims: the search's batch dims (static sizes)
    :param vocab_dim: the labels' dim
    :param beam_size: hypotheses kept per entry (the first steps keep fewer if
        there are fewer candidates)
    :param bos_index: the label fed at the first step
    :param eos_index: the label that ends a hypothesis
    :param max_seq_len: most labels per hypothesis: an int, or an int Tensor
        over (some of) ``batch_dims``
    :return: ``(labels, scores, out_spatial_dim, beam_dim)``: int32 labels over
        ``{batch dims..., beam_dim, out_spatial_dim}`` (sparse ``vocab_dim``;
        padding ``eos_index``), the hypotheses' log-probabilities over
        ``{batch dims..., beam_dim}`` (best first; on the autograd tape), the new
        dynamic ``out_spatial_dim`` (lengths over ``{batch dims..., beam_dim}``,
        without eos) and the final ``beam_dim``
    """
    who = "beam_search"
    batch = list(batch_dims)
    vocab = _check_search_args(who, batch, vocab_dim, beam_size, bos_index, eos_index)
    shape = [d.dimension for d in batch]
    if isinstance(max_seq_len, Tensor):
        max_len = np.broadcast_to(_host(max_seq_len, batch), shape).astype(np.int64)
    else:
        max_len = np.full(shape, int(max_seq_len), np.int64)
    beam = Dim(1, name="beam-initial")
    labels = _new(np.full([*shape, 1], bos_index, np.int32), [*batch, beam], vocab_dim)
    scores = _new(np.zeros([*shape, 1], np.float32), [*batch, beam])
    leaves = _flatten(initial_state)
    state = _unflatten(
        initial_state,
        [
            _expand_dim(x, beam) if isinstance(x, Tensor) and beam not in x.dims else x
            for x in leaves
        ],
    )
    ended = (max_len <= 0)[..., None]
    lengths = np.zeros([*shape, 1], np.int64)
    eos_only = np.full([vocab], _RULED_OUT, np.float32)
    eos_only[eos_index] = 0.0
    eos_only_t = _new(eos_only, [vocab_dim])
    history: list[tuple[np.ndarray, np.ndarray]] = []
    while not ended.all():
        log_probs, state = step(labels, state)
        _check_log_probs(who, log_probs, batch, beam, vocab_dim)
        if ended.any():
            ended_t = _from_numpy(
                ended.astype(np.float32), [*batch, beam], "bool", False, None, None
            )
            log_probs = _where(ended_t, eos_only_t, log_probs, allow_broadcast_all_sources=True)
        k = min(beam_size, beam.dimension * vocab)
        new_beam = Dim(k, name=f"beam-step{len(history)}")
        scores, (backrefs, labels), _ = top_k(
            scores + log_probs, axis=[beam, vocab_dim], k_dim=new_beam
        )
        src = _host(backrefs, [*batch, new_beam]).astype(np.int64)
        label = _host(labels, [*batch, new_beam]).astype(np.int64)
        was_ended = np.take_along_axis(ended, src, axis=-1)
        lengths = np.take_along_axis(lengths, src, axis=-1) + (~was_ended & (label != eos_index))
        ended = was_ended | (label == eos_index) | (lengths >= max_len[..., None])
        history.append((src, label))
        state = _unflatten(
            state,
            [
                gather(x, indices=backrefs) if isinstance(x, Tensor) and beam in x.dims else x
                for x in _flatten(state)
            ],
        )
        beam = new_beam
    out, out_dim = _backtrack(history, lengths, eos_index, batch, beam, vocab_dim)
    return out, scores, out_dim, beam


def _check_search_args(
    who: str, batch: list[Dim], vocab_dim: Dim, beam_size: int, bos: int, eos: int
) -> int:
    """Validates ``beam_search``'s arguments; returns the vocabulary size."""
    for d in batch:
        if d.dimension is None:
            raise ValueError(f"{who}: batch dim {d.name} must have a static size")
    vocab = vocab_dim.dimension
    if vocab is None:
        raise ValueError(f"{who}: vocab_dim {vocab_dim.name} must have a static size")
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"{who}: beam_size must be an int >= 1, got {beam_size!r}")
    for name, index in (("bos_index", bos), ("eos_index", eos)):
        if not 0 <= index < vocab:
            raise ValueError(
                f"{who}: {name} {index} is not a label of vocab_dim {vocab_dim.name} (size {vocab})"
            )
    return vocab


def _check_log_probs(who: str, log_probs: Tensor, batch: list[Dim], beam: Dim, vocab: Dim) -> None:
    if not isinstance(log_probs, Tensor) or vocab not in log_probs.dims:
        dims = [d.name for d in log_probs.dims] if isinstance(log_probs, Tensor) else log_probs
        raise ValueError(
            f"{who}: step must return log_probs over vocab_dim {vocab.name}, got {dims}"
        )
    extra = [d.name for d in log_probs.dims if d not in (*batch, beam, vocab)]
    if extra:
        raise ValueError(
            f"{who}: step's log_probs have dims {extra} besides the batch dims "
            f"{[d.name for d in batch]}, the beam dim and vocab_dim {vocab.name}"
        )


def _backtrack(
    history: list[tuple[np.ndarray, np.ndarray]],
    lengths: np.ndarray,
    eos_index: int,
    batch: list[Dim],
    beam: Dim,
    vocab_dim: Dim,
) -> tuple[Tensor, Dim]:
    """The final hypotheses' labels, followed back through the back-pointers."""
    shape = list(lengths.shape)
    idx = np.broadcast_to(np.arange(shape[-1]), shape)
    steps = []
    for src, label in reversed(history):
        steps.insert(0, np.take_along_axis(label, idx, axis=-1))
        idx = np.take_along_axis(src, idx, axis=-1)
    width = int(lengths.max(initial=0))
    out = np.stack(steps, axis=-1)[..., :width] if steps else np.zeros([*shape, 0], np.int64)
    out = np.where(np.arange(width) < lengths[..., None], out, eos_index).astype(np.int32)
    out_dim = Dim(_new(lengths.astype(np.int32), [*batch, beam]), name="beam_search_out")
    return _new(out, [*batch, beam, out_dim], vocab_dim), out_dim
