"""RETURNN's demo configs on verjus and on RETURNN's own PyTorch backend, side by side.

    .venv/bin/python benches/returnn_configs.py --returnn-python /path/to/venv-with-torch/bin/python

Runs ``demos/demo-rf.config`` from RETURNN's source distribution, unchanged,
alternately with ``verjus returnn`` (this interpreter) and ``python -m returnn``
(``--returnn-python``: an interpreter with RETURNN and torch), ``--runs`` times
each, and prints per run the seconds of each epoch (from the line ``start
epoch N`` to the next: training, dev scoring and checkpoint) and the final dev
scores, then the median epoch time of each and their ratio (verjus / RETURNN).
With ``--aed`` it also runs ``demos/demo-rf-pt-benchmark.py`` (an attention
encoder-decoder: 12-layer Conformer, LSTM decoder) for one short epoch with
overrides that fit a small machine, and prints the seconds per step.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from returnn_suite.sources import returnn_tests, returnn_version

AED_OVERRIDES = [
    "++batch_size", "2000", "++max_seqs", "8", "++num_epochs", "1",
    "++train", "{'class': 'TaskNumberBaseConvertDataset', 'input_base': 2, 'output_base': 10, "
    "'num_seqs': 100}",
    "++dev", "{'class': 'TaskNumberBaseConvertDataset', 'input_base': 2, 'output_base': 10, "
    "'num_seqs': 20, 'fixed_random_seed': 1}",
]  # fmt: skip


def timed_lines(cmd: list[str], cwd: Path) -> list[tuple[float, str]]:
    """The output lines of ``cmd``, each with the seconds since its start."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    lines = [(time.monotonic() - start, line.rstrip()) for line in proc.stdout]
    if proc.wait() != 0:
        tail = "\n".join(line for _, line in lines[-20:])
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed:\n{tail}")
    return lines


def epoch_seconds(lines: list[tuple[float, str]]) -> list[float]:
    """From each ``start epoch N`` line to the next (the last: to ``Epoch N evaluation``)."""
    starts = [t for t, line in lines if re.match(r"start epoch \d+", line)]
    ends = [t for t, line in lines if re.match(r"Epoch \d+ evaluation", line)]
    return [b - a for a, b in zip(starts, [*starts[1:], ends[-1]], strict=True)]


def run_config(python: str, module: str, config: Path, folder: Path, extra: list[str]) -> list:
    cmd = [python, "-u", "-m", module, config.name, "++model", str(folder / "model")]
    cmd += ["++learning_rate_file", str(folder / "lr"), *extra]
    return timed_lines(cmd, config.parent)


def demo_rf(args: argparse.Namespace, demos: Path, work: Path) -> None:
    config = work / "demo-rf.config"
    config.write_text((demos / "demo-rf.config").read_text())
    times: dict[str, list[float]] = {"verjus": [], "RETURNN": []}
    for run in range(1, args.runs + 1):
        for name, python, module in (
            ("verjus", sys.executable, "verjus.returnn"),
            ("RETURNN", args.returnn_python, "returnn"),
        ):
            lines = run_config(python, module, config, work / f"{name}{run}", [])
            seconds = epoch_seconds(lines)
            times[name] += seconds
            final = [line for _, line in lines if line.startswith("Epoch 5 evaluation")]
            shown = ", ".join(f"{s:.2f}" for s in seconds)
            print(f"demo-rf {name} run {run}: epochs {shown} s; {final[-1] if final else '?'}")
    medians = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"demo-rf median epoch: verjus {medians['verjus']:.2f} s, RETURNN "
        f"{medians['RETURNN']:.2f} s, ratio {medians['verjus'] / medians['RETURNN']:.2f}"
    )


def aed(args: argparse.Namespace, demos: Path, work: Path) -> None:
    config = work / "demo-rf-pt-benchmark.py"
    config.write_text((demos / "demo-rf-pt-benchmark.py").read_text())
    per_step = {}
    for name, python, module in (
        ("verjus", sys.executable, "verjus.returnn"),
        ("RETURNN", args.returnn_python, "returnn"),
    ):
        lines = run_config(python, module, config, work / f"aed-{name}", AED_OVERRIDES)
        steps = [
            float(m.group(1))
            for _, line in lines
            if (m := re.match(r"ep 1 train, step \d+, .* ([\d.]+) sec/step", line))
        ]
        per_step[name] = sum(steps) / len(steps)
        final = [line for _, line in lines if line.startswith("Epoch 1 evaluation")]
        shown = final[-1] if final else "?"
        print(f"aed {name}: {len(steps)} steps, {per_step[name]:.3f} s/step; {shown}")
    print(
        f"aed steps per second: verjus / RETURNN = {per_step['RETURNN'] / per_step['verjus']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--returnn-python", required=True, help="a Python with RETURNN and torch")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--aed", action="store_true", help="also the AED benchmark demo")
    args = parser.parse_args()
    demos = returnn_tests(returnn_version()).parent / "demos"
    with tempfile.TemporaryDirectory() as tmp:
        demo_rf(args, demos, Path(tmp))
        if args.aed:
            aed(args, demos, Path(tmp))


if __name__ == "__main__":
    main()
