"""Checkpoints: network folders, exact resume in a new process, atomic saves
that survive SIGKILL, untrusted files, and weights PyTorch reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import NETS

import verjus
from verjus import nn

DROPOUT_MLP = {
    "inputs": [{"name": "x", "shape": [20]}],
    "layers": [
        {"name": "fc1", "type": "Linear", "out_features": 32},
        {"name": "act", "type": "ReLU"},
        {"name": "drop", "type": "Dropout", "p": 0.4},
        {"name": "fc2", "type": "Linear", "out_features": 4},
    ],
}

# Trains the dropout MLP with Adam on a fixed batch stream: `steps` steps from
# scratch or from a checkpoint, optionally saving one, then prints the weights.
TRAIN = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import verjus
    mode, folder, start, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if mode == "resume":
        trainer = verjus.Trainer.resume(folder)
    else:
        net = verjus.Network.from_def(json.loads(sys.argv[5]), seed=3)
        trainer = verjus.Trainer(net, verjus.optim.Adam(lr=0.01), "cross_entropy")
    losses = []
    for i in range(start, stop):
        rng = np.random.default_rng(i)
        n = (8, 5)[i % 2]
        x = rng.standard_normal((n, 20), dtype=np.float32)
        y = rng.integers(0, 4, n)
        losses.append(trainer.train_minibatch(x, y)[0])
    if mode == "save":
        trainer.save_checkpoint(folder)
    state = {k: v.tolist() for k, v in trainer.network.state_dict().items()}
    print(json.dumps({"losses": losses, "state": state, "step": trainer.step}))
    """
)


