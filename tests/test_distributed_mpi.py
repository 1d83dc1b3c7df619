"""Data-parallel training on 2 CPU ranks through MPI (``mpirun`` + mpi4py):
the replicas stay bitwise identical and equal a 1-process run on the same
global batches (the reduction of two ranks is exact, the rest within
rounding); uneven tails and frame counts; RF gradient and parameter
averaging; a failing or killed rank ends the job; resume across world sizes;
``verjus train --nproc 2``.

Each case runs ``tests/distributed_worker.py`` under ``mpirun -np 2`` and once
alone (the reference) and compares what the ranks wrote.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).with_name("distributed_worker.py")
NETS = Path(__file__).resolve().parents[1] / "examples" / "nets"

try:
    import mpi4py  # noqa: F401

    HAVE_MPI = shutil.which("mpirun") is not None
except ImportError:
    HAVE_MPI = False

pytestmark = pytest.mark.skipif(
    not HAVE_MPI,
    reason="needs Open MPI and mpi4py (apt-get install openmpi-bin libopenmpi-dev; "
    "pip install mpi4py)",
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", RAYON_NUM_THREADS="1"
    )
    return env


def mpirun(*args: str, ranks: int = 2, timeout: float = 120) -> subprocess.CompletedProcess:
    command = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none"]
    return subprocess.run(
        [*command, sys.executable, *args],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def alone(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in _env().items() if not k.startswith(("OMPI_COMM", "PMI"))}
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def run_scenario(scenario: str, tmp_path: Path) -> tuple[dict, dict, dict]:
    """The two ranks' results and the 1-process reference's."""
    parallel, single = tmp_path / "w2", tmp_path / "w1"
    parallel.mkdir()
    single.mkdir()
    result = mpirun(str(WORKER), scenario, str(parallel))
    assert result.returncode == 0, result.stderr[-3000:]
    result = alone(str(WORKER), scenario, str(single))
    assert result.returncode == 0, result.stderr[-3000:]
    return (
        dict(np.load(parallel / "rank0.npz")),
        dict(np.load(parallel / "rank1.npz")),
        dict(np.load(single / "rank0.npz")),
    )


def assert_replicas_and_reference(r0: dict, r1: dict, ref: dict, tol: float) -> None:
    assert r0.keys() == ref.keys()
    for name in r0:
        np.testing.assert_array_equal(r0[name], r1[name], err_msg=f"replicas differ in {name}")
        np.testing.assert_allclose(r0[name], ref[name], rtol=0, atol=tol, err_msg=name)


@pytest.mark.parametrize("scenario", ["mlp", "tail", "cnn", "lstm"])
def test_two_ranks_train_identical_replicas_equal_to_one_process(scenario, tmp_path):
    r0, r1, ref = run_scenario(scenario, tmp_path)
    assert_replicas_and_reference(r0, r1, ref, tol=1e-6)


def test_the_reference_comparison_can_fail(tmp_path):
    """A rank that steps on its own rows without the reduction diverges from the
    1-process run by far more than the tolerance."""
    r0, _, _ref = run_scenario("mlp", tmp_path)
    (tmp_path / "solo").mkdir()
    result = alone(str(WORKER), "tail", str(tmp_path / "solo"))
    assert result.returncode == 0, result.stderr
    other = dict(np.load(tmp_path / "solo" / "rank0.npz"))
    assert max(np.abs(other[k] - r0[k]).max() for k in ("h.weight", "o.weight")) > 1e-4


@pytest.mark.parametrize("scenario", ["rf-grad", "rf-param"])
def test_rf_averaging_equals_one_process(scenario, tmp_path):
    """Gradient averaging, and parameter averaging every step with SGD, equal
    the 1-process run on the global batches (within rounding)."""
    r0, r1, ref = run_scenario(scenario, tmp_path)
    assert_replicas_and_reference(r0, r1, ref, tol=1e-6)


@pytest.mark.parametrize("scenario", ["engine-grad", "engine-param"])
def test_the_engine_keeps_replicas_equal(scenario, tmp_path):
    """RETURNN's ``torch_distributed`` on the engine: each rank trains on its
    share of the batches, the replicas stay identical, rank 0 alone logs and
    writes the checkpoints."""
    result = mpirun(str(WORKER), scenario, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    r0, r1 = np.load(tmp_path / "rank0.npz"), np.load(tmp_path / "rank1.npz")
    for name in r0.files:
        np.testing.assert_array_equal(r0[name], r1[name], err_msg=name)
    assert "Epoch 2 evaluation" in (tmp_path / "log0.txt").read_text()
    assert (tmp_path / "log1.txt").read_text() == ""
    assert (tmp_path / "run" / "model.002.safetensors").is_file()


def test_a_non_finite_loss_on_one_rank_stops_every_rank(tmp_path):
    result = mpirun(str(WORKER), "nan", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    own = (tmp_path / "error1.txt").read_text()
    other = (tmp_path / "error0.txt").read_text()
    assert "the loss is NaN" in own
    assert "not finite on another rank" in other
    r0, r1 = np.load(tmp_path / "rank0.npz"), np.load(tmp_path / "rank1.npz")
    for name in r0.files:
        np.testing.assert_array_equal(r0[name], r1[name])


@pytest.mark.parametrize("scenario", ["kill", "raise"])
def test_a_failing_rank_ends_the_job(scenario, tmp_path):
    start = time.monotonic()
    result = mpirun(str(WORKER), scenario, str(tmp_path), timeout=90)
    assert time.monotonic() - start < 60
    assert result.returncode != 0
    if scenario == "raise":
        assert "rank 1 fails on purpose" in result.stderr


@pytest.mark.parametrize(("first", "rest"), [(2, 1), (1, 2)])
def test_resume_across_world_sizes(first, rest, tmp_path):
    """An epoch at one world size, checkpointed, then one more at the other,
    equals two epochs at one rank."""
    runs = {1: alone, 2: mpirun}
    for step, world in (("resume-first", first), ("resume-rest", rest)):
        result = runs[world](str(WORKER), step, str(tmp_path))
        assert result.returncode == 0, result.stderr[-3000:]
    resumed = dict(np.load(tmp_path / "rank0.npz"))
    (tmp_path / "straight").mkdir()
    result = alone(str(WORKER), "mlp", str(tmp_path / "straight"))
    assert result.returncode == 0, result.stderr
    straight = dict(np.load(tmp_path / "straight" / "rank0.npz"))
    for name in ("h.weight", "h.bias", "o.weight", "o.bias"):
        np.testing.assert_allclose(resumed[name], straight[name], rtol=0, atol=1e-6)


def verjus_train(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "verjus", "train", *args]
    return subprocess.run(
        command, env=_env(), capture_output=True, text=True, timeout=300, check=False
    )


def final_accuracy(result: subprocess.CompletedProcess) -> float:
    return float(result.stdout.split("final test accuracy: ")[1].split()[0])


def test_cli_trains_on_two_local_ranks(fashion_dir, tmp_path):
    """``verjus train --nproc 2``: one set of epoch lines, one run folder, and
    the accuracy of the 1-process run."""
    common = [str(NETS / "fashion_mlp.json"), "--data", str(fashion_dir), "--epochs", "1"]
    two = verjus_train(*common, "--no-progress", "--nproc", "2", "--out", str(tmp_path / "two"))
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("epoch 1/1") == 1
    assert "2 ranks" in two.stdout
    one = verjus_train(*common, "--no-progress", "--out", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr[-3000:]
    assert abs(final_accuracy(two) - final_accuracy(one)) < 0.02
    assert (tmp_path / "two" / "metrics.jsonl").read_text().count("\n") == 1
