"""``verjus.engine.batching`` and ``verjus.engine.sources`` give RETURNN's batches.

The sequence order is compared with RETURNN's own ``Dataset`` (``StaticDataset``), the
batches with RETURNN's ``LenFilterDataPipe`` + ``BatchingIterDataPipe`` and the
``ReturnnDataset`` sequences with RETURNN's ``ReturnnDatasetIterDataPipe``. RETURNN's torch
pipeline needs torch: when this interpreter lacks it, those comparisons run in the
reference interpreter ``/tmp/refvenv/bin/python`` (RETURNN with torch), else they skip.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from verjus.engine.batching import Prefetcher, batches, collate, seq_order
from verjus.engine.sources import ArrayDataset, ReturnnDataset

ORDERINGS = [
    "default",
    "reverse",
    "sorted",
    "sorted_reverse",
    "random",
    "random:3",
    "laplace",
    "laplace:3",
    "laplace:.4",
    "laplace:2:2",
]
REFERENCE_PYTHON = Path("/tmp/refvenv/bin/python")

# Runs RETURNN's torch data pipeline on the request read from stdin, prints the result.
REFERENCE_SCRIPT = """
import json, sys
import numpy as np
from returnn.torch.data.pipeline import BatchingIterDataPipe, LenFilterDataPipe
from returnn.torch.data.returnn_dataset_wrapper import ReturnnDatasetIterDataPipe
from returnn.datasets.generating import Task12AXDataset

request = json.load(sys.stdin)
batching = []
for case in request["batching"]:
    seqs = [
        {"idx": np.array(i), "data": np.zeros((d, 2), "float32"), "classes": np.zeros(c, "int32")}
        for i, (d, c) in enumerate(case["lengths"])
    ]
    pipe = seqs
    if case["max_seq_length"] is not None:
        pipe = LenFilterDataPipe(pipe, max_seq_length=case["max_seq_length"])
    pipe = BatchingIterDataPipe(pipe, batch_size=case["batch_size"], max_seqs=case["max_seqs"])
    batching.append([[int(seq["idx"]) for seq in batch] for batch in pipe])
task12ax = {}
for epoch in request["task12ax_epochs"]:
    dataset = Task12AXDataset(num_seqs=request["task12ax_num_seqs"])
    pipe = ReturnnDatasetIterDataPipe(
        dataset, reset_callback=lambda: dataset.init_seq_order(epoch=epoch), shard_workers=False
    )
    pipe.reset()
    for i, seq in enumerate(pipe):
        for key in dataset.get_data_keys():
            task12ax[f"{epoch}/{i}/{key}"] = seq[key]
np.savez(request["task12ax_file"], **task12ax)
print(json.dumps(batching))
"""


def reference_python() -> str:
    """An interpreter with RETURNN and torch: this one, else the reference venv's; or skip."""
    if importlib.util.find_spec("torch") and importlib.util.find_spec("returnn"):
        return sys.executable
    if REFERENCE_PYTHON.exists():
        return str(REFERENCE_PYTHON)
    pytest.skip(f"RETURNN's torch pipeline needs torch, missing here and no {REFERENCE_PYTHON}")


def random_batching_cases(n_cases: int) -> list[dict]:
    """Random lengths of ``data`` and ``classes`` per sequence and random batching options."""
    rng = np.random.RandomState(42)
    cases = []
    for _ in range(n_cases):
        n = int(rng.randint(1, 60))
        lengths = [[int(rng.randint(0, 50)), int(rng.randint(0, 20))] for _ in range(n)]
        batch_size = [
            None,
            int(rng.randint(1, 300)),
            {"data": int(rng.randint(1, 300))},
            {"data": int(rng.randint(1, 300)), "classes": int(rng.randint(1, 100))},
        ][rng.randint(4)]
        max_seqs = [None, -1, int(rng.randint(1, 8))][rng.randint(3)]
        max_seq_length = [None, int(rng.randint(1, 50)), {"classes": int(rng.randint(1, 20))}][
            rng.randint(3)
        ]
        case = {"lengths": lengths, "batch_size": batch_size, "max_seqs": max_seqs}
        cases.append({**case, "max_seq_length": max_seq_length})
    return cases


