"""Sequence order, batching by padded frames, padding and prefetching for the training engine.

The engine trains RETURNN-style models on RETURNN-style configs, so it groups the
sequences of an epoch into exactly the batches RETURNN's PyTorch engine would: the
same sequence order per epoch (``seq_ordering``), the same length filter
(``max_seq_length``), the same limit on the padded frames of a batch (``batch_size``:
``max(seq_len) * num_seqs`` per data key) and on its sequences (``max_seqs``), and the
same padded arrays with ``"<key>:seq_len"``. A model and a config then see the same
batches, in the same order, under verjus as under RETURNN, and their losses and
learning curves can be compared step by step.

A sequence is a dict ``{data_key: numpy array}``; an array of one or more dims has
time as its first axis, a 0-dim array (for example a class label) has none.

Each function names the RETURNN function it follows (RETURNN is not imported here):

- :func:`seq_order`: ``returnn.datasets.basic.Dataset.get_seq_order_for_epoch``,
  seeded as ``Dataset._get_random_seed_for_epoch``.
- :func:`batches`: ``returnn.torch.data.pipeline.LenFilterDataPipe`` followed by
  ``BatchingIterDataPipe``.
- :func:`shuffle_batches`: ``returnn.torch.data.pipeline.ShufflingDataPipe`` (the
  config option ``online_shuffle_batches``).
- :func:`collate`: ``returnn.torch.data.pipeline.collate_batch``.
- :class:`Prefetcher`: takes the place of the PyTorch ``DataLoader`` that RETURNN
  iterates the batches with; a thread instead of worker processes.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

__all__ = ["SEQ_ORDERINGS", "Prefetcher", "batches", "collate", "seq_order", "shuffle_batches"]

# The orderings seq_order knows, as RETURNN's config option ``seq_ordering`` writes them.
SEQ_ORDERINGS = (
    "default",
    "reverse",
    "sorted",
    "sorted_reverse",
    "random",
    "random:<n_epochs>",
    "laplace",
    "laplace:<n_buckets>",
    "laplace:.<seqs_per_bucket>",
    "laplace:<buckets>:<n_epochs>",
)


def _random_seed(epoch: int, seed: int, n_epochs: int) -> int:
    """The ``RandomState`` seed of an epoch, as RETURNN's ``Dataset._get_random_seed_for_epoch``
    computes it without ``partition_epoch`` or ``fixed_random_seed``: the epoch, counted in
    groups of ``n_epochs`` that share one order, plus ``seed`` (RETURNN's
    ``random_seed_offset``)."""
    return (epoch - 1) // n_epochs + 1 + seed


def _positive_int(text: str, ordering: str) -> int:
    """``text`` as an int >= 1; ValueError naming ``ordering`` otherwise."""
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"seq_ordering {ordering!r}: {text!r} is not a positive integer")
    return int(text)


def seq_order(lengths: np.ndarray, ordering: str, *, epoch: int, seed: int = 0) -> np.ndarray:
    """The sequence indices of one epoch in the order ``ordering`` gives, as RETURNN's
    ``Dataset.get_seq_order_for_epoch`` computes them.

    ``lengths`` holds one length per sequence (used by "sorted", "sorted_reverse" and
    "laplace"). The random orderings draw from ``numpy.random.RandomState`` seeded as
    RETURNN seeds it (``_random_seed``), so they equal RETURNN's order bit for bit for a
    dataset with ``random_seed_offset=seed`` and no ``partition_epoch``:

    - "default": as given; "reverse": last first.
    - "sorted" / "sorted_reverse": by length, shortest / longest first, ties as given.
    - "random": a random permutation, a new one each epoch. "random:<n>" keeps each
      order for ``n`` epochs (RETURNN's meaning of the number; it is no seed).
    - "laplace:<n>": a random permutation cut into ``n`` buckets (default 2), sorted by
      length alternately ascending and descending; "laplace:.<n>": buckets of about ``n``
      sequences (at least 2 buckets); an optional third field keeps the order for that
      many epochs, as with "random:<n>".

    Unlike RETURNN, an empty ``lengths`` gives an empty order (RETURNN asserts at least one
    sequence) and ``epoch`` must be >= 1 (RETURNN treats epoch 0 as 1).
    """
    lengths = np.asarray(lengths, dtype=np.float64)
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be 1-D (one per sequence), got shape {lengths.shape}")
    if epoch < 1:
        raise ValueError(f"epoch must be >= 1 (RETURNN counts epochs from 1), got {epoch}")
    num_seqs = len(lengths)
    if ordering == "default":
        return np.arange(num_seqs)
    if ordering == "reverse":
        return np.arange(num_seqs - 1, -1, -1)
    if ordering in ("sorted", "sorted_reverse"):
        return np.argsort(lengths if ordering == "sorted" else -lengths, kind="stable")
    name, has_args, args = ordering.partition(":")
    if name == "random":
        n_epochs = _positive_int(args, ordering) if has_args else 1
        return np.random.RandomState(_random_seed(epoch, seed, n_epochs)).permutation(num_seqs)
    if name == "laplace":
        buckets_arg, has_n_epochs, n_epochs_arg = args.partition(":")
        n_epochs = _positive_int(n_epochs_arg, ordering) if has_n_epochs else 1
        if not has_args:
            n_buckets = 2
        elif buckets_arg.startswith("."):
            n_buckets = max(num_seqs // _positive_int(buckets_arg[1:], ordering), 2)
        else:
            n_buckets = _positive_int(buckets_arg, ordering)
        order = np.random.RandomState(_random_seed(epoch, seed, n_epochs)).permutation(num_seqs)
        parts = []
        for i in range(n_buckets):
            part = order[i * num_seqs // n_buckets : (i + 1) * num_seqs // n_buckets]
            part_lengths = lengths[part] if i % 2 == 0 else -lengths[part]
            parts.append(part[np.argsort(part_lengths, kind="stable")])
        return np.concatenate(parts)
    raise ValueError(f"unknown seq_ordering {ordering!r}; known: {', '.join(SEQ_ORDERINGS)}")


def _seq_lengths(seq: dict[str, np.ndarray]) -> dict[str, int]:
    """The length (first axis) of each array of ``seq`` that has a time axis."""
    return {key: value.shape[0] for key, value in seq.items() if np.ndim(value) > 0}


def _check_frame_limit(name: str, value: int | dict[str, int] | None) -> None:
    """Checks a ``batch_size`` or ``max_seq_length`` argument: None, or a positive number,
    or a non-empty dict of data key to positive number."""
    if value is None:
        return
    limits = list(value.values()) if isinstance(value, dict) else [value]
    if not limits or not all(isinstance(v, int | float) and v > 0 for v in limits):
        raise ValueError(f"{name} must be None, a positive number or a dict of them, got {value!r}")


def _over(lengths: dict[str, int], limit: int | dict[str, int] | None) -> bool:
    """Whether any length exceeds its limit (an int limits every key, a dict its keys)."""
    if limit is None:
        return False
    if isinstance(limit, dict):
        return any(key in limit and n > limit[key] for key, n in lengths.items())
    return any(n > limit for n in lengths.values())


def batches(
    seqs: Iterable[dict[str, np.ndarray]],
    *,
    batch_size: int | dict[str, int] | None,
    max_seqs: int | None = None,
    max_seq_length: int | dict[str, int] | None = None,
) -> Iterator[list[dict[str, np.ndarray]]]:
    """Groups ``seqs`` in their order into batches, as RETURNN's ``LenFilterDataPipe``
    (``max_seq_length``) followed by ``BatchingIterDataPipe`` (``batch_size``, ``max_seqs``).

    A sequence with a time-axis array longer than ``max_seq_length`` (an int for every key,
    or a dict of data key to limit) is dropped. A batch is closed before the next sequence
    when it holds ``max_seqs`` sequences, or when adding it would make
    ``max(seq_len) * num_seqs`` exceed ``batch_size`` for any data key (padding included;
    an int limits every key, a dict only its keys); a sequence over ``batch_size`` on its
    own makes a batch of one. ``batch_size`` None: no frame limit; ``max_seqs`` None or -1:
    no sequence limit. Bad arguments raise ValueError here; a dict key that is no data key
    of the first sequence raises once iteration reaches it (RETURNN ignores such keys).
    """
    _check_frame_limit("batch_size", batch_size)
    _check_frame_limit("max_seq_length", max_seq_length)
    if max_seqs is None or max_seqs == -1:
        max_seqs = None
    elif not isinstance(max_seqs, int) or max_seqs < 1:
        raise ValueError(f"max_seqs must be None, -1 or a positive int, got {max_seqs!r}")
    return _batches(iter(seqs), batch_size, max_seqs, max_seq_length)


def _batches(
    seqs: Iterator[dict[str, np.ndarray]],
    batch_size: int | dict[str, int] | None,
    max_seqs: int | None,
    max_seq_length: int | dict[str, int] | None,
) -> Iterator[list[dict[str, np.ndarray]]]:
    """The generator of :func:`batches`, with checked arguments."""
    batch: list[dict[str, np.ndarray]] = []
    max_lengths: dict[str, int] = {}  # longest sequence in the batch, per data key
    for i, seq in enumerate(seqs):
        if i == 0:
            for name, limit in (("batch_size", batch_size), ("max_seq_length", max_seq_length)):
                unknown = sorted(set(limit) - set(seq)) if isinstance(limit, dict) else []
                if unknown:
                    raise ValueError(
                        f"{name} {limit!r} names {unknown}, which are no data keys;"
                        f" the data keys are {sorted(seq)}"
                    )
        lengths = _seq_lengths(seq)
        if _over(lengths, max_seq_length):
            continue
        if max_seqs is not None and len(batch) >= max_seqs:
            yield batch
            batch, max_lengths = [], {}
        joined = dict(max_lengths)
        for key, n in lengths.items():
            joined[key] = max(n, joined.get(key, 0))
        padded = {key: n * (len(batch) + 1) for key, n in joined.items()}
        if batch and _over(padded, batch_size):
            yield batch
            batch, joined = [], lengths
        batch.append(seq)
        max_lengths = joined
    if batch:
        yield batch


def shuffle_batches(
    groups: Iterable[list[dict[str, np.ndarray]]], *, buffer_size: int, seed: int
) -> Iterator[list[dict[str, np.ndarray]]]:
    """The batches of ``groups`` (:func:`batches`' output) in a random order, as RETURNN's
    ``ShufflingDataPipe`` gives them for ``online_shuffle_batches``: ``buffer_size`` batches
    at a time, each such block shuffled (``numpy.random.RandomState(seed)``). With sequences
    ordered by length in buckets (``seq_ordering`` "laplace") a batch holds sequences of
    similar length while the lengths of successive batches vary; a buffer that holds a
    whole epoch shuffles all of its batches."""
    if not isinstance(buffer_size, int) or buffer_size < 1:
        raise ValueError(f"buffer_size must be a positive int, got {buffer_size!r}")
    rng = np.random.RandomState(seed)
    groups = iter(groups)
    while block := list(itertools.islice(groups, buffer_size)):
        rng.shuffle(block)
        yield from block


def collate(batch: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One batch as padded arrays, as RETURNN's ``collate_batch`` (without torch tensors).

    Per data key: a ``[B, T_max, ...]`` array padded with zeros in the input dtype and the
    lengths ``"<key>:seq_len"`` (int32 ``[B]``) when the arrays have a time axis, else the
    stacked ``[B]`` array. ``"num_seqs"`` is ``B`` (an int32 scalar array); RETURNN's batch
    instead passes through the ``num_seqs`` its dataset wrapper puts into every sequence,
    the number of sequences of the epoch.
    """
    if not batch:
        raise ValueError("collate: the batch is empty")
    keys = list(batch[0])
    if "num_seqs" in keys or any(key.endswith(":seq_len") for key in keys):
        raise ValueError(f"collate: data keys {keys} use a reserved name (num_seqs, *:seq_len)")
    out: dict[str, np.ndarray] = {}
    for i, seq in enumerate(batch):
        if list(seq) != keys:
            raise ValueError(f"collate: sequence {i} has data keys {list(seq)}, sequence 0 {keys}")
    for key in keys:
        arrays = [np.asarray(seq[key]) for seq in batch]
        first = arrays[0]
        if any(a.ndim != first.ndim or a.shape[1:] != first.shape[1:] for a in arrays) or any(
            a.dtype != first.dtype for a in arrays
        ):
            shapes = [f"{a.shape} {a.dtype}" for a in arrays]
            raise ValueError(
                f"collate: data key {key!r} has arrays of different trailing shapes or dtypes:"
                f" {shapes}"
            )
        if first.ndim == 0:
            out[key] = np.stack(arrays)
            continue
        seq_len = np.array([a.shape[0] for a in arrays], dtype=np.int32)
        padded = np.zeros((len(arrays), int(seq_len.max()), *first.shape[1:]), dtype=first.dtype)
        for i, a in enumerate(arrays):
            padded[i, : len(a)] = a
        out[key] = padded
        out[f"{key}:seq_len"] = seq_len
    out["num_seqs"] = np.array(len(batch), dtype=np.int32)
    return out


_ITEM, _ERROR, _END = range(3)


class Prefetcher:
    """Iterates ``producer`` in a daemon thread, ``depth`` items ahead of the consumer.

    While preparing an item (reading, batching, padding) takes less time than a training
    step, the next batches are ready when the step asks for them. An exception of the
    producer is raised in the consumer where the failed item would have come, as a
    RuntimeError chained to it (``raise ... from``). :meth:`close` (also on leaving a
    ``with`` block) stops the thread: it puts with a timeout and checks a stop event, so it
    never stays blocked on a full queue, and it closes the producer when that is a generator.
    """

    _POLL_S = 0.05  # how often a blocked put looks at the stop event

    def __init__(self, producer: Iterable[Any], *, depth: int = 2) -> None:
        """Starts the thread; ``depth`` (>= 1) items are prepared ahead at most."""
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a positive int, got {depth!r}")
        self._queue: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(
            target=self._run, args=(iter(producer),), name="verjus-prefetch", daemon=True
        )
        self._thread.start()

    @property
    def thread(self) -> threading.Thread:
        """The background thread (for example to check that it ended)."""
        return self._thread

    def _put(self, entry: tuple[int, Any]) -> bool:
        """Puts ``entry`` into the queue unless stopped first; whether it was put."""
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=self._POLL_S)
                return True
            except queue.Full:
                pass
        return False

    def _run(self, producer: Iterator[Any]) -> None:
        """The thread: every item of ``producer``, then the end or the producer's exception."""
        try:
            for item in producer:
                if not self._put((_ITEM, item)):
                    return
            self._put((_END, None))
        except BaseException as exc:  # reported to the consumer, so that it never waits forever
            self._put((_ERROR, exc))
        finally:
            close = getattr(producer, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> Prefetcher:
        """The prefetcher is its own iterator."""
        return self

    def __next__(self) -> Any:
        """The next item of the producer; StopIteration at its end or after :meth:`close`."""
        if self._finished:
            raise StopIteration
        kind, value = self._queue.get()
        if kind == _ITEM:
            return value
        self._finished = True
        if kind == _ERROR:
            raise RuntimeError(f"the data producer failed: {value!r}") from value
        raise StopIteration

    def close(self, timeout: float = 5.0) -> None:
        """Stops the thread, drops the prepared items and waits up to ``timeout`` seconds for
        the thread to end (it ends once the producer returns the item it is preparing)."""
        self._finished = True
        self._stop.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout)

    def __enter__(self) -> Prefetcher:
        """Returns the prefetcher; leaving the block closes it."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Closes the prefetcher."""
        self.close()
