"""``verjus.engine.Engine`` without RETURNN: training, checkpoints, resumption,
metrics, forward, and its errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

import verjus.rf as rf
from verjus.engine import ArrayDataset, Engine

time_dim = rf.Dim(None, name="time")
in_dim = rf.Dim(3, name="in")
out_dim = rf.Dim(2, name="out")
EXTERN = {
    "data": {"dims": [rf.batch_dim, time_dim, in_dim], "dtype": "float32"},
    "classes": {
        "dims": [rf.batch_dim, time_dim],
        "sparse_dim": out_dim,
        "dtype": "int32",
        "available_for_inference": False,
    },
}


class Tagger(rf.Module):
    def __init__(self) -> None:
        hidden = rf.Dim(8, name="hidden")
        self.conv = rf.Conv1d(in_dim, hidden, 3, padding="same")
        self.out = rf.Linear(hidden, out_dim)

    def __call__(self, x: rf.Tensor) -> rf.Tensor:
        h, _ = self.conv(x, in_spatial_dim=time_dim)
        h = rf.dropout(rf.relu(h), 0.1, axis=h.feature_dim)
        return self.out(h)


def get_model(**_kwargs) -> Tagger:
    return Tagger()


def train_step(*, model: Tagger, extern_data: rf.TensorDict, **_kwargs) -> None:
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    ce = rf.cross_entropy(estimated=logits, target=targets, axis=out_dim, estimated_type="logits")
    ce.mark_as_loss("ce")
    (rf.reduce_argmax(logits, axis=out_dim) != targets).mark_as_loss("fer", as_error=True)


def forward_step(*, model: Tagger, extern_data: rf.TensorDict) -> None:
    logits = model(extern_data["data"])
    logits.mark_as_default_output(shape=(rf.batch_dim, time_dim, out_dim))


def data(n: int, seed: int) -> ArrayDataset:
    """Sequences of random length whose label is whether the first feature is positive."""
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal((int(rng.integers(2, 12)), 3)).astype(np.float32) for _ in range(n)]
    ys = [(x[:, 0] > 0).astype(np.int32) for x in xs]
    return ArrayDataset({"data": xs, "classes": ys}, seq_ordering="random")


def engine(tmp_path, epochs: int = 3, **options) -> Engine:
    settings = {
        "get_model": get_model,
        "train_step": train_step,
        "forward_step": forward_step,
        "extern_data": EXTERN,
        "optimizer": {"class": "adam"},
        "learning_rate": 0.01,
        "batch_size": 60,
        "max_seqs": 8,
        "num_epochs": epochs,
        "model": str(tmp_path / "run" / "model"),
        "log": lambda line: None,
        "progress": False,
    }
    settings.update(options)
    return Engine(**settings)


def params(path) -> dict[str, np.ndarray]:
    model = Tagger()
    rf.load_state(model, path)
    return rf.state_dict(model)


def test_trains_scores_and_writes_the_run_folder(tmp_path):
    e = engine(tmp_path)
    e.train(data(120, 0), {"dev": data(40, 1)})
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    assert rows[-1]["dev"]["fer"] < 0.2
    assert rows[-1]["train"]["ce"] < rows[0]["train"]["ce"]
    assert rows[0]["errors"] == ["fer"]
    for epoch in (1, 2, 3):
        for suffix in (".safetensors", ".opt.npz", ".meta.json"):
            assert (tmp_path / "run" / f"model.{epoch:03d}{suffix}").is_file()
    assert (tmp_path / "run" / "curves.png").stat().st_size > 1000


def test_resumption_ends_at_the_weights_of_an_uninterrupted_run(tmp_path):
    whole = engine(tmp_path / "a", epochs=3)
    whole.train(data(60, 0), {"dev": data(20, 1)})
    first = engine(tmp_path / "b", epochs=2)
    first.train(data(60, 0), {"dev": data(20, 1)})
    resumed = engine(tmp_path / "b", epochs=3)
    resumed.train(data(60, 0), {"dev": data(20, 1)})
    assert resumed.global_train_step == whole.global_train_step
    a = params(tmp_path / "a" / "run" / "model.003.safetensors")
    b = params(tmp_path / "b" / "run" / "model.003.safetensors")
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    rows = (tmp_path / "b" / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["epoch"] for r in rows] == [1, 2, 3]


def test_a_finished_run_trains_no_more(tmp_path):
    lines: list[str] = []
    engine(tmp_path, epochs=1).train(data(30, 0))
    engine(tmp_path, epochs=1, log=lines.append).train(data(30, 0))
    assert lines[-1] == "Already trained until final epoch 1, nothing to do."


def test_gradient_accumulation_and_clipping_and_schedules_run(tmp_path):
    lrs: list[float] = []

    def dynamic(*, learning_rate, global_train_step, **_kwargs):
        lrs.append(learning_rate)
        return learning_rate / (1 + global_train_step)

    e = engine(
        tmp_path,
        epochs=2,
        optimizer={"class": "nadam", "epsilon": 1e-8, "weight_decay": 0.01},
        learning_rates=[0.02],
        dynamic_learning_rate=dynamic,
        accum_grad_multiple_step=2,
        gradient_clip=0.5,
        gradient_clip_global_norm=1.0,
    )
    e.train(data(40, 0))
    assert lrs[0] == 0.02  # the list for epoch 1,
    assert lrs[-1] == 0.01  # then learning_rate
    assert len(e.opt.parts) == 2  # weight decay: the biases in a group of their own


def test_forward_writes_each_sequence_without_padding(tmp_path):
    e = engine(tmp_path, epochs=1)
    e.train(data(20, 0))
    source = data(5, 3)
    out = e.forward(source, output=tmp_path / "out.npz")
    lengths = sorted(len(s["data"]) for s in source.iter_epoch(1))
    assert sorted(a.shape[0] for a in out["output"]) == lengths
    with np.load(tmp_path / "out.npz") as saved:
        assert len(saved.files) == 5
        assert all(saved[k].shape[1] == 2 for k in saved.files)


def test_bad_settings_are_named(tmp_path):
    with pytest.raises(ValueError, match="unknown class 'adamax'"):
        engine(tmp_path, optimizer={"class": "adamax"}).init_model()
    with pytest.raises(ValueError, match=r"does not support the options \['amsgrad'\]"):
        engine(tmp_path, optimizer={"class": "adam", "amsgrad": True}).init_model()
    with pytest.raises(ValueError, match="accum_grad_multiple_step must be >= 1"):
        engine(tmp_path, accum_grad_multiple_step=0)
    with pytest.raises(ValueError, match="first dim must be the batch dim"):
        engine(tmp_path, extern_data={"data": {"dims": [time_dim], "dtype": "float32"}})


def test_data_that_does_not_fit_extern_data_is_named(tmp_path):
    wrong = ArrayDataset(
        {"data": [np.zeros((4, 5), np.float32)], "classes": [np.zeros(4, np.int32)]}
    )
    with pytest.raises(
        ValueError, match=r"extern_data\['data'\]: dim in has size 3, the dataset gives 5"
    ):
        engine(tmp_path, epochs=1).train(wrong)
    short = ArrayDataset(
        {"data": [np.zeros((4, 3), np.float32)], "classes": [np.zeros(3, np.int32)]}
    )
    with pytest.raises(
        ValueError, match="share dim time, but the dataset gives them different lengths"
    ):
        engine(tmp_path / "b", epochs=1).train(short)


def test_a_checkpoint_of_another_model_is_refused_and_kept(tmp_path):
    engine(tmp_path, epochs=1).train(data(20, 0))
    saved = (tmp_path / "run" / "model.001.safetensors").read_bytes()

    class Other(rf.Module):
        def __init__(self) -> None:
            self.linear = rf.Linear(in_dim, out_dim)

    other = engine(tmp_path, epochs=2, get_model=lambda **_: Other())
    with pytest.raises(ValueError, match=r"model\.001\.meta\.json: a checkpoint of another model"):
        other.train(data(20, 0))
    assert (tmp_path / "run" / "model.001.safetensors").read_bytes() == saved
    assert not (tmp_path / "run" / "model.002.safetensors").exists()