@pytest.fixture(scope="module")
def returnn_reference(tmp_path_factory) -> dict:
    """RETURNN's batches for ``random_batching_cases`` and its Task12AX sequences."""
    cases = random_batching_cases(200)
    task12ax_file = tmp_path_factory.mktemp("returnn") / "task12ax.npz"
    request = {
        "batching": cases,
        "task12ax_epochs": [1, 3],
        "task12ax_num_seqs": 6,
        "task12ax_file": str(task12ax_file),
    }
    result = subprocess.run(
        [reference_python(), "-c", REFERENCE_SCRIPT],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    with np.load(task12ax_file) as task12ax:
        arrays = dict(task12ax)
    return {"cases": cases, "batching": json.loads(result.stdout), "task12ax": arrays}


def make_seqs(lengths: list[list[int]]) -> list[dict[str, np.ndarray]]:
    """The sequences of a batching case, as the reference script makes them."""
    return [
        {"idx": np.array(i), "data": np.zeros((d, 2), "float32"), "classes": np.zeros(c, "int32")}
        for i, (d, c) in enumerate(lengths)
    ]


# --- batches ---------------------------------------------------------------------------


def test_batches_equal_returnn_batch_for_batch(returnn_reference):
    for case, expected in zip(
        returnn_reference["cases"], returnn_reference["batching"], strict=True
    ):
        got = batches(
            make_seqs(case["lengths"]),
            batch_size=case["batch_size"],
            max_seqs=case["max_seqs"],
            max_seq_length=case["max_seq_length"],
        )
        assert [[int(seq["idx"]) for seq in batch] for batch in got] == expected, case


def test_batches_by_padded_frames():
    seqs = [{"x": np.zeros(n)} for n in (3, 4, 2, 9, 1)]
    got = [[len(seq["x"]) for seq in batch] for batch in batches(seqs, batch_size=8)]
    # 3,4 -> 4*2=8; +2 -> 4*3=12 > 8; 2 alone, +9 -> 18; 9 alone (over the limit on its own)
    assert got == [[3, 4], [2], [9], [1]]
    limited = batches(seqs, batch_size=None, max_seqs=2, max_seq_length=5)
    assert [[len(seq["x"]) for seq in batch] for batch in limited] == [[3, 4], [2, 1]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, r"batch_size .* got 0"),
        ({"batch_size": -5}, r"batch_size .* got -5"),
        ({"batch_size": {"x": 0}}, r"batch_size .* got \{'x': 0\}"),
        ({"batch_size": {}}, r"batch_size .* got \{\}"),
        ({"batch_size": 10, "max_seqs": 0}, r"max_seqs .* got 0"),
        ({"batch_size": 10, "max_seqs": -2}, r"max_seqs .* got -2"),
        ({"batch_size": 10, "max_seq_length": 0}, r"max_seq_length .* got 0"),
    ],
)
def test_batches_bad_arguments_raise_when_called(kwargs, message):
    with pytest.raises(ValueError, match=message):
        batches([{"x": np.zeros(3)}], **kwargs)


@pytest.mark.parametrize("name", ["batch_size", "max_seq_length"])
def test_batches_dict_key_that_is_no_data_key(name):
    kwargs = {"batch_size": 10, name: {"x": 5, "y": 5}}
    it = batches([{"x": np.zeros(3)}], **kwargs)
    with pytest.raises(ValueError, match=rf"{name} .* names \['y'\], which are no data keys"):
        next(it)


# --- collate ---------------------------------------------------------------------------


