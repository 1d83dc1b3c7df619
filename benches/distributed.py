"""The cost of data-parallel training on one machine: 2 ranks x 1 thread
against 1 rank x 2 threads, on the same global batches.

    .venv/bin/python benches/distributed.py [--nets mlp cnn] [--rounds 3]

Runs ``verjus train examples/nets/fashion_<net>.json`` on Fashion-MNIST for one
epoch, alternately as one process with 2 threads (``RAYON_NUM_THREADS=2``) and
as ``--nproc 2`` (2 MPI ranks with 1 thread each), ``--rounds`` times each,
and prints each run's training seconds (the epoch line's figure: training only,
no evaluation), the medians and their ratio (2 ranks / 1 rank; the issue's
target is at most 1.15). Both compute the same global batches, so the
difference is what the collective costs (packing the gradients, MPI's
all-reduce, the per-step agreement on the loss). Needs MPI and mpi4py.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

NETS = Path(__file__).resolve().parent.parent / "examples" / "nets"
EPOCH_SECONDS = re.compile(r"^epoch 1/1: .*\((\d+\.\d+) s, ([\d,]+) examples/s\)", re.M)


def train_seconds(net: str, nproc: int, threads: int, batch: int) -> float:
    """The epoch's training seconds of one ``verjus train`` run."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            sys.executable, "-m", "verjus", "train", str(NETS / f"fashion_{net}.json"),
            "--epochs", "1", "--batch-size", str(batch), "--no-progress",
            "--out", str(Path(out) / "run"), "--nproc", str(nproc),
        ]  # fmt: skip
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stderr[-2000:]}")
    found = EPOCH_SECONDS.search(result.stdout)
    if found is None:
        raise SystemExit(f"no epoch line in:\n{result.stdout}")
    return float(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nets", nargs="+", default=["mlp", "cnn"], choices=["mlp", "cnn"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args()
    print(f"Fashion-MNIST, one epoch, batch {args.batch_size}, {os.cpu_count()} cores")
    for net in args.nets:
        one, two = [], []
        for r in range(args.rounds):
            one.append(train_seconds(net, 1, 2, args.batch_size))
            two.append(train_seconds(net, 2, 1, args.batch_size))
            print(f"{net} round {r + 1}: 1 rank x 2 threads {one[-1]:.1f} s, "
                  f"2 ranks x 1 thread {two[-1]:.1f} s", flush=True)  # fmt: skip
        m1, m2 = statistics.median(one), statistics.median(two)
        print(
            f"{net}: median 1x2 {m1:.2f} s (spread {min(one):.2f}-{max(one):.2f}), "
            f"2x1 {m2:.2f} s (spread {min(two):.2f}-{max(two):.2f}), ratio {m2 / m1:.2f}"
        )


if __name__ == "__main__":
    main()
