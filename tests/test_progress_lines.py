"""Progress where stderr is no terminal (a CI log, ``nohup``, a cluster's job
log): ``Trainer.fit`` (and so ``verjus train``) and the RF ``Engine`` print a
plain line now and then (``verjus._progress``) instead of nothing until the
epoch's summary (issue 39 item 14); a terminal still gets the tqdm bar, and
``progress=False`` / ``--no-progress`` shows nothing. ``capsys``'s stderr is
no terminal; ``VERJUS_PROGRESS_INTERVAL=0`` prints a line each step."""

from __future__ import annotations

import itertools
import json
import re
import sys

import numpy as np
import pytest
from test_engine import data as engine_data
from test_engine import engine as make_engine

import verjus
from verjus import _progress, distributed, nn, optim
from verjus.cli import main as cli_main

HMS = r"(\d+):(\d\d):(\d\d)"
RATE = r"[\d,]+\.\d\d (?:steps/s|s/step)"
FIT_LINE = re.compile(
    rf"^epoch (\d+)/(\d+): step (\d+)/(\d+) \(\d+%\), {HMS} elapsed, {RATE}, "
    r"loss (\d+\.\d{4}), [\d,]+ ex/s$"
)
ENGINE_LINE = re.compile(
    rf"^ep (\d+) (train|dev eval): step (\d+), {HMS} elapsed, {RATE}, ce=\S+, fer=\S+$"
)


def blobs(n: int = 256) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=n)
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]], np.float32)
    x = centers[y] + 0.4 * rng.standard_normal((n, 2)).astype(np.float32)
    return x.astype(np.float32), y.astype(np.int64)


def trainer() -> verjus.Trainer:
    net = verjus.Network.from_def(
        nn.Sequential(nn.Linear(16), nn.ReLU(), nn.Linear(3), input_shape=(2,)), seed=1
    )
    return verjus.Trainer(net, optim.Adam(lr=0.05))


def fit_lines(err: str) -> list[re.Match[str]]:
    return [m for line in err.splitlines() if (m := FIT_LINE.match(line))]


@pytest.fixture
def every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_progress.INTERVAL_ENV, "0")


def test_fit_prints_a_progress_line_per_step_to_a_log_at_interval_0(every_step, capsys) -> None:
    x, y = blobs()
    history = trainer().fit(x, y, epochs=2, batch_size=64, validation_data=(x, y))
    out, err = capsys.readouterr()
    lines = fit_lines(err)
    assert len(lines) == len(err.splitlines()) == 8, err  # 2 epochs of 4 steps, nothing else
    assert [(m[1], m[2], m[3], m[4]) for m in lines] == [
        (str(e), "2", str(s), "4") for e in (1, 2) for s in (1, 2, 3, 4)
    ]
    # The running mean loss, as the bar shows it: at the epoch's end, the epoch's.
    for epoch, last in zip((0, 1), (lines[3], lines[7]), strict=True):
        assert float(last[8]) == pytest.approx(history["train_loss"][epoch], abs=2e-4)
    # The per-epoch lines on stdout are as they were, and no progress goes there.
    assert [line.split(":")[0] for line in out.splitlines()] == ["epoch 1/2", "epoch 2/2"]
    assert "train loss" in out
    assert "elapsed" not in out


def test_progress_false_prints_nothing_where_progress_prints_lines(every_step, capsys) -> None:
    x, y = blobs()
    trainer().fit(x, y, epochs=1, batch_size=64, verbose=0)
    assert len(fit_lines(capsys.readouterr().err)) == 4
    trainer().fit(x, y, epochs=1, batch_size=64, verbose=0, progress=False)
    assert capsys.readouterr().err == ""


def test_only_the_main_process_prints_progress_lines(every_step, capsys, monkeypatch) -> None:
    x, y = blobs()
    trainer().fit(x, y, epochs=1, batch_size=64, verbose=0)
    assert len(fit_lines(capsys.readouterr().err)) == 4
    monkeypatch.setattr(distributed, "is_main_process", lambda: False)
    trainer().fit(x, y, epochs=1, batch_size=64, verbose=0)
    assert capsys.readouterr().err == ""


def test_lines_come_every_30_s_and_not_in_a_shorter_epoch(capsys, monkeypatch) -> None:
    monkeypatch.delenv(_progress.INTERVAL_ENV, raising=False)
    assert _progress.line_interval() == _progress.INTERVAL == 30.0
    x, y = blobs(1024)
    trainer().fit(x, y, epochs=1, batch_size=16, verbose=0)  # 64 steps, well under 30 s
    assert capsys.readouterr().err == ""
    # A clock that runs 7 s a reading: the same 64 steps now take minutes.
    ticks = itertools.count(0.0, 7.0)
    monkeypatch.setattr(_progress, "_clock", lambda: next(ticks))
    trainer().fit(x, y, epochs=1, batch_size=16, verbose=0)
    lines = fit_lines(capsys.readouterr().err)
    assert 5 <= len(lines) < 32, lines
    seconds = [int(m[5]) * 3600 + int(m[6]) * 60 + int(m[7]) for m in lines]
    assert seconds[0] >= 30
    assert all(b - a >= 30 for a, b in itertools.pairwise(seconds)), seconds