def test_collate_pads_with_zeros_and_gives_lengths():
    batch = [
        {"x": np.ones((2, 3), np.float16), "y": np.array([5, 6, 7], np.int64), "c": np.array(4)},
        {"x": np.full((4, 3), 2, np.float16), "y": np.array([], np.int64), "c": np.array(9)},
    ]
    out = collate(batch)
    assert set(out) == {"x", "x:seq_len", "y", "y:seq_len", "c", "num_seqs"}
    assert out["x"].shape == (2, 4, 3)
    assert out["x"].dtype == np.float16
    np.testing.assert_array_equal(out["x"][0], [[1] * 3, [1] * 3, [0] * 3, [0] * 3])
    np.testing.assert_array_equal(out["x"][1], np.full((4, 3), 2))
    np.testing.assert_array_equal(out["y"], [[5, 6, 7], [0, 0, 0]])
    assert out["y"].dtype == np.int64
    assert out["x:seq_len"].dtype == np.int32
    np.testing.assert_array_equal(out["x:seq_len"], [2, 4])
    np.testing.assert_array_equal(out["y:seq_len"], [3, 0])
    np.testing.assert_array_equal(out["c"], [4, 9])
    assert int(out["num_seqs"]) == 2


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ([], r"batch is empty"),
        (
            [{"x": np.zeros((2, 3))}, {"x": np.zeros((2, 4))}],
            r"data key 'x' has arrays of different trailing shapes or dtypes: "
            r"\['\(2, 3\) float64', '\(2, 4\) float64'\]",
        ),
        (
            [{"x": np.zeros(2, np.float32)}, {"x": np.zeros(2, np.int32)}],
            r"data key 'x' .* \['\(2,\) float32', '\(2,\) int32'\]",
        ),
        ([{"x": np.zeros(2)}, {"x": np.zeros(())}], r"data key 'x' .* \['\(2,\) float64', '\(\)"),
        ([{"x": np.zeros(2)}, {"z": np.zeros(2)}], r"sequence 1 has data keys \['z'\]"),
        ([{"num_seqs": np.zeros(2)}], r"reserved name"),
    ],
)
def test_collate_errors(batch, message):
    with pytest.raises(ValueError, match=message):
        collate(batch)


# --- seq_order -------------------------------------------------------------------------

LENGTHS = np.random.RandomState(0).randint(1, 30, size=40)


@pytest.mark.parametrize("ordering", ORDERINGS)
def test_seq_order_is_a_deterministic_permutation(ordering):
    order = seq_order(LENGTHS, ordering, epoch=1)
    assert sorted(order.tolist()) == list(range(len(LENGTHS)))
    np.testing.assert_array_equal(order, seq_order(LENGTHS, ordering, epoch=1))
    assert seq_order(LENGTHS[:0], ordering, epoch=1).tolist() == []


def test_seq_order_sorted_and_default():
    assert seq_order(LENGTHS, "default", epoch=3).tolist() == list(range(40))
    assert seq_order(LENGTHS, "reverse", epoch=3).tolist() == list(range(39, -1, -1))
    assert np.all(np.diff(LENGTHS[seq_order(LENGTHS, "sorted", epoch=1)]) >= 0)
    assert np.all(np.diff(LENGTHS[seq_order(LENGTHS, "sorted_reverse", epoch=1)]) <= 0)
    # ties keep the given order in both directions, as RETURNN's stable argsort
    assert seq_order([2, 1, 2, 1], "sorted_reverse", epoch=1).tolist() == [0, 2, 1, 3]


@pytest.mark.parametrize("ordering", ["random", "laplace:3", "laplace:.4"])
def test_seq_order_random_changes_with_epoch_and_seed(ordering):
    first = seq_order(LENGTHS, ordering, epoch=1, seed=0)
    assert first.tolist() != seq_order(LENGTHS, ordering, epoch=2, seed=0).tolist()
    assert first.tolist() != seq_order(LENGTHS, ordering, epoch=1, seed=7).tolist()


def test_seq_order_random_n_keeps_the_order_for_n_epochs():
    orders = [seq_order(LENGTHS, "random:3", epoch=e).tolist() for e in range(1, 5)]
    assert orders[0] == orders[1] == orders[2] != orders[3]


def test_seq_order_laplace_buckets_alternate_sorting():
    order = seq_order(LENGTHS, "laplace:4", epoch=2)
    for i in range(4):
        bucket = LENGTHS[order[i * 10 : (i + 1) * 10]]
        assert np.all(np.diff(bucket) >= 0 if i % 2 == 0 else np.diff(bucket) <= 0)


@pytest.mark.parametrize(
    ("ordering", "epoch", "message"),
    [
        ("shuffle", 1, r"unknown seq_ordering 'shuffle'; known: default, reverse, sorted,"),
        ("sorted:2", 1, r"unknown seq_ordering 'sorted:2'"),
        ("random:x", 1, r"seq_ordering 'random:x': 'x' is not a positive integer"),
        ("random:0", 1, r"'0' is not a positive integer"),
        ("laplace:", 1, r"seq_ordering 'laplace:': '' is not a positive integer"),
        ("laplace:.0", 1, r"'0' is not a positive integer"),
        ("random", 0, r"epoch must be >= 1"),
    ],
)
def test_seq_order_errors(ordering, epoch, message):
    with pytest.raises(ValueError, match=message):
        seq_order(LENGTHS, ordering, epoch=epoch)


