"""``benches/char_lm.py``: every framework computes the same loss from the same
weights on a batch (so the bench compares like with like), the rf model trains
through the bench's loop, and the frameworks that are not installed are
skipped with the reason."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "benches" / "char_lm.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH.parent))  # it imports benches/run.py
    spec = importlib.util.spec_from_file_location("char_lm_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fortunes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fortunes")
    rng = np.random.default_rng(1)
    words = ["one", "two", "three", "four", "Five"]
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 6))) for _ in range(100)]
    (folder / "numbers").write_text("\n%\n".join(texts) + "\n")
    return folder


def batch_and_weights(bench, vocab_size: int):
    rng = np.random.default_rng(2)
    lengths = np.array([7, 1, 4], np.int32)
    ids = rng.integers(2, vocab_size, (3, 7)).astype(np.int32)
    past = np.arange(7)[None, :] >= lengths[:, None]
    inputs = np.where(past, 0, ids).astype(np.int32)
    targets = np.where(past, 0, np.roll(ids, -1, axis=1)).astype(np.int32)
    weights = {
        name: rng.uniform(-0.3, 0.3, shape).astype(np.float32)
        for name, shape in bench.weight_shapes(vocab_size).items()
    }
    return (inputs, targets, lengths), weights


@pytest.mark.parametrize("other", ["torch", "returnn"])
def test_frameworks_agree_from_the_same_weights(bench, other: str) -> None:
    pytest.importorskip("torch", reason="the torch and RETURNN models run on PyTorch")
    if other == "returnn":
        pytest.importorskip("returnn", reason="RETURNN is not installed")
    vocab = 12
    batch, weights = batch_and_weights(bench, vocab)
    lms = {name: bench.FRAMEWORKS[name](vocab, 0) for name in ("rf", other)}
    for lm in lms.values():
        lm.load(weights)
    ce = {name: lm.summed_ce(batch) for name, lm in lms.items()}
    np.testing.assert_allclose(ce["rf"], ce[other], rtol=1e-5)
    # a real frame's cross-entropy is about ln(vocab) at these small weights
    assert 0.5 * np.log(vocab) < ce["rf"] / batch[2].sum() < 2 * np.log(vocab)
    for lm in lms.values():
        lm.train_step(batch)
    after = {name: lm.summed_ce(batch) for name, lm in lms.items()}
    if other == "returnn":  # the same update (torch's LSTM has two biases, each updated)
        np.testing.assert_allclose(after["rf"], after[other], rtol=1e-4)
    assert after["rf"] < ce["rf"]
    assert after[other] < ce[other]


def test_rf_trains_in_the_bench_loop(bench, fortunes: Path, capsys) -> None:
    args = ["--framework", "rf", "--epochs", "2", "--max-batches", "3", "--data", str(fortunes)]
    bpc = bench.main(args)["rf"]
    assert len(bpc) == 2
    assert bpc[1] < bpc[0]
    assert capsys.readouterr().out.count("rf epoch") == 2
