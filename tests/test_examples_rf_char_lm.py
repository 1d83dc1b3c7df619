"""``examples/python/rf_char_lm.py`` on a tiny fortune folder: it trains (the
loss and the validation bits per character go down), samples texts that decode
to the vocabulary's characters after their prompts, and runs with weight
dropout, weight noise and the checkpoint scope, printing the peak memory, and
with RETURNN's initialization."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "python" / "rf_char_lm.py"
WORDS = ["The cat", "A dog", "sat on", "the mat", "ran off", "You will", "a hat"]


def load_example():
    spec = importlib.util.spec_from_file_location("rf_char_lm", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example():
    return load_example()


@pytest.fixture(scope="module")
def fortunes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """480 short texts of a few words (enough to learn from in a
    few dozen steps), in two fortune files."""
    folder = tmp_path_factory.mktemp("fortunes")
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(2, 5))) + "." for _ in range(480)]
    for name, part in (("first", texts[:240]), ("second", texts[240:])):
        (folder / name).write_text("\n%\n".join(part) + "\n")
    return folder


def test_trains_and_samples(
    example, fortunes: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # as in a terminal: a bar
    result = example.main(["--data", str(fortunes), "--epochs", "3", "--max-batches", "8"])
    out, err = capsys.readouterr()
    assert out.count("bits/char") == 3
    # Each epoch's steps on the engine's progress bar, on stderr only (issue 39 item 14;
    # the counts shown depend on the speed: tqdm redraws at most every 0.1 s).
    for epoch in (1, 2, 3):
        assert re.search(rf"ep {epoch} train: \d+step \[", err), err[-2000:]
        assert re.search(rf"ep {epoch} validation eval: \d+step \[", err), err[-2000:]
    assert "step/s" not in out
    assert result.train_loss[-1] < 0.7 * result.train_loss[0]
    assert result.val_bpc[-1] < result.val_bpc[0]
    assert len(result.samples) == len(example.PROMPTS)
    alphabet = set("".join(WORDS) + ".")
    for prompt, text in zip(example.PROMPTS, result.samples, strict=True):
        assert text.startswith(prompt)
        assert set(text[len(prompt) :]) <= alphabet
        assert len(text) <= len(prompt) + example.SAMPLE_CHARS


def test_greedy_sampling_is_batched_with_per_entry_ends(example, fortunes: Path) -> None:
    """Greedy samples of several prompts at once equal each prompt sampled alone
    (each entry ends at its own ``<eot>``)."""
    from verjus import data, rf

    train, _, vocab = data.fortunes(fortunes, 512, 20)
    rf.set_random_seed(0)
    model = example.CharLM(rf.Dim(vocab.size, name="vocab"))
    opt = rf.Adam(model.parameters(), lr=example.LR, clip_norm=example.CLIP)
    rf.init_train_step_run_ctx(train_flag=True)
    for arrays in data.TextBatcher(train, vocab, 32).epoch(0, 0):
        example.train_step(model, opt, example.to_batch(arrays, model.vocab_dim))
    prompts = ["the ", "a d", ""]
    together = example.sample(model, vocab, prompts, temperature=0.0, max_chars=40)
    alone = [example.sample(model, vocab, [p], temperature=0.0, max_chars=40)[0] for p in prompts]
    assert together == alone
    assert all(t.startswith(p) for p, t in zip(prompts, together, strict=True))


def test_regularized_run_prints_peak_memory(
    example, fortunes: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    for scope in ([], ["--checkpoint-scope", "--init", "returnn", "--no-progress"]):
        args = ["--data", str(fortunes), "--epochs", "1", "--max-batches", "2"]
        result = example.main([*args, "--weight-dropout", "0.2", "--weight-noise", "0.05", *scope])
        assert np.isfinite(result.val_bpc[0])
        out, err = capsys.readouterr()
        assert "peak memory per step" in out
        assert "tape saved peak" in out
        assert ("ep 1 train" in err) is ("--no-progress" not in scope)


def test_a_log_gets_progress_lines_unless_no_progress(
    example, fortunes: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where stderr is no terminal (``capsys``'s), lines instead of a bar, here one
    a step (``VERJUS_PROGRESS_INTERVAL=0``; by default one every 30 s)."""
    monkeypatch.setenv("VERJUS_PROGRESS_INTERVAL", "0")
    args = ["--data", str(fortunes), "--epochs", "1", "--max-batches", "2"]
    line = r"^ep 1 {}: step (\d+), \d+:\d\d:\d\d elapsed, [\d,.]+ (?:steps/s|s/step), ce="
    example.main(args)
    out, err = capsys.readouterr()
    assert re.findall(line.format("train"), err, re.M) == ["1", "2"], err[-2000:]
    assert re.findall(line.format("validation eval"), err, re.M)[:1] == ["1"], err[-2000:]
    assert "elapsed" not in out
    example.main([*args, "--no-progress"])
    assert "elapsed" not in "".join(capsys.readouterr())