def returnn_static_dataset(lengths, ordering: str, seed: int):
    """RETURNN's StaticDataset over sequences ``data`` ``[n, 1]`` filled with their index."""
    generating = pytest.importorskip("returnn.datasets.generating", reason="needs RETURNN")
    seqs = [{"data": np.full((n, 1), i, np.float32)} for i, n in enumerate(lengths)]
    return generating.StaticDataset(seqs, seq_ordering=ordering, random_seed_offset=seed)


@pytest.mark.parametrize("ordering", ORDERINGS)
@pytest.mark.parametrize("seed", [0, 5])
def test_seq_order_equals_returnn_dataset(ordering, seed):
    dataset = returnn_static_dataset(LENGTHS, ordering, seed)
    for epoch in range(1, 6):
        dataset.init_seq_order(epoch=epoch)
        expected = list(dataset.get_current_seq_order())
        assert seq_order(LENGTHS, ordering, epoch=epoch, seed=seed).tolist() == expected


# --- sources ---------------------------------------------------------------------------


def test_array_dataset_orders_like_returnn_static_dataset():
    seqs = [np.full((n, 1), i, np.float32) for i, n in enumerate(LENGTHS)]
    labels = np.arange(len(LENGTHS)) * 10
    ours = ArrayDataset({"labels": labels, "data": seqs}, seq_ordering="laplace:3", seed=2)
    assert ours.num_seqs == 40
    assert ours.data_keys == ["labels", "data"]
    np.testing.assert_array_equal(ours.seq_lengths("data"), LENGTHS)
    dataset = returnn_static_dataset(LENGTHS, "laplace:3", 2)
    for epoch in (1, 2):
        dataset.init_seq_order(epoch=epoch)
        got = list(ours.iter_epoch(epoch))
        assert [int(seq["data"][0, 0]) for seq in got] == list(dataset.get_current_seq_order())
        assert all(seq["labels"] == 10 * seq["data"][0, 0] for seq in got)


def test_array_dataset_rows_and_lengths():
    data = {"c": np.arange(3), "x": np.zeros((3, 5, 2)), "y": [np.zeros(n) for n in (4, 1, 2)]}
    ours = ArrayDataset(data, seq_ordering="sorted")
    # no "data" key: the first key with a time axis (x) orders; x ties, so y decides nothing
    assert [(seq["x"].shape, len(seq["y"])) for seq in ours.iter_epoch(1)] == [
        ((5, 2), 4),
        ((5, 2), 1),
        ((5, 2), 2),
    ]
    np.testing.assert_array_equal(ours.seq_lengths("y"), [4, 1, 2])
    labels = ArrayDataset({"c": np.arange(3)}, seq_ordering="sorted_reverse")
    assert [int(seq["c"]) for seq in labels.iter_epoch(1)] == [0, 1, 2]
    with pytest.raises(ValueError, match=r"data key 'c' has no time axis"):
        labels.seq_lengths("c")
    with pytest.raises(KeyError, match=r"no data key 'z'"):
        ours.seq_lengths("z")


def test_array_dataset_counts_must_match():
    with pytest.raises(ValueError, match=r"different numbers of sequences: \{'a': 2, 'b': 3\}"):
        ArrayDataset({"a": [np.zeros(1)] * 2, "b": np.zeros((3, 4))})


def test_returnn_dataset_equals_returnn_wrapper(returnn_reference):
    generating = pytest.importorskip("returnn.datasets.generating", reason="needs RETURNN")
    source = ReturnnDataset(generating.Task12AXDataset(num_seqs=6))
    assert source.data_keys == ["data", "classes"]
    expected = returnn_reference["task12ax"]
    for epoch in (1, 3):
        got = list(source.iter_epoch(epoch))
        assert len(got) == 6
        for i, seq in enumerate(got):
            for key in ("data", "classes"):
                np.testing.assert_array_equal(seq[key], expected[f"{epoch}/{i}/{key}"])
                assert seq[key].dtype == expected[f"{epoch}/{i}/{key}"].dtype


