"""The Python side of the benchmark drivers runs to the end.

``benches/run.py`` shares helpers with ``benches/rf_overhead.py``; a helper
removed from one broke the other unnoticed once. This runs the RF overhead
table in its quick form (with whichever of torch and RETURNN are installed;
the rest show as skipped) and checks that every op made it into the table.
The timings themselves are not checked. The library workers (``run.py
--worker LIB``) are checked to have each kind of workload they time.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_rf_overhead_quick_writes_the_whole_table(tmp_path: Path) -> None:
    md = tmp_path / "rf.md"
    script = ROOT / "benches" / "rf_overhead.py"
    run = subprocess.run(
        [sys.executable, str(script), "--quick", "--markdown", str(md)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    table = md.read_text()
    ops = ["add", "add_permuted", "matmul", "reduce_sum", "softmax", "masked_mean"]
    for op in [*ops, "step_body", "loop_step", "scan_step", "loop_overhead", "scan_overhead"]:
        assert f"| {op} |" in table, table


def test_library_worker_times_a_workload_in_its_own_process() -> None:
    """``run.py --worker numpy`` is the process that times numpy's side of one
    workload: it answers a GEMM record with ready and each sample with a time, and
    a workload numpy has no version of with absent."""
    script = ROOT / "benches" / "run.py"
    gemm = {"name": "g", "op": "gemm", "m": 8, "n": 4, "k": 16, "trans_a": False, "trans_b": True}
    lines = [json.dumps(gemm), "sample", "once"]
    run = subprocess.run(
        [sys.executable, str(script), "--worker", "numpy", "--warmup", "1"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    ready, sample, once = map(json.loads, run.stdout.splitlines())
    assert ready == {"ready": True, "rec": {}}
    assert sample["ms"] > 0
    assert once["ms"] > 0
    absent = subprocess.run(
        [sys.executable, str(script), "--worker", "numpy"],
        input=json.dumps({"name": "s", "op": "train_step", "net": "fashion_mlp.json"}) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert absent.returncode == 0, absent.stderr
    assert json.loads(absent.stdout) == {"absent": True, "rec": {}}


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")
def test_torch_worker_times_every_kind_of_lstm_workload() -> None:
    """``run.py --worker torch`` has a version of each LSTM record verjus-bench
    describes (at small sizes here): the training pass over full sequences, over
    sequences with lengths packed and padded, and the cell step."""
    script = ROOT / "benches" / "run.py"
    sizes = {"batch": 3, "input": 5, "hidden": 4}
    train = {"op": "lstm_train", "steps": 6, **sizes}
    lengths = {"lengths": [6, 1, 4]}
    records = [
        train,
        {**train, **lengths, "torch_lengths": "packed"},
        {**train, **lengths, "torch_lengths": "padded"},
        {"op": "lstm_cell", **sizes},
    ]
    for rec in records:
        run = subprocess.run(
            [sys.executable, str(script), "--worker", "torch", "--warmup", "1"],
            input=json.dumps({"name": "l", **rec}) + "\nsample\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, (rec, run.stderr)
        ready, sample = map(json.loads, run.stdout.splitlines())
        assert ready == {"ready": True, "rec": {}}, rec
        assert sample["ms"] > 0, rec


def test_python_worker_times_a_training_step_through_the_python_api() -> None:
    """``run.py --worker python`` times verjus' own Python API: it has a version
    of the training-step rows (``Trainer.train_minibatch``) and of nothing else."""
    script = ROOT / "benches" / "run.py"
    step = {
        "name": "mlp_step",
        "op": "train_step",
        "net": "fashion_mlp.json",
        "batch": 16,
        "solver": "sgd",
        "lr": 0.01,
        "momentum": 0.9,
    }
    run = subprocess.run(
        [sys.executable, str(script), "--worker", "python", "--warmup", "1"],
        input="\n".join([json.dumps(step), "sample"]) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    ready, sample = map(json.loads, run.stdout.splitlines())
    assert ready == {"ready": True, "rec": {}}
    assert sample["ms"] > 0
    gemm = {"name": "g", "op": "gemm", "m": 8, "n": 4, "k": 16, "trans_a": False, "trans_b": True}
    absent = subprocess.run(
        [sys.executable, str(script), "--worker", "python"],
        input=json.dumps(gemm) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert absent.returncode == 0, absent.stderr
    assert json.loads(absent.stdout) == {"absent": True, "rec": {}}


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")
def test_torch_worker_times_the_sequence_model_rows() -> None:
    """``run.py --worker torch`` has a version of the sequence-model rows
    verjus-bench describes (at small sizes here): the row-LSTM training step
    and the character sampling step, which carries its state from sample to
    sample."""
    script = ROOT / "benches" / "run.py"
    records = [
        {
            "op": "rowlstm_step",
            "net": "fashion_rowlstm.json",
            "batch": 4,
            "steps": 5,
            "input": 6,
            "hidden": 3,
            "classes": 10,
            "solver": "adam",
            "lr": 1e-3,
        },
        {"op": "char_sample_step", "vocab": 9, "embed": 4, "hidden": 5},
    ]
    for rec in records:
        run = subprocess.run(
            [sys.executable, str(script), "--worker", "torch", "--warmup", "1"],
            input=json.dumps({"name": "s", **rec}) + "\nsample\nsample\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, (rec, run.stderr)
        ready, *samples = map(json.loads, run.stdout.splitlines())
        assert ready == {"ready": True, "rec": {}}, rec
        assert len(samples) == 2, rec
        assert all(s["ms"] > 0 for s in samples), rec
