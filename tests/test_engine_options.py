"""Engine options the examples use: ``on_epoch_end`` sees each finished epoch's
metrics row (dev scores included) and what it adds is saved with the row;
``online_shuffle_batches`` shuffles whole batches, the same way for the same
epoch; a loss over the batch dim alone (a classifier's, or a CTC loss per
sequence) is reported as its mean over all sequences."""

from __future__ import annotations

import json

import numpy as np

import verjus.rf as rf
from verjus.engine import ArrayDataset, Engine

in_dim = rf.Dim(3, name="in")
out_dim = rf.Dim(2, name="out")


class Classifier(rf.Module):
    def __init__(self) -> None:
        self.linear = rf.Linear(in_dim, out_dim)

    def __call__(self, x: rf.Tensor) -> rf.Tensor:
        return self.linear(x)


def train_step(*, model: Classifier, extern_data: rf.TensorDict, **_kwargs) -> None:
    logits = model(extern_data["data"])
    ce = rf.cross_entropy(
        estimated=logits, target=extern_data["classes"], axis=out_dim, estimated_type="logits"
    )
    ce.mark_as_loss("ce", use_normalized_loss=True)  # over [batch]: one loss per sequence


def data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int32)


def engine(**options) -> Engine:
    settings = {
        "get_model": lambda **_: Classifier(),
        "train_step": train_step,
        "extern_data": {
            "data": {"dims": [rf.batch_dim, in_dim], "dtype": "float32"},
            "classes": {"dims": [rf.batch_dim], "sparse_dim": out_dim, "dtype": "int32"},
        },
        "optimizer": {"class": "adam"},
        "learning_rate": 0.01,
        "max_seqs": 4,
        "log": lambda line: None,
        "progress": False,
    }
    return Engine(**{**settings, **options})


def test_on_epoch_end_sees_each_finished_row_and_its_additions_are_saved(tmp_path):
    seen: list[dict] = []

    def hook(row: dict) -> None:
        seen.append(json.loads(json.dumps(row)))
        row["extra"] = 10 * row["epoch"]

    e = engine(num_epochs=2, model=str(tmp_path / "run" / "model"), on_epoch_end=hook)
    x, y = data(20, 0)
    e.train(
        ArrayDataset({"data": x, "classes": y}), {"dev": ArrayDataset({"data": x, "classes": y})}
    )
    assert [row["epoch"] for row in seen] == [1, 2]
    assert all(set(row["dev"]) == {"ce"} for row in seen)  # called after the dev sets
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["extra"] for line in lines] == [10, 20]


def test_a_loss_per_sequence_is_reported_as_its_mean_over_the_sequences():
    x, y = data(10, 1)  # batches of 4, 4 and 2
    e = engine()
    model = e.init_model()
    reported = e.evaluate(ArrayDataset({"data": x, "classes": y}))["ce"]
    rf.init_forward_step_run_ctx()
    logits = model(rf.convert_to_tensor(x, dims=[rf.batch_dim, in_dim]))
    ce = rf.cross_entropy(
        estimated=logits,
        target=rf.convert_to_tensor(y, dims=[rf.batch_dim], sparse_dim=out_dim),
        axis=out_dim,
        estimated_type="logits",
    )
    np.testing.assert_allclose(reported, ce.numpy().mean(), rtol=1e-5)


def test_online_shuffle_batches_shuffles_whole_batches_the_same_way_each_run():
    x, y = data(40, 2)
    x[:, 0] = np.arange(40)  # each sequence's number, to see the batches

    def batches_seen(shuffle: int | None) -> list[tuple[int, ...]]:
        seen = []

        def recording_step(*, extern_data: rf.TensorDict, **kwargs) -> None:
            seen.append(tuple(int(v) for v in extern_data["data"].raw_tensor[:, 0]))
            train_step(extern_data=extern_data, **kwargs)

        e = engine(train_step=recording_step, online_shuffle_batches=shuffle)
        e.train(ArrayDataset({"data": x, "classes": y}))
        return seen

    plain = batches_seen(None)
    assert plain == [tuple(range(i, i + 4)) for i in range(0, 40, 4)]
    shuffled = batches_seen(10)  # the whole epoch's 10 batches
    assert shuffled != plain
    assert sorted(shuffled) == plain
    assert batches_seen(10) == shuffled
    blocks = batches_seen(5)  # the first 5 batches shuffled, then the other 5
    assert sorted(blocks[:5]) == plain[:5]
    assert sorted(blocks[5:]) == plain[5:]