class FakeReturnnDataset:
    """A duck-typed RETURNN dataset that records the calls it gets."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def get_data_keys(self):
        return ["data", "classes", "extra"]

    def init_seq_order(self, epoch):
        self.calls.append(("init_seq_order", epoch))

    def is_less_than_num_seqs(self, i):
        return i < 3

    def load_seqs(self, start, end):
        self.calls.append(("load_seqs", start, end))

    def get_data(self, i, key):
        return np.full(i + 1, i) if key == "classes" else np.zeros((i + 1, 2))

    def finish_epoch(self):
        self.calls.append(("finish_epoch",))


def test_returnn_dataset_calls_and_key_filter():
    fake = FakeReturnnDataset()
    source = ReturnnDataset(fake, data_keys=["classes"])
    assert source.data_keys == ["classes"]
    seqs = list(source.iter_epoch(4))
    assert [seq["classes"].tolist() for seq in seqs] == [[0], [1, 1], [2, 2, 2]]
    assert fake.calls == [
        ("init_seq_order", 4),
        ("load_seqs", 0, 1),
        ("load_seqs", 1, 2),
        ("load_seqs", 2, 3),
        ("finish_epoch",),
    ]
    fake.calls.clear()
    it = source.iter_epoch(5)
    next(it)
    it.close()  # left early: the epoch is still finished
    assert fake.calls[-1] == ("finish_epoch",)
    with pytest.raises(ValueError, match=r"has no data keys \['nope'\]"):
        ReturnnDataset(fake, data_keys=["data", "nope"])


# --- Prefetcher ------------------------------------------------------------------------


def assert_thread_ends(prefetcher: Prefetcher) -> None:
    """The prefetch thread ends within 5 s."""
    prefetcher.thread.join(timeout=5)
    assert not prefetcher.thread.is_alive()


def test_prefetcher_yields_everything_in_order():
    seqs = ArrayDataset({"x": [np.ones(n) for n in range(1, 30)]}).iter_epoch(1)
    expected = [collate(b) for b in batches(seqs, batch_size=40)]
    seqs = ArrayDataset({"x": [np.ones(n) for n in range(1, 30)]}).iter_epoch(1)
    with Prefetcher((collate(b) for b in batches(seqs, batch_size=40)), depth=3) as prefetcher:
        got = list(prefetcher)
    assert len(got) == len(expected) > 1
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a["x"], b["x"])
    assert list(Prefetcher(range(100))) == list(range(100))
    assert_thread_ends(prefetcher)


def test_prefetcher_runs_ahead_by_depth():
    produced = []

    def producer():
        for i in itertools.count():
            produced.append(i)
            yield i

    prefetcher = Prefetcher(producer(), depth=2)
    assert next(prefetcher) == 0
    deadline = time.monotonic() + 5
    while len(produced) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    # one taken, two queued, one waiting to be put: no further
    assert len(produced) == 4
    prefetcher.close()
    assert_thread_ends(prefetcher)


def test_prefetcher_reraises_producer_error_in_place():
    def producer():
        yield from range(3)
        raise KeyError("broken sequence")

    prefetcher = Prefetcher(producer())
    assert [next(prefetcher) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(RuntimeError, match=r"data producer failed: KeyError") as info:
        next(prefetcher)
    assert isinstance(info.value.__cause__, KeyError)
    assert info.value.__cause__.args == ("broken sequence",)
    assert list(prefetcher) == []
    assert_thread_ends(prefetcher)


def test_prefetcher_close_stops_a_thread_blocked_on_a_full_queue():
    closed = threading.Event()

    def endless():
        try:
            yield from itertools.count()
        finally:
            closed.set()

    prefetcher = Prefetcher(endless(), depth=1)
    time.sleep(0.1)  # the queue is full, the thread waits to put
    prefetcher.close()
    assert_thread_ends(prefetcher)
    assert closed.is_set()  # the producer generator was closed
    assert list(prefetcher) == []


def test_prefetcher_left_early_as_context_manager():
    with Prefetcher(itertools.count(), depth=2) as prefetcher:
        for i in prefetcher:
            if i == 5:
                break
    assert_thread_ends(prefetcher)


def test_prefetcher_depth_must_be_positive():
    with pytest.raises(ValueError, match=r"depth must be a positive int, got 0"):
        Prefetcher(range(3), depth=0)
