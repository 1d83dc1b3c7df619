"""``verjus returnn CONFIG``: RETURNN config files run on verjus as written.

The configs here are small ones of our own (RETURNN's ``Task12AXDataset``, a
Conv1d tagger written against ``returnn.frontend``); RETURNN's own
``demos/demo-rf.config`` runs unchanged from its source distribution (fetched
as the rf test suite fetches it). A run killed with SIGKILL in the middle of
an epoch and started again ends at the weights of an uninterrupted run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from returnn_suite.sources import returnn_tests, returnn_version

pytest.importorskip("returnn", reason="RETURNN is not installed (pip install verjus[returnn])")

CONFIG = """#!returnn.py
from returnn.tensor import Tensor, Dim, batch_dim, TensorDict
import returnn.frontend as rf

backend = "torch"
task = "train"
train = {"class": "Task12AXDataset", "num_seqs": 150}
dev = {"class": "Task12AXDataset", "num_seqs": 30, "fixed_random_seed": 1}
time_dim = Dim(None, name="time")
in_dim = Dim(9, name="in")
out_dim = Dim(2, name="out")
extern_data = {
    "data": {"dims": (batch_dim, time_dim, in_dim), "dtype": "float32"},
    "classes": {"dims": (batch_dim, time_dim), "sparse_dim": out_dim, "dtype": "int32",
                "available_for_inference": False},
}
batching = "random"
batch_size = 2000
max_seqs = 10


class Model(rf.Module):
    def __init__(self):
        super().__init__()
        self.conv = rf.Conv1d(in_dim, Dim(24, name="hidden"), 5, padding="same")
        self.out = rf.Linear(self.conv.out_dim, out_dim)

    def __call__(self, x, *, spatial_dim):
        x, _ = self.conv(x, in_spatial_dim=spatial_dim)
        return self.out(rf.dropout(rf.relu(x), 0.1, axis=x.feature_dim))


def get_model(*, epoch, step, **_kwargs):
    return Model()


def train_step(*, model, extern_data, **_kwargs):
    logits = model(extern_data["data"], spatial_dim=time_dim)
    targets = extern_data["classes"]
    loss = rf.cross_entropy(estimated=logits, estimated_type="logits", target=targets, axis=out_dim)
    loss.mark_as_loss(name="ce")
    (rf.reduce_argmax(logits, axis=out_dim) != targets).mark_as_loss(name="fer", as_error=True)


def forward_step(*, model, extern_data):
    out = model(extern_data["data"], spatial_dim=time_dim)
    out.mark_as_default_output(shape=(batch_dim, time_dim, out_dim))


optimizer = {"class": "adam", "epsilon": 1e-8}
learning_rate = 0.01
learning_rate_control = "newbob"
learning_rate_decay = 0.9
newbob_relative_error_threshold = 0.0
num_epochs = 3
"""


def write_config(folder: Path, text: str = CONFIG, name: str = "setup.config") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def run_args(config: Path, folder: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "verjus.returnn", str(config),
        "++model", str(folder / "model"), "++learning_rate_file", str(folder / "lr"), *extra,
    ]  # fmt: skip


def verjus_returnn(config: Path, folder: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        run_args(config, folder, *extra), capture_output=True, text=True, timeout=600
    )


def weights(path: Path) -> dict[str, np.ndarray]:
    import verjus.rf as rf

    return rf.read_state(path)


def learning_rates(path: Path) -> dict:
    """The epochs of a learning-rate file, read by RETURNN's own control."""
    from returnn.config import Config
    from returnn.learning_rate_control import NewbobRelative

    config = Config({"learning_rate_file": str(path), "learning_rate": 0.01})
    return NewbobRelative.load_initial_from_config(config).epoch_data


