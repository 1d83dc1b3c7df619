"""One rank of the data-parallel tests (tests/test_distributed_mpi.py), started
by ``mpirun -np W`` or alone (W = 1, the reference run).

``python distributed_worker.py SCENARIO OUT`` trains the scenario's model and
writes ``OUT/rank<R>.npz`` with the final parameters and the per-epoch losses.
Scenarios that fail on purpose (``kill``, ``raise``, ``nan``) end otherwise.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np

import verjus
from verjus import distributed, optim, rf

MLP = {
    "format_version": 2,
    "inputs": [{"name": "x", "shape": [8]}],
    "layers": [
        {"name": "h", "type": "Linear", "out_features": 16},
        {"name": "r", "type": "ReLU"},
        {"name": "o", "type": "Linear", "out_features": 3},
    ],
    "outputs": [{"name": "o", "from": "o"}],
}
CNN = {
    "format_version": 2,
    "inputs": [{"name": "image", "shape": [1, 8, 8]}],
    "layers": [
        {"name": "conv", "type": "Conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
        {"name": "relu", "type": "ReLU"},
        {"name": "pool", "type": "MaxPool2d", "kernel": 2},
        {"name": "flatten", "type": "Flatten"},
        {"name": "fc", "type": "Linear", "out_features": 3},
    ],
    "outputs": [{"name": "logits", "from": "fc"}],
}
LSTM = {
    "format_version": 3,
    "inputs": [{"name": "chars", "shape": [None], "dtype": "int32"}],
    "layers": [
        {"name": "embed", "type": "Embedding", "vocab": 7, "dim": 5},
        {"name": "rnn", "type": "LSTM", "hidden": 6},
        {"name": "fc", "type": "Linear", "out_features": 7},
    ],
    "outputs": [{"name": "logits", "from": "fc"}],
}


def main(scenario: str, out: Path) -> None:
    comm = distributed.init()
    rank = 0 if comm is None else comm.rank
    rng = np.random.default_rng(0)
    if scenario in ("mlp", "tail", "kill", "raise", "nan", "resume-first", "resume-rest"):
        x = rng.normal(size=(37, 8)).astype(np.float32)
        y = rng.integers(0, 3, size=37)
        # Another seed on each rank: the trainer starts every rank from rank 0's.
        net = verjus.Network.from_def(MLP, seed=rank + 1)
        batch = 9 if scenario == "tail" else 8  # 37 = 4 * 9 + 1: a rank without rows
        if scenario == "resume-rest":
            trainer = verjus.Trainer.resume(out / "checkpoint")
            net = trainer.network
        else:
            trainer = verjus.Trainer(net, optim.Adam(lr=0.01), "cross_entropy")
        if scenario == "nan" and rank == 1:
            x[:] = np.nan  # every row of rank 1's share
        hooks = {"kill": _kill_rank_1, "raise": _raise_on_rank_1}.get(scenario)
        try:
            history = trainer.fit(
                x,
                y,
                epochs=1 if scenario.startswith("resume") else 2,
                batch_size=batch,
                seed=1 if scenario == "resume-rest" else 0,  # its epoch 1 is the run's 2
                validation_data=(x[:20], y[:20]),
                progress=False,
                verbose=0,
                callbacks=[hooks] if hooks else [],
            )
        except ValueError as e:
            (out / f"error{rank}.txt").write_text(str(e))
            np.savez(out / f"rank{rank}.npz", **net.state_dict())
            return
        if scenario == "resume-first":
            trainer.save_checkpoint(out / "checkpoint")
    elif scenario == "cnn":
        x = rng.normal(size=(22, 1, 8, 8)).astype(np.float32)
        y = rng.integers(0, 3, size=22)
        net = verjus.Network.from_def(CNN, seed=3)
        trainer = verjus.Trainer(net, optim.SGD(lr=0.05, momentum=0.9), "cross_entropy")
        history = trainer.fit(x, y, epochs=2, batch_size=6, progress=False, verbose=0)
    elif scenario == "lstm":
        # Sequences of different lengths: the ranks hold different frame counts.
        lengths = rng.integers(1, 9, size=13)
        xs = [rng.integers(0, 7, size=n).astype(np.int32) for n in lengths]
        ys = [rng.integers(0, 7, size=n).astype(np.int32) for n in lengths]
        net = verjus.Network.from_def(LSTM, seed=4)
        trainer = verjus.Trainer(net, optim.Adam(lr=0.02), "cross_entropy")
        history = trainer.fit(
            xs, ys, epochs=2, batch_size=5, validation_data=(xs, ys), progress=False, verbose=0
        )
    elif scenario in ("rf-grad", "rf-param"):
        _train_rf(out, rank, rng, param_sync=scenario == "rf-param")
        return
    elif scenario in ("engine-grad", "engine-param"):
        _train_engine(out, rank, scenario == "engine-param")
        return
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    losses = [e["train_loss"] for e in history.epochs]
    val = [e.get("val_loss", 0.0) for e in history.epochs]
    np.savez(
        out / f"rank{rank}.npz", **net.state_dict(), losses=np.array(losses), val=np.array(val)
    )


def _train_rf(out: Path, rank: int, rng: np.random.Generator, *, param_sync: bool) -> None:
    """A two-layer RF model with SGD on each rank's rows of every global batch
    (the loss summed over the rows and divided by the global batch's size, so
    the averaged gradient is the global batch's)."""
    rf.set_random_seed(rank + 1)  # different initial values: replicate makes them equal
    in_dim, hid, classes = rf.Dim(8, name="in"), rf.Dim(16, name="hid"), rf.Dim(3, name="cls")
    model = rf.Sequential(rf.Linear(in_dim, hid), rf.relu, rf.Linear(hid, classes))
    opt = optim.SGD(model.parameters(), lr=0.1)
    if param_sync and distributed.communicator() is not None:
        opt.replicate(param_sync_step=1)
    world = 1 if distributed.communicator() is None else distributed.communicator().world
    x = rng.normal(size=(32, 8)).astype(np.float32)
    y = rng.integers(0, 3, size=32).astype(np.int32)
    for step in range(4):
        rows = slice(step * 8 + rank * 8 // world, step * 8 + (rank + 1) * 8 // world)
        batch = rf.Dim(rows.stop - rows.start, name="batch")
        xb = rf.convert_to_tensor(x[rows], dims=[batch, in_dim])
        yb = rf.convert_to_tensor(y[rows], dims=[batch], sparse_dim=classes)
        loss = rf.cross_entropy(
            estimated=model(xb), target=yb, axis=classes, estimated_type="logits"
        )
        # The mean over this rank's rows; averaging over the ranks gives the
        # global batch's mean gradient (the rows split evenly).
        (rf.reduce_sum(loss, axis=batch) / float(rows.stop - rows.start)).backward()
        opt.step()
        opt.zero_grad()
    state = {f"p{i}": p.numpy() for i, p in enumerate(model.parameters())}
    np.savez(out / f"rank{rank}.npz", **state)


def _train_engine(out: Path, rank: int, param_sync: bool) -> None:
    """The engine's tagger of tests/test_engine.py with RETURNN's
    ``torch_distributed``, with gradient clipping (which must see the averaged
    gradients)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_engine import EXTERN, data, get_model, train_step

    from verjus.engine import Engine

    lines: list[str] = []
    options = {"reduce_type": "param", "param_sync_step": 2} if param_sync else {}
    engine = Engine(
        get_model=get_model,
        train_step=train_step,
        extern_data=EXTERN,
        optimizer={"class": "adam"},
        learning_rate=0.01,
        gradient_clip_global_norm=0.5,
        batch_size=60,
        max_seqs=8,
        num_epochs=2,
        model=str(out / "run" / "model"),
        log=lines.append,
        progress=False,
        distributed=options,
    )
    engine.train(data(40, 1), {"dev": data(12, 2)})
    assert engine.model is not None
    params = {name: p.numpy() for name, p in engine.model.named_parameters()}
    np.savez(out / f"rank{rank}.npz", **params)
    (out / f"log{rank}.txt").write_text("\n".join(lines))


class _KillRank1(verjus.Callback):
    def on_step_end(self, trainer, examples, loss):
        if distributed.communicator().rank == 1 and trainer.step == 3:
            os.kill(os.getpid(), signal.SIGKILL)


class _RaiseOnRank1(verjus.Callback):
    def on_step_end(self, trainer, examples, loss):
        if distributed.communicator().rank == 1 and trainer.step == 3:
            raise RuntimeError("rank 1 fails on purpose")


_kill_rank_1 = _KillRank1()
_raise_on_rank_1 = _RaiseOnRank1()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
