"""The ``verjus`` command end to end, on a small generated data set."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NETS

import verjus

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verjus", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.fixture(scope="module")
def trained_run(fashion_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("runs") / "mlp"
    result = run_cli(
        "train", str(NETS / "fashion_mlp.json"), "--data", str(fashion_dir), "--epochs", "3",
        "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "32", "--device", "cpu",
        "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out, result.stdout


def test_train_prints_each_epoch_and_the_final_accuracy(trained_run):
    _, stdout = trained_run
    epochs = re.findall(r"epoch (\d)/3: train loss ([\d.]+), test loss ([\d.]+), "
                        r"test accuracy ([\d.]+)", stdout)  # fmt: skip
    assert [e[0] for e in epochs] == ["1", "2", "3"]
    assert float(epochs[-1][1]) < float(epochs[0][1])
    final = re.search(r"final test accuracy: ([\d.]+)", stdout)
    assert final is not None
    assert float(final.group(1)) > 0.5  # ten classes: chance is 0.1
    assert "plot: " in stdout


def test_train_writes_a_complete_run_folder(trained_run):
    out, _ = trained_run
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "checkpoint.json",
        "curves.png",
        "metrics.jsonl",
        "network.json",
        "run.json",
        "solver.safetensors",
        "trainer.json",
        "weights.safetensors",
    ]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    assert {"train_loss", "test_loss", "test_accuracy", "seconds", "lr"} <= set(rows[0])
    assert (out / "curves.png").read_bytes().startswith(PNG_MAGIC)
    assert (out / "curves.png").stat().st_size > 5000
    net = verjus.Network.load(out)
    assert net.outputs == [("logits", (10,))]
    # The run folder is a training checkpoint: it resumes where the run stopped.
    trainer = verjus.Trainer.resume(out)
    assert trainer.step == 3 * 16  # 512 synthetic images in batches of 32
    assert type(trainer.optimizer) is verjus.optim.Adam
    assert trainer.optimizer.lr == pytest.approx(1e-3)


def test_predict_reports_accuracy_and_a_confusion_matrix(trained_run, fashion_dir):
    out, stdout = trained_run
    result = run_cli("predict", str(NETS / "fashion_mlp.json"), str(out / "weights.safetensors"),
                     "--data", str(fashion_dir), "--split", "test")  # fmt: skip
    assert result.returncode == 0, result.stderr
    accuracy = float(re.search(r"accuracy ([\d.]+)", result.stdout).group(1))
    final = float(re.search(r"final test accuracy: ([\d.]+)", stdout).group(1))
    assert accuracy == pytest.approx(final, abs=1e-4)
    rows = [line for line in result.stdout.splitlines() if line.startswith(("T-shirt", "Trouser"))]
    assert len(rows) == 2
    matrix_total = sum(
        int(v) for line in result.stdout.splitlines()[3:] for v in line.split()[-10:] if v.isdigit()
    )
    assert matrix_total == 128
    # Whole class names head the columns, none cut short.
    header = result.stdout.splitlines()[2]
    for name in verjus.data.FASHION_MNIST_CLASSES:
        assert f"  {name}" in header, header
    # A run folder works as the weights argument too, and alone.
    alone = run_cli("predict", str(out), "--data", str(fashion_dir))
    assert alone.returncode == 0, alone.stderr
    assert f"accuracy {accuracy:.4f}" in alone.stdout
    definition_alone = run_cli(
        "predict", str(NETS / "fashion_mlp.json"), "--data", str(fashion_dir)
    )
    assert definition_alone.returncode == 1
    assert "needs the weights too" in definition_alone.stderr
    again = run_cli("predict", str(NETS / "fashion_mlp.json"), str(out), "--data", str(fashion_dir),
                    "--device", "cpu")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert f"accuracy {accuracy:.4f}" in again.stdout


def test_info_prints_the_summary():
    result = run_cli("info", str(NETS / "fashion_cnn.json"))
    assert result.returncode == 0, result.stderr
    assert "conv2" in result.stdout
    assert "parameters: 421,642" in result.stdout


def test_errors_are_one_line_and_exit_1(tmp_path, fashion_dir):
    missing = run_cli("info", str(tmp_path / "nope.json"))
    assert missing.returncode == 1
    assert "nope.json" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"inputs": [{"name": "x", "shape": [3]}],
                               "layers": [{"name": "c", "type": "Conv2d", "out_channels": 2,
                                           "kernel": 3}]}))  # fmt: skip
    result = run_cli("info", str(bad))
    assert result.returncode == 1
    assert '"c"' in result.stderr
    no_data = run_cli("train", str(NETS / "fashion_mlp.json"), "--data", str(tmp_path),
                      "--out", str(tmp_path / "run"))  # fmt: skip
    assert no_data.returncode == 1
    assert "apt-get install dataset-fashion-mnist" in no_data.stderr
    assert "Traceback" not in no_data.stderr


def test_an_unwritable_run_folder_fails_before_training(tmp_path, fashion_dir):
    # --out was first written after the first epoch, so a typo cost an epoch.
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    result = run_cli("train", str(NETS / "fashion_mlp.json"), "--data", str(fashion_dir),
                     "--out", str(taken), "--no-progress")  # fmt: skip
    assert result.returncode == 1
    assert "taken" in result.stderr
    assert "Traceback" not in result.stderr
    assert "epoch 1/" not in result.stdout
    assert taken.read_text() == "not a folder"


@pytest.mark.skipif(verjus.cuda.is_available(), reason="CUDA works here")
def test_a_missing_gpu_is_a_one_line_error(tmp_path, fashion_dir):
    net = str(NETS / "fashion_mlp.json")
    commands = [
        ("train", net, "--data", str(fashion_dir), "--device", "cuda",
         "--out", str(tmp_path / "r")),
        ("predict", net, str(tmp_path / "w.safetensors"), "--data", str(fashion_dir),
         "--device", "cuda:1"),
    ]  # fmt: skip
    for args in commands:
        result = run_cli(*args)
        assert result.returncode == 1, args
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("verjus: error: device cuda:"), lines[0]
        assert ".so" in lines[0] or "driver" in lines[0], lines[0]
    assert not (tmp_path / "r").exists()
    bad = run_cli("train", net, "--data", str(fashion_dir), "--device", "gpu")
    assert bad.returncode == 1
    assert '"gpu"' in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_console_script_is_installed():
    script = Path(sys.executable).parent / "verjus"
    assert script.exists()
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=False)
    assert result.returncode == 0
    assert verjus.__version__ in result.stdout


def train_into(out: Path, fashion_dir: Path, *extra: str, net: str = "fashion_mlp.json"):
    return run_cli("train", str(NETS / net), "--data", str(fashion_dir), "--epochs", "1",
                   "--batch-size", "64", "--no-progress", "--out", str(out), *extra)  # fmt: skip


def test_out_must_be_new_empty_or_a_run_given_overwrite(tmp_path, fashion_dir):
    # A run used to replace whatever folder --out named, subfolders and all.
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    refused = train_into(project, fashion_dir)
    assert refused.returncode == 1
    assert "not a verjus run folder (it holds notes.txt)" in refused.stderr
    assert sorted(p.name for p in project.iterdir()) == ["notes.txt"]

    run = tmp_path / "run"
    assert train_into(run, fashion_dir).returncode == 0
    weights = (run / "weights.safetensors").read_bytes()
    again = train_into(run, fashion_dir, "--seed", "5")
    assert again.returncode == 1
    assert "already holds a run; pass --resume to continue it, --overwrite" in again.stderr
    assert (run / "weights.safetensors").read_bytes() == weights
    replaced = train_into(run, fashion_dir, "--seed", "5", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert (run / "weights.safetensors").read_bytes() != weights


def test_a_network_that_does_not_fit_the_data_writes_nothing(tmp_path, fashion_dir):
    color = tmp_path / "color.json"
    color.write_text(json.dumps({
        "inputs": [{"name": "image", "shape": [3, 28, 28]}],
        "layers": [{"name": "flat", "type": "Flatten"},
                   {"name": "fc", "type": "Linear", "out_features": 10}]}))  # fmt: skip
    run = tmp_path / "run"
    result = run_cli("train", str(color), "--data", str(fashion_dir), "--out", str(run))
    assert result.returncode == 1
    assert "[3, 28, 28]" in result.stderr
    assert not run.exists()


def test_a_second_train_to_the_same_folder_is_refused(tmp_path, fashion_dir):
    fcntl = pytest.importorskip("fcntl", reason="advisory locks are POSIX")
    run = tmp_path / "run"
    with open(tmp_path / ".run.run.lock", "a") as lock:  # a first train holds the folder
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = train_into(run, fashion_dir)
    assert result.returncode == 1
    assert "another verjus train is writing to it" in result.stderr
    assert not run.exists()


def test_predict_checks_a_run_folder_against_its_manifest_and_definition(trained_run, fashion_dir,
                                                                         tmp_path):  # fmt: skip
    out, _ = trained_run
    sigmoid = tmp_path / "sigmoid.json"
    sigmoid.write_text((NETS / "fashion_mlp.json").read_text().replace('"ReLU"', '"Sigmoid"'))
    other = run_cli("predict", str(sigmoid), str(out), "--data", str(fashion_dir))
    assert other.returncode == 1
    assert "network.json is not the network of" in other.stderr
    edited = tmp_path / "edited"
    edited.mkdir()
    for f in out.iterdir():
        (edited / f.name).write_bytes(f.read_bytes())
    weights = bytearray((edited / "weights.safetensors").read_bytes())
    weights[-4:] = b"\x00\x00\x48\x42"  # the last float becomes 50.0
    (edited / "weights.safetensors").write_bytes(bytes(weights))
    result = run_cli("predict", str(NETS / "fashion_mlp.json"), str(edited),
                     "--data", str(fashion_dir))  # fmt: skip
    assert result.returncode == 1
    assert "CRC-32" in result.stderr


def test_bad_numbers_and_settings_are_argument_errors(tmp_path, fashion_dir):
    net = str(NETS / "fashion_mlp.json")
    for args in (("--batch-size", "18446744073709551616"), ("--epochs", "-1"),
                 ("--seed", "-1"), ("--momentum", "0.9")):  # fmt: skip
        result = run_cli("train", net, "--data", str(fashion_dir), "--out", str(tmp_path / "r"),
                         *args)  # fmt: skip
        assert result.returncode == 2, args
        assert "Traceback" not in result.stderr
        assert args[0] in result.stderr
    assert not (tmp_path / "r").exists()


def test_a_plot_that_cannot_be_drawn_does_not_stop_training(tmp_path, fashion_dir):
    result = run_cli("train", str(NETS / "fashion_mlp.json"), "--data", str(fashion_dir),
                     "--epochs", "2", "--batch-size", "64", "--no-progress",
                     "--out", str(tmp_path / "run"),
                     env={"MPLBACKEND": "no-such-backend"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "epoch 2/2" in result.stdout
    assert result.stderr.count("warning: no curves.png") == 1


def test_predict_into_a_closed_pipe_stops_quietly(trained_run, fashion_dir):
    """``verjus predict ... | head -1``: the reader leaves before the output is
    written; the command stops as Unix tools do, without a traceback."""
    out, _ = trained_run
    proc = subprocess.Popen(
        [sys.executable, "-m", "verjus", "predict", str(NETS / "fashion_mlp.json"), str(out),
         "--data", str(fashion_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=300) == 141, stderr
    assert stderr == ""