def test_a_config_trains_with_returnns_logs_and_files(tmp_path):
    config = write_config(tmp_path)
    done = verjus_returnn(config, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Epoch 3 evaluation: dev: ce " in done.stdout
    assert "Epoch 1: Total train loss: ce " in done.stdout
    epochs = learning_rates(tmp_path / "lr")
    assert sorted(epochs) == [1, 2, 3]
    assert "dev_loss_fer" in epochs[3].error
    for epoch in (1, 2, 3):
        assert (tmp_path / f"model.{epoch:03d}.safetensors").is_file()


def test_forward_task_writes_the_outputs(tmp_path):
    config = write_config(tmp_path)
    assert verjus_returnn(config, tmp_path, "++num_epochs", "1").returncode == 0
    out = tmp_path / "out.npz"
    done = verjus_returnn(
        config, tmp_path, "++task", "forward", "++forward_data",
        "{'class': 'Task12AXDataset', 'num_seqs': 4}", "++output_file", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    with np.load(out) as saved:
        assert sorted(saved.files) == [f"{i}/output" for i in range(4)]
        assert all(saved[k].shape[1] == 2 for k in saved.files)


def test_forward_writes_returnns_hdf(tmp_path):
    pytest.importorskip("h5py", reason="h5py is not installed (pip install 'verjus[returnn]')")
    from returnn.datasets.hdf import HDFDataset

    config = write_config(tmp_path)
    assert verjus_returnn(config, tmp_path, "++num_epochs", "1").returncode == 0
    out = tmp_path / "out.hdf"
    done = verjus_returnn(
        config, tmp_path, "++task", "forward", "++forward_data",
        "{'class': 'Task12AXDataset', 'num_seqs': 3}", "++output_file", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    data = HDFDataset(files=[str(out)])  # RETURNN reads it back
    data.init_seq_order(epoch=1)
    data.load_seqs(0, 3)
    assert [data.get_data(i, "data").shape[1] for i in range(3)] == [2, 2, 2]


def test_sigkill_mid_epoch_then_rerun_equals_an_uninterrupted_run(tmp_path):
    # Epochs long enough (about 100 steps) to be killed in the middle of one.
    config = write_config(
        tmp_path / "config", CONFIG.replace('"num_seqs": 150', '"num_seqs": 1000')
    )
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert verjus_returnn(config, whole).returncode == 0
    proc = subprocess.Popen(
        run_args(config, killed), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("start epoch 2 "):
            time.sleep(0.4)
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert not (killed / "model.002.safetensors").exists(), "killed too late: epoch 2 finished"
    again = verjus_returnn(config, killed)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Resuming after epoch 1" in again.stdout
    a, b = weights(whole / "model.003.safetensors"), weights(killed / "model.003.safetensors")
    assert a.keys() == b.keys()
    for name in a:  # bit for bit: every epoch's data order and seeds depend on the epoch only
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    lr_whole, lr_killed = learning_rates(whole / "lr"), learning_rates(killed / "lr")
    assert sorted(lr_whole) == sorted(lr_killed) == [1, 2, 3]
    for epoch, data in lr_whole.items():
        assert lr_killed[epoch].learning_rate == data.learning_rate
        assert lr_killed[epoch].error.keys() == data.error.keys()
        for key, value in data.error.items():
            assert lr_killed[epoch].error[key] == value


def test_returnns_demo_rf_config_runs_unchanged(tmp_path):
    demos = returnn_tests(returnn_version()).parent / "demos"
    config = tmp_path / "demo-rf.config"
    config.write_text((demos / "demo-rf.config").read_text())
    done = subprocess.run(
        run_args(config, tmp_path), capture_output=True, text=True, timeout=900, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    last = [line for line in done.stdout.splitlines() if line.startswith("Epoch 5 evaluation")]
    fer = float(last[0].split("fer ")[1])
    assert fer < 0.03  # RETURNN on its torch backend: 0.015 on this data
    assert "torch_log_memory_usage" in done.stderr  # named as not honoured


BAD_CONFIGS = {
    "syntax": ("#!returnn.py\ntrain = {\n", "setup.config, line"),
    "not_python": ("train = {\n}\n", "setup.config: not a RETURNN config"),
    "no_train_step": (CONFIG.replace("def train_step(", "def other_step("), "no 'train_step'"),
    "optimizer": (
        CONFIG.replace('{"class": "adam", "epsilon": 1e-8}', '{"class": "adamax"}'),
        "unknown class 'adamax'",
    ),
    "extern_data": (
        CONFIG.replace('in_dim = Dim(9, name="in")', 'in_dim = Dim(8, name="in")'),
        "extern_data['data']: dim in has size 8, the dataset gives 9",
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD_CONFIGS))
def test_bad_configs_are_one_clear_error(tmp_path, kind):
    text, message = BAD_CONFIGS[kind]
    done = verjus_returnn(write_config(tmp_path, text), tmp_path)
    assert done.returncode == 1
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.glob("model.*"))


def test_without_returnn_says_how_to_install_it(tmp_path):
    code = (
        "import sys; sys.modules['returnn'] = None; "
        "from verjus.cli import main; sys.exit(main(['returnn', 'x.config']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "pip install 'verjus[returnn]'" in done.stderr
