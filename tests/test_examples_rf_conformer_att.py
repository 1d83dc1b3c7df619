"""Tiny runs of ``examples/python/rf_conformer_att.py`` (the attention-decoder
variant of the Conformer-CTC example) on the synthetic Fashion-MNIST of
``conftest.fashion_dir``: the model learns (the loss goes down), its beam
search gives hypotheses with the expected dims, lengths and scores (each the
decoder's teacher-forced log-probability of the hypothesis), and beam 1 is
greedy decoding, done here independently by re-running the decoder over the
whole prefix at each step."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from verjus import rf

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "python"
TINY = ["--epochs", "2", "--train-strips", "192", "--test-strips", "48", "--batch-size", "16"]
TINY += ["--model-dim", "32", "--layers", "1", "--heads", "2", "--dec-layers", "1"]


@pytest.fixture(scope="module")
def example() -> ModuleType:
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(EXAMPLES))  # it imports rf_conformer_ctc
        return importlib.import_module("rf_conformer_att")


@pytest.fixture(scope="module")
def trained(example: ModuleType, fashion_dir: Path):
    """A tiny model trained for two epochs, its result and its test strips."""
    args, model, train, test = example.build([*TINY, "--data", str(fashion_dir)])
    result = example.fit(args, model, train, test)
    return model, result, test


@pytest.fixture(scope="module", params=["trained", "random"])
def decoding_model(request: pytest.FixtureRequest, example: ModuleType, trained, fashion_dir: Path):
    """The trained tiny model (it has learned the label frequencies only, so
    it ends every hypothesis early), or one with random decoder weights (the
    embedding small, so it does not repeat its input: long, varied
    hypotheses, most cut at the most labels, one per encoder frame)."""
    if request.param == "trained":
        return trained[0], trained[2], request.param
    _, model, _, test = example.build([*TINY, "--seed", "1", "--data", str(fashion_dir)])
    rng = np.random.default_rng(2)
    for name, param in model.named_parameters():
        if name.startswith("decoder.") and "norm" not in name:
            std = 0.05 if "embedding" in name else 1.0
            param.assign(rng.normal(0.0, std, param.shape).astype(np.float32))
    return model, test, request.param


def test_tiny_run_learns(trained) -> None:
    _, result, _ = trained
    assert len(result.ler) == 2
    assert len(result.seconds) == 2
    assert result.train_loss[-1] < 0.9 * result.train_loss[0]


def test_main_prints_ler_per_epoch(
    example: ModuleType, fashion_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = [*TINY, "--epochs", "1", "--train-strips", "32", "--data", str(fashion_dir)]
    result = example.main(argv)
    out = capsys.readouterr().out
    assert out.count("test LER") == 1
    assert f"test LER {100 * result.ler[0]:.2f} %" in out
    assert "s/epoch" in out


def decode_batch(model, test):
    """The first 12 test strips, in evaluation mode: their rows, their batch
    and their encoder frames per entry."""
    rf.init_forward_step_run_ctx()
    rows = test.plan(12)[0]
    arrays = test.batch(rows)
    batch = model.to_batch(arrays)
    _, frames = model.encode(batch)
    np.testing.assert_array_equal(frames.dyn_size_ext.numpy(), arrays.lengths // 4)
    return rows, batch, arrays.lengths // 4


def teacher_forced_log_probs(example: ModuleType, model, batch, inputs: np.ndarray) -> np.ndarray:
    """The decoder's log-probabilities ``[batch, positions, target]`` for
    ``inputs`` (``[batch, positions]`` labels), over the whole sequence."""
    enc, frames = model.encode(batch)
    positions = rf.Dim(inputs.shape[1], name="positions")
    x = rf.convert_to_tensor(
        inputs.astype(np.int32), dims=[batch.batch_dim, positions], sparse_dim=model.target_dim
    )
    lp = example.decoder_log_probs(model, enc, frames, x, positions)
    return lp.copy_transpose([batch.batch_dim, positions, model.target_dim]).numpy()


def test_beam_search_dims_lengths_and_scores(example: ModuleType, decoding_model) -> None:
    model, test, _ = decoding_model
    rows, batch, max_len = decode_batch(model, test)
    labels, scores, out_dim, beam = example.beam_search(model, batch, 4)
    assert beam.dimension == 4
    assert set(labels.dims) == {batch.batch_dim, beam, out_dim}
    assert labels.sparse_dim == model.target_dim
    assert set(scores.dims) == {batch.batch_dim, beam}
    hyps = labels.copy_transpose([batch.batch_dim, beam, out_dim]).numpy()
    lens = out_dim.dyn_size_ext.copy_transpose([batch.batch_dim, beam]).numpy()
    scores = scores.copy_transpose([batch.batch_dim, beam]).numpy()
    eos = example.BOS_EOS
    assert hyps.shape[-1] == lens.max()
    for b in range(len(max_len)):
        assert (np.diff(scores[b]) <= 1e-6).all(), "best first"
        assert len({tuple(hyps[b, k, : lens[b, k]]) for k in range(4)}) == 4, "distinct"
        for k in range(4):
            n = lens[b, k]
            assert 0 <= n <= max_len[b]
            assert (hyps[b, k, :n] < eos).all()
            assert (hyps[b, k, n:] == eos).all()
            # the score: the decoder's log-prob of the labels (and of eos, unless cut at max_len)
            seq = list(hyps[b, k, :n])
            ended = n < max_len[b]
            inputs = np.array([[eos, *(seq if ended else seq[:-1])]])
            targets = [*seq, eos] if ended else seq
            one = model.to_batch(test.batch([rows[b]]))  # alone, no padding
            lp = teacher_forced_log_probs(example, model, one, inputs)[0]
            expected = sum(lp[t, y] for t, y in enumerate(targets))
            np.testing.assert_allclose(scores[b, k], expected, rtol=1e-4, atol=1e-4)


def test_beam_one_is_greedy_decoding(example: ModuleType, decoding_model) -> None:
    model, test, kind = decoding_model
    _, batch, max_len = decode_batch(model, test)
    labels, scores, out_dim, beam = example.beam_search(model, batch, 1)
    hyps = labels.copy_transpose([batch.batch_dim, beam, out_dim]).numpy()[:, 0]
    lens = out_dim.dyn_size_ext.copy_transpose([batch.batch_dim, beam]).numpy()[:, 0]
    scores = scores.copy_transpose([batch.batch_dim, beam]).numpy()[:, 0]

    eos = example.BOS_EOS
    size = len(max_len)
    prefix = np.full((size, 1), eos, np.int64)
    greedy: list[list[int]] = [[] for _ in range(size)]
    total = np.zeros(size)
    done = max_len <= 0
    while not done.all():
        lp = teacher_forced_log_probs(example, model, batch, prefix)[:, -1]
        best = lp.argmax(-1)
        for b in np.flatnonzero(~done):
            total[b] += lp[b, best[b]]
            if best[b] == eos:
                done[b] = True
            else:
                greedy[b].append(int(best[b]))
                done[b] = len(greedy[b]) >= max_len[b]
        prefix = np.concatenate([prefix, best[:, None]], axis=1)
    if kind == "random":  # not only empty or constant hypotheses
        assert all(greedy)
        assert len(set(np.concatenate(greedy))) > 1
    for b in range(size):
        assert list(hyps[b, : lens[b]]) == greedy[b]
    np.testing.assert_allclose(scores, total, rtol=1e-4, atol=1e-4)
