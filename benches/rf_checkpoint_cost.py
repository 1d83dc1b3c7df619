"""What weight noise / weight dropout in a gradient checkpoint scope cost per
training step (issue 23, item 6: at most 1.2x the step without them).

Steps timed (forward, ``reduce_sum`` loss, backward; no optimizer update):

- ``linear``: ``rf.Linear(512 -> 512)`` on ``[batch=BATCH, 512]``;
- ``lstm``: ``rf.LSTM(IN -> HIDDEN)`` over ``[batch, time=TIME, IN]``.

Each in three modes: ``plain`` (no parametrization), ``scoped`` (the
parametrization, drawn in its checkpoint scope: ``rf.weight_noise`` on the
Linear's weight, ``rf.weight_dropout`` on the LSTM's recurrent weight and
``rf.weight_noise`` on its input weight, as RETURNN recipes do) and
``unscoped`` (the same draws without the scope, for reference). Modes are
timed interleaved, each sample the median step time of a few steps; the
table gives the median over samples and the ratio to ``plain``. Time is the
process's CPU time (all threads) with ``--cpu-time``, which a loaded machine
disturbs less than wall time.

    python benches/rf_checkpoint_cost.py [--threads N] [--samples N] [--cpu-time]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

BATCH, IN, HIDDEN, TIME = 32, 128, 256, 50


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--threads", type=int, default=1, help="native threads (1)")
    p.add_argument("--samples", type=int, default=15, help="samples per mode (15)")
    p.add_argument("--steps", type=int, default=5, help="steps per sample (5)")
    p.add_argument("--cpu-time", action="store_true", help="process CPU time, not wall time")
    return p.parse_args()


def _noisy(w):
    """Weight noise without the checkpoint scope."""
    from verjus import rf

    return w + rf.random_normal(list(w.dims), stddev=0.075)


def linear_step(rf, np, mode: str) -> Callable[[], None]:
    batch, i, o = rf.Dim(BATCH, name="batch"), rf.Dim(512, name="in"), rf.Dim(512, name="out")
    x = rf.convert_to_tensor(
        np.random.default_rng(0).standard_normal((BATCH, 512), np.float32),
        dims=[batch, i],
    )
    lin = rf.Linear(i, o)
    if mode == "scoped":
        rf.weight_noise(lin, "weight", std=0.075)
    elif mode == "unscoped":
        rf.register_parametrization(lin, "weight", _noisy)

    def step() -> None:
        rf.reduce_sum(rf.tanh(lin(x)), axis=[batch, o]).backward()

    return step


def lstm_step(rf, np, mode: str) -> Callable[[], None]:
    batch, i, h = rf.Dim(BATCH, name="batch"), rf.Dim(IN, name="in"), rf.Dim(HIDDEN, name="hidden")
    t = rf.Dim(TIME, name="time")
    x = rf.convert_to_tensor(
        np.random.default_rng(0).standard_normal((BATCH, TIME, IN), np.float32),
        dims=[batch, t, i],
    )
    lstm = rf.LSTM(i, h)
    if mode == "scoped":
        rf.weight_dropout(lstm, "rec_weight", drop_prob=0.3)
        rf.weight_noise(lstm, "ff_weight", std=0.075)
    elif mode == "unscoped":
        rf.register_parametrization(
            lstm, "rec_weight", lambda w: rf.dropout(w, 0.3, on_forward=True)
        )
        rf.register_parametrization(lstm, "ff_weight", _noisy)

    def step() -> None:
        state = rf.LstmState(h=rf.zeros([batch, h]), c=rf.zeros([batch, h]))
        y, _ = lstm(x, state=state, spatial_dim=t)
        rf.reduce_sum(y, axis=[batch, t, h]).backward()

    return step


def main() -> None:
    args = parse_args()
    for var in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import numpy as np

    from verjus import rf

    rf.init_train_step_run_ctx()
    clock = time.process_time if args.cpu_time else time.perf_counter
    modes = ("plain", "scoped", "unscoped")
    clock_name = "process CPU" if args.cpu_time else "wall"
    print(f"{args.threads} thread(s), {clock_name} time, ms per step")
    header = " ".join(f"{m:>10}" for m in modes)
    print(f"{'step':8} {header} {'scoped/plain':>13} {'unscoped/plain':>15}")
    for name, make in (("linear", linear_step), ("lstm", lstm_step)):
        steps = {m: make(rf, np, m) for m in modes}
        for f in steps.values():
            f()  # warm up
        samples: dict[str, list[float]] = {m: [] for m in modes}
        for _ in range(args.samples):
            for m, f in steps.items():
                start = clock()
                for _ in range(args.steps):
                    f()
                samples[m].append((clock() - start) / args.steps * 1e3)
        ms = {m: statistics.median(s) for m, s in samples.items()}
        print(
            f"{name:8} "
            + " ".join(f"{ms[m]:10.3f}" for m in modes)
            + f" {ms['scoped'] / ms['plain']:13.2f} {ms['unscoped'] / ms['plain']:15.2f}"
        )


if __name__ == "__main__":
    main()
