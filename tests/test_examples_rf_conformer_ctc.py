"""``verjus.data.ImageStrips`` (the strips of the Conformer-CTC example) and
tiny runs of ``examples/python/rf_conformer_ctc.py`` and its PyTorch twin on
the synthetic Fashion-MNIST of ``conftest.fashion_dir``: the strips are
deterministic and hold their source images and labels, and both examples learn
(the loss goes down) and print the label error rate per epoch."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import synthetic_images

import verjus

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "python"
TINY = ["--epochs", "1", "--train-strips", "192", "--test-strips", "48", "--batch-size", "16"]
TINY += ["--model-dim", "32", "--layers", "1", "--heads", "2"]


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def images() -> tuple[np.ndarray, np.ndarray]:
    x, y = synthetic_images(50, seed=3)
    return x.astype(np.float32)[:, None] / 255.0, y.astype(np.int64)


def test_strips_hold_their_source_images_and_labels(images):
    x, y = images
    strips = verjus.data.ImageStrips(x, y, 40, seed=5, min_images=2, max_images=4)
    assert len(strips) == 40
    counts = [len(s) for s in strips.sources]
    assert min(counts) >= 2
    assert max(counts) <= 4
    assert len(set(counts)) == 3
    for i in range(len(strips)):
        columns, labels = strips.strip(i)
        k = len(strips.sources[i])
        assert columns.shape == (28 * k, 28)
        for j, src in enumerate(strips.sources[i]):
            # column c of image j is frame 28 j + c, its pixel rows the features
            np.testing.assert_array_equal(columns[28 * j : 28 * (j + 1)], x[src, 0].T)
        np.testing.assert_array_equal(labels, y[strips.sources[i]])


def test_strips_are_deterministic_by_seed(images):
    x, y = images
    a = verjus.data.ImageStrips(x, y, 30, seed=1)
    b = verjus.data.ImageStrips(x, y, 30, seed=1)
    c = verjus.data.ImageStrips(x, y, 30, seed=2)
    assert all(np.array_equal(s, t) for s, t in zip(a.sources, b.sources, strict=True))
    assert not all(
        len(s) == len(t) and np.array_equal(s, t) for s, t in zip(a.sources, c.sources, strict=True)
    )
    assert {len(s) for s in a.sources} <= set(range(1, 7))
    assert a.plan(4, seed=3, epoch=1) == b.plan(4, seed=3, epoch=1)
    assert a.plan(4, seed=3, epoch=1) != a.plan(4, seed=3, epoch=2)


def test_batches_are_padded_and_cover_every_strip_once(images):
    x, y = images
    strips = verjus.data.ImageStrips(x, y, 23, seed=0)
    for seed in (None, 7):
        plan = strips.plan(5, seed=seed)
        assert sorted(i for rows in plan for i in rows) == list(range(23))
        assert all(1 <= len(rows) <= 5 for rows in plan)
    rows = strips.plan(5, seed=7)[0]
    batch = strips.batch(rows)
    width = batch.features.shape[1]
    assert width == batch.lengths.max()
    assert batch.features.shape == (len(rows), width, 28)
    for b, r in enumerate(rows):
        columns, labels = strips.strip(r)
        assert batch.lengths[b] == len(columns)
        assert batch.label_lengths[b] == len(labels)
        np.testing.assert_array_equal(batch.features[b, : len(columns)], columns)
        assert not batch.features[b, len(columns) :].any()
        np.testing.assert_array_equal(batch.labels[b, : len(labels)], labels)
        assert not batch.labels[b, len(labels) :].any()


def test_bad_strip_arguments_say_what_is_wrong(images):
    x, y = images
    with pytest.raises(ValueError, match=r"labels must be \[N\] = \[50\]"):
        verjus.data.ImageStrips(x, y[:3], 4)
    with pytest.raises(ValueError, match="min_images <= max_images"):
        verjus.data.ImageStrips(x, y, 4, min_images=3, max_images=2)
    with pytest.raises(ValueError, match=r"images must be \[N, H, W\]"):
        verjus.data.ImageStrips(x[:, 0, 0], y, 4)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        verjus.data.ImageStrips(x, y, 4).plan(0)


def check_run(result, out: str, epochs: int) -> None:
    """The label error rate is printed after each epoch."""
    assert len(result.ler) == epochs
    assert out.count("test LER") == epochs
    assert result.ler[-1] >= 0.0
    assert f"test LER {100 * result.ler[-1]:.2f} %" in out


def test_rf_example_learns(fashion_dir: Path, capsys: pytest.CaptureFixture) -> None:
    """Two epochs (the engine reports a mean loss per epoch): the second's is
    well under the first's (the blank plateau is reached; reading labels takes
    longer)."""
    example = load_example("rf_conformer_ctc")
    result = example.main([*TINY, "--epochs", "2", "--data", str(fashion_dir)])
    check_run(result, capsys.readouterr().out, 2)
    assert result.train_loss[1] < 0.8 * result.train_loss[0]


def test_torch_twin_learns(fashion_dir: Path, capsys: pytest.CaptureFixture) -> None:
    """One epoch: the loss of its last tenth of steps is under half that of its first."""
    pytest.importorskip("torch", reason="the PyTorch twin needs torch")
    example = load_example("torch_conformer_ctc")
    result = example.main([*TINY, "--data", str(fashion_dir)])
    check_run(result, capsys.readouterr().out, 1)
    assert result.last_loss[0] < 0.5 * result.first_loss[0]


def rf_weights_to_torch(rf_model, torch_model) -> None:
    """The RF model's parameters (random ones, running statistics too) into the
    twin, by name: Linear weights transposed, the rest as they are."""
    import torch

    names = {
        "encoder.input_layer.conv_layers.0.filter": "conv1.weight",
        "encoder.input_layer.conv_layers.0.bias": "conv1.bias",
        "encoder.input_layer.conv_layers.1.filter": "conv2.weight",
        "encoder.input_layer.conv_layers.1.bias": "conv2.bias",
        "encoder.input_projection.weight": "input_projection.weight",
    }
    state = torch_model.state_dict()
    rng = np.random.default_rng(4)
    for name, param in rf_model.named_parameters():
        value = rng.uniform(0.5, 1.5, param.shape).astype(np.float32)
        if "running_mean" not in name and "variance" not in name and "gamma" not in name:
            value -= 1.0
        param.assign(value)
        target = names.get(name, name.removeprefix("encoder."))
        for norm in ("ffn1", "self_att", "conv", "ffn2", "final"):
            target = target.replace(f"{norm}_layer_norm.scale", f"norms.{norm}.weight")
            target = target.replace(f"{norm}_layer_norm.bias", f"norms.{norm}.bias")
        target = target.replace("depthwise_conv.filter", "depthwise_conv.weight")
        if target.endswith(".weight") and value.ndim == 2 and "norms" not in target:
            value = value.T
        assert state[target].shape == value.shape, (name, target)
        state[target] = torch.from_numpy(np.ascontiguousarray(value))
    torch_model.load_state_dict(state)


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_torch_twin_computes_what_the_rf_model_does(train: bool, monkeypatch):
    """The transcription is exact: with the same (random) weights both models
    give the same logits on a ragged batch, in evaluation (BatchNorm's running
    statistics) and in training without dropout (its masked batch statistics)."""
    torch = pytest.importorskip("torch", reason="compares with the PyTorch twin")
    from verjus import rf

    rf_ex, torch_ex = load_example("rf_conformer_ctc"), load_example("torch_conformer_ctc")
    if train:
        monkeypatch.setattr(rf_ex, "DROPOUT", 0.0)
        monkeypatch.setattr(torch_ex, "DROPOUT", 0.0)
    x, y = synthetic_images(20, seed=8)
    strips = verjus.data.ImageStrips(x.astype(np.float32) / 255.0, y, 4, seed=2)
    batch = strips.batch([0, 1, 2, 3])
    assert len(set(batch.lengths)) > 1  # ragged
    rf_model = rf_ex.ConformerCtc(28, 16, 2, 2)
    torch_model = torch_ex.ConformerCtc(28, 16, 2, 2)
    rf_weights_to_torch(rf_model, torch_model)
    torch_model.train(train)
    if train:
        rf.init_train_step_run_ctx(train_flag=True)
    else:
        rf.init_forward_step_run_ctx()
    rb = rf_ex.to_batch(batch, rf_model)
    logits, frames = rf_model(rb.features, spatial_dim=rb.columns)
    mine = logits.copy_transpose([rf.batch_dim, frames, rf_model.wb_dim]).numpy()
    lengths = frames.dyn_size_ext.numpy()
    with torch.no_grad():
        theirs, their_lengths = torch_model(
            torch.from_numpy(batch.features), torch.from_numpy(batch.lengths).long()
        )
    np.testing.assert_array_equal(lengths, their_lengths.numpy())
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(mine[b, :n], theirs.numpy()[b, :n], rtol=1e-4, atol=1e-4)