def test_the_interval_variable_is_checked(monkeypatch, capsys) -> None:
    monkeypatch.setenv(_progress.INTERVAL_ENV, "soon")
    x, y = blobs()
    with pytest.raises(ValueError, match="VERJUS_PROGRESS_INTERVAL must be a number"):
        trainer().fit(x, y, epochs=1, batch_size=64, verbose=0)
    monkeypatch.setenv(_progress.INTERVAL_ENV, "inf")  # no lines at all
    trainer().fit(x, y, epochs=1, batch_size=64, verbose=0)
    monkeypatch.setenv(_progress.INTERVAL_ENV, "2.5")
    assert _progress.line_interval() == 2.5
    assert capsys.readouterr().err == ""


def test_a_terminal_still_gets_the_bar_and_no_lines(every_step, capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    x, y = blobs()
    trainer().fit(x, y, epochs=1, batch_size=64, verbose=0)
    err = capsys.readouterr().err
    assert re.search(r"epoch 1/1: +\d+%\|.*\| \d/4 \[", err), err
    assert fit_lines(err.replace("\r", "\n")) == []


def test_fit_on_sequences_prints_progress_lines(every_step, capsys) -> None:
    texts = ["hello world", "hello there", "a b c", "world hello"] * 4
    vocab = verjus.data.CharVocab.build(texts)
    net = verjus.Network.from_def(
        nn.Sequential(
            nn.Embedding(vocab.size, 8), nn.LSTM(8), nn.Linear(vocab.size),
            input_shape=(None,), input_dtype="int32",
        )
    )  # fmt: skip
    batches = verjus.data.TextBatcher(texts, vocab, batch_size=4)
    verjus.Trainer(net, optim.Adam(lr=0.02)).fit(batches, epochs=1, verbose=0)
    lines = fit_lines(capsys.readouterr().err)
    assert [(m[3], m[4]) for m in lines] == [(str(s), "4") for s in (1, 2, 3, 4)]


def test_verjus_train_prints_progress_lines_unless_no_progress(
    every_step, tmp_path, capsys, monkeypatch
) -> None:
    folder = tmp_path / "fortunes"
    folder.mkdir()
    (folder / "cats").write_text("\n%\n".join(f"the cat sat on mat {i}" for i in range(40)))
    monkeypatch.setenv("VERJUS_FORTUNES", str(folder))
    net = tmp_path / "lm.json"
    net.write_text(
        json.dumps(
            {
                "format_version": 3,
                "inputs": [{"name": "chars", "shape": [None], "dtype": "int32"}],
                "layers": [
                    {"name": "embed", "type": "Embedding", "vocab": "vocab", "dim": 8},
                    {"name": "fc", "type": "Linear", "out_features": "vocab"},
                ],
            }
        )
    )
    argv = ["train", str(net), "--data", "fortunes", "--epochs", "1", "--batch-size", "8"]
    assert cli_main([*argv, "--out", str(tmp_path / "a")]) == 0
    lines = fit_lines(capsys.readouterr().err)
    assert lines
    assert all(m[1] == "1" and m[2] == "1" for m in lines)
    assert lines[-1][3] == lines[-1][4]  # up to the epoch's last step
    assert cli_main([*argv, "--out", str(tmp_path / "b"), "--no-progress"]) == 0
    assert fit_lines(capsys.readouterr().err) == []


def test_the_engine_prints_progress_lines_by_default(every_step, tmp_path, capsys) -> None:
    make_engine(tmp_path / "a", epochs=2, progress=None).train(
        engine_data(40, 0), {"dev": engine_data(16, 1)}
    )
    err = capsys.readouterr().err
    lines = [m for line in err.splitlines() if (m := ENGINE_LINE.match(line))]
    assert len(lines) == len(err.splitlines()), err
    for epoch in ("1", "2"):
        for what in ("train", "dev eval"):
            steps = [int(m[3]) for m in lines if (m[1], m[2]) == (epoch, what)]
            assert steps == list(range(1, len(steps) + 1))
            assert steps, (epoch, what)
    make_engine(tmp_path / "b", epochs=1, progress=False).train(engine_data(40, 0))
    assert capsys.readouterr().err == ""


def test_the_engine_prints_no_line_in_a_short_epoch(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(_progress.INTERVAL_ENV, raising=False)
    make_engine(tmp_path, epochs=1, progress=True).train(engine_data(40, 0))
    assert capsys.readouterr().err == ""
    ticks = itertools.count(0.0, 40.0)  # 40 s a reading: a line each step
    monkeypatch.setattr(_progress, "_clock", lambda: next(ticks))
    make_engine(tmp_path / "b", epochs=1, progress=True).train(engine_data(40, 0))
    assert re.search(r"^ep 1 train: step 1, 0:00:40 elapsed", capsys.readouterr().err, re.M)