def run_train(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", TRAIN, *args], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_resume_in_a_new_process_is_bit_for_bit(tmp_path: Path) -> None:
    folder = str(tmp_path / "ckpt")
    definition = json.dumps(DROPOUT_MLP)
    straight = run_train("plain", folder, "0", "12", definition)
    first = run_train("save", folder, "0", "5", definition)
    resumed = run_train("resume", folder, "5", "12")
    assert resumed["step"] == straight["step"] == 12
    assert first["losses"] + resumed["losses"] == straight["losses"]
    assert resumed["state"] == straight["state"]
    names = sorted(p.name for p in Path(folder).iterdir())
    assert names == [
        "checkpoint.json",
        "network.json",
        "solver.safetensors",
        "trainer.json",
        "weights.safetensors",
    ]


def test_network_save_load_round_trip(tmp_path: Path) -> None:
    net = verjus.Network.from_def(NETS / "fashion_cnn.json", seed=5)
    net.save(tmp_path / "net")
    (tmp_path / "net" / "notes.txt").write_text("mine")
    net.save(tmp_path / "net")
    loaded = verjus.Network.load(tmp_path / "net")
    written = json.loads((NETS / "fashion_cnn.json").read_text())
    assert loaded.to_def() == net.to_def() == {"format_version": 1, **written}
    x = np.random.default_rng(0).random((2, 1, 28, 28), dtype=np.float32)
    np.testing.assert_array_equal(loaded(x), net(x))
    assert (tmp_path / "net" / "notes.txt").read_text() == "mine"
    with pytest.raises(OSError, match=r"trainer\.json"):
        verjus.Trainer.resume(tmp_path / "net")


def test_a_second_writer_to_a_folder_gets_a_clear_error(tmp_path: Path) -> None:
    fcntl = pytest.importorskip("fcntl", reason="advisory locks are POSIX")
    net = verjus.Network.from_def(DROPOUT_MLP, seed=1)
    net.save(tmp_path / "net")
    before = (tmp_path / "net" / "weights.safetensors").read_bytes()
    # Another process is in the middle of saving there: it holds the lock.
    with open(tmp_path / ".net.lock", "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        other = verjus.Network.from_def(DROPOUT_MLP, seed=2)
        with pytest.raises(OSError, match=r"net.*another save to this folder is in progress"):
            other.save(tmp_path / "net")
    assert (tmp_path / "net" / "weights.safetensors").read_bytes() == before
    other.save(tmp_path / "net")
    assert (tmp_path / "net" / "weights.safetensors").read_bytes() != before


def test_broken_folders_raise_naming_the_file(tmp_path: Path) -> None:
    net = verjus.Network.from_def(DROPOUT_MLP)
    folder = tmp_path / "net"
    net.save(folder)
    weights = folder / "weights.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x10
    weights.write_bytes(bytes(data))
    with pytest.raises(OSError, match=r"weights\.safetensors.*CRC-32"):
        verjus.Network.load(folder)
    with pytest.raises(OSError, match="missing"):
        verjus.Network.load(tmp_path / "missing")
    # Without a manifest the parsers themselves refuse the damage.
    (folder / "checkpoint.json").unlink()
    weights.write_bytes(b"\xff" * 8 + b"{}")
    with pytest.raises(OSError, match=r"weights\.safetensors"):
        verjus.Network.load(folder)
    (folder / "network.json").write_text('{"inputs": [], "layers": [{"type": "Warp"}]}')
    with pytest.raises(ValueError, match=r"network\.json"):
        verjus.Network.load(folder)


BIG = {
    "inputs": [{"name": "x", "shape": [512]}],
    "layers": [
        {"name": "fc1", "type": "Linear", "out_features": 2048},
        {"name": "fc2", "type": "Linear", "out_features": 512},
    ],
}

# Trains BIG one step at a time and saves a checkpoint after each, forever.
SAVE_LOOP = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import verjus
    net = verjus.Network.from_def(json.loads(sys.argv[2]))
    trainer = verjus.Trainer(net, verjus.optim.Adam(lr=0.01), "mse")
    x = np.ones((2, 512), np.float32)
    print("ready", flush=True)
    while True:
        trainer.train_minibatch(x, x)
        trainer.save_checkpoint(sys.argv[1])
    """
)


def test_sigkill_during_saves_leaves_a_complete_checkpoint(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    rng = np.random.default_rng(7)
    x = np.ones((2, 512), np.float32)
    for _ in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-c", SAVE_LOOP, str(folder), json.dumps(BIG)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        time.sleep(0.2 + float(rng.random()) * 0.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        survivor = verjus.Trainer.resume(folder)
        # A consistent checkpoint: its weights are those of its own step count
        # (the same run, replayed here).
        replay = verjus.Trainer(verjus.Network.from_def(BIG), verjus.optim.Adam(lr=0.01), "mse")
        for _ in range(survivor.step):
            replay.train_minibatch(x, x)
        expected, actual = replay.network.state_dict(), survivor.network.state_dict()
        assert all(np.array_equal(expected[k], actual[k]) for k in expected)
        (folder / "metrics.jsonl").write_text("kept\n")
    assert (folder / "metrics.jsonl").read_text() == "kept\n"
    stale = [p.name for p in tmp_path.iterdir() if p.name not in ("run", ".run.lock")]
    assert len(stale) <= 1, stale  # at most the killed save's temporary folder


def test_weights_load_into_pytorch(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    net = verjus.Network.from_def(NETS / "fashion_cnn.json", seed=2)
    net.save(tmp_path / "cnn")

    class FashionCnn(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 32, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1)
            self.fc1 = torch.nn.Linear(64 * 7 * 7, 128)
            self.fc2 = torch.nn.Linear(128, 10)

        def forward(self, x):
            f = torch.nn.functional
            x = f.max_pool2d(f.relu(self.conv1(x)), 2)
            x = f.max_pool2d(f.relu(self.conv2(x)), 2)
            return self.fc2(f.relu(self.fc1(x.flatten(1))))

    model = FashionCnn()
    model.load_state_dict(load_file(tmp_path / "cnn" / "weights.safetensors"), strict=True)
    x = np.random.default_rng(1).random((4, 1, 28, 28), dtype=np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(net(x), expected, atol=1e-5, rtol=1e-5)


def test_builder_definitions_round_trip(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(3), input_shape=(5,))
    net = verjus.Network.from_def(model)
    assert net.to_def() == model.to_def()
    net.save(tmp_path / "m")
    assert verjus.Network.load(tmp_path / "m").to_def() == net.to_def()


def test_weights_follow_pytorchs_layout() -> None:
    """Without torch: the saved CNN, run by hand in numpy with PyTorch's
    conventions (Conv2d weight [out, in, kh, kw], Linear weight [out, in], NCHW
    flattening), gives verjus' outputs."""
    from safetensors.numpy import load_file

    net = verjus.Network.from_def(NETS / "fashion_cnn.json", seed=4)
    x = np.random.default_rng(2).random((2, 1, 28, 28), dtype=np.float32)
    with tempfile.TemporaryDirectory() as folder:
        net.save(folder)
        w = load_file(str(Path(folder) / "weights.safetensors"))

    def conv_relu_pool(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
        n, c, h, wd = x.shape
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        patches = np.stack(
            [padded[:, :, i : i + h, j : j + wd] for i in range(3) for j in range(3)], axis=2
        )  # [n, c, 9, h, w]
        out = np.einsum("nckhw,ock->nohw", patches, weight.reshape(weight.shape[0], c, 9))
        out = np.maximum(out + bias[None, :, None, None], 0)
        return out.reshape(n, -1, h // 2, 2, wd // 2, 2).max(axis=(3, 5))

    h = conv_relu_pool(x, w["conv1.weight"], w["conv1.bias"])
    h = conv_relu_pool(h, w["conv2.weight"], w["conv2.bias"])
    h = np.maximum(h.reshape(2, -1) @ w["fc1.weight"].T + w["fc1.bias"], 0)
    expected = h @ w["fc2.weight"].T + w["fc2.bias"]
    np.testing.assert_allclose(net(x), expected, atol=1e-4, rtol=1e-4)


def test_atomic_text_files_get_the_mode_of_any_new_file(tmp_path: Path) -> None:
    # metrics.jsonl and curves.png were written 0600 (tempfile.mkstemp's mode).
    from verjus._files import write_text_atomic

    old = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "metrics.jsonl", "{}\n")
    finally:
        os.umask(old)
    assert (tmp_path / "metrics.jsonl").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.jsonl"]


def test_atomic_writes_go_through_links_and_keep_permissions(tmp_path: Path) -> None:
    # Saving to a link replaced the link by a plain file, and a private (0600)
    # file became 0644 when saved over.
    from verjus._files import write_text_atomic

    (tmp_path / "store").mkdir()
    real = tmp_path / "store" / "def.json"
    real.write_text("old")
    real.chmod(0o600)
    link = tmp_path / "def.json"
    link.symlink_to("store/def.json")
    write_text_atomic(link, "new")
    assert link.is_symlink()
    assert real.read_text() == "new"
    assert real.stat().st_mode & 0o777 == 0o600

    net = verjus.Network.from_def(NETS / "fashion_mlp.json")
    weights = tmp_path / "store" / "w.safetensors"
    net.save_weights(weights)
    weights.chmod(0o600)
    (tmp_path / "w.safetensors").symlink_to("store/w.safetensors")
    net.save_weights(tmp_path / "w.safetensors")
    assert (tmp_path / "w.safetensors").is_symlink()
    assert weights.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["def.json", "w.safetensors"]
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OSError, match=r"loop of symbolic links"):
        write_text_atomic(tmp_path / "a", "x")
    assert (tmp_path / "a").is_symlink()
