"""Per-op overhead of verjus.rf against raw PyTorch and RETURNN's rf on PyTorch.

The ops run on tiny tensors, so what is timed is the framework's own cost per
call (argument handling, dim matching, dispatch, allocation, the autograd
record), not arithmetic:

- ``add``: ``a + b``, both ``[batch=8, f=32]`` in the same order;
- ``add_permuted``: ``a + b`` with ``b`` stored as ``[f, batch]`` (torch:
  ``a + b.T``);
- ``matmul``: ``[batch, f] x [f, g]`` reducing ``f``, a 32x32 weight;
- ``reduce_sum``: over ``f`` of ``[batch, f]``;
- ``softmax``: over ``f`` of ``[batch, f]``;
- ``masked_mean``: the mean over a dynamic time dim of ``[batch=8, time=20,
  f=32]`` with per-sequence lengths; torch as a torch user writes it: the mask
  from the lengths, multiply, sum, divide by the lengths;
- ``step_body``: a 10-op recurrent step body on ``[batch, f]`` tensors (``*``,
  ``+``, ``tanh``, ``sigmoid``, ``*``, ``-``, ``relu``, ``+``, ``*``, ``tanh``),
  called directly;
- ``loop_step``: one step (microseconds per step, a loop of ``TIME`` steps
  over the dynamic time dim divided by ``TIME``) of that body in an
  ``rf.Loop`` with a ``rf.loop.State``, ``loop.unstack`` and ``loop.stack``;
  torch: a plain Python ``for`` over ``x[:, t]`` with ``torch.where`` on the
  lengths and ``torch.stack``; RETURNN: its ``rf.scan`` (it has no Loop);
- ``scan_step``: the same with ``rf.scan`` (torch: the same plain loop);
- ``loop_overhead`` / ``scan_overhead``: ``loop_step`` / ``scan_step`` minus
  ``step_body``: the fixed cost per step of the loop itself (derived, not
  timed on its own);
- ``char_lm_step``: one training step of the character LM (``benches/char_lm.py``:
  embedding 64, LSTM 256, Linear to a vocabulary of 114, Adam with clipping
  1.0) on a fixed batch of 32 texts of 64..256 characters, from the same
  weights: verjus.rf (``examples/python/rf_char_lm.py``'s step) vs PyTorch with
  ``pack_padded_sequence`` vs RETURNN's rf (the step of its torch engine).

Columns: verjus.rf (``verjus.rf``), raw PyTorch, RETURNN's ``returnn.frontend``
with its torch backend (``rf.select_backend_torch()``), all in this one process,
with the same number of threads. Every op of every library is timed in turn
within each sample round (interleaved, so a load change hits all of them), a
sample repeating the op until it lasts ``MIN_SAMPLE_S``; the table gives the
median microseconds per op over the samples, and the ratios verjus/torch and
verjus/returnn (below 1: verjus is faster). The targets: verjus.rf at most 1.0x
torch and 0.3x RETURNN on every op and on the char-LM step; for the loop rows,
the per-step overhead at most ``LOOP_TARGET_US`` and 0.3x RETURNN's (torch's
plain loop is shown, not a target). A library that cannot be imported shows
"skipped" with the reason after the table.

    python benches/rf_overhead.py [--quick] [--threads N] [--cpu-time] [--markdown FILE]

(``python benches/run.py --rf`` runs the same.) Needs the verjus Python package
built (``maturin develop --release``); torch and returnn are optional.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as harness  # benches/run.py: the shared helpers

BATCH, FEAT, TIME = 8, 32, 20
LENGTHS = [20, 17, 15, 12, 10, 8, 5, 3]
OPS = ["add", "add_permuted", "matmul", "reduce_sum", "softmax", "masked_mean"]
LOOP_OPS = ["step_body", "loop_step", "scan_step"]
OVERHEAD = {"loop_overhead": "loop_step", "scan_overhead": "scan_step"}  # minus step_body
PER_CALL = {"loop_step": TIME, "scan_step": TIME}  # steps per timed call
LOOP_TARGET_US = 30.0
STEP_OPS = ["char_lm_step"]
CHAR_VOCAB, CHAR_BATCH, CHAR_LENGTHS = 114, 32, (64, 256)
LIBS = ["verjus", "torch", "returnn"]
TARGETS = {"torch": 1.0, "returnn": 0.3}

Workloads = dict[str, Callable[[], object]]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer samples (5 instead of 15)")
    p.add_argument("--threads", type=int, default=2, help="threads for every library (2)")
    p.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    p.add_argument(
        "--cpu-time",
        action="store_true",
        help="time the calling thread's CPU time instead of wall time (steadier on a busy "
        "machine; the tiny ops here all run on the calling thread)",
    )
    return p.parse_args(argv)


def inputs(np):
    """The same values for every library: a, b [batch, f], w [f, g], x [batch, time, f]."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((BATCH, FEAT), dtype=np.float32)
    b = rng.standard_normal((BATCH, FEAT), dtype=np.float32)
    w = rng.standard_normal((FEAT, FEAT), dtype=np.float32)
    x = rng.standard_normal((BATCH, TIME, FEAT), dtype=np.float32)
    return a, b, w, x, np.array(LENGTHS, np.int32)


def char_lm_inputs(np):
    """A fixed batch (``TextBatcher``'s layout: inputs, targets, lengths) of
    ``CHAR_BATCH`` texts with lengths uniform in ``CHAR_LENGTHS`` and random
    characters, and the char LM's weights (uniform in [-0.1, 0.1])."""
    import char_lm  # benches/char_lm.py: the model in every framework

    rng = np.random.default_rng(1)
    lengths = rng.integers(CHAR_LENGTHS[0], CHAR_LENGTHS[1] + 1, CHAR_BATCH).astype(np.int32)
    ids = rng.integers(2, CHAR_VOCAB, (CHAR_BATCH, int(lengths.max()) + 1)).astype(np.int32)
    past = np.arange(ids.shape[1] - 1)[None, :] >= lengths[:, None]
    inputs, targets = np.where(past, 0, ids[:, :-1]), np.where(past, 0, ids[:, 1:])
    weights = {
        name: rng.uniform(-0.1, 0.1, shape).astype(np.float32)
        for name, shape in char_lm.weight_shapes(CHAR_VOCAB).items()
    }
    return (inputs.astype(np.int32), targets.astype(np.int32), lengths), weights


def char_lm_step(np, framework: str) -> Callable[[], object]:
    """One training step of ``benches/char_lm.py``'s ``framework`` on the fixed
    batch, starting from the fixed weights (so the first steps' losses agree)."""
    import char_lm

    batch, weights = char_lm_inputs(np)
    lm = char_lm.FRAMEWORKS[framework](CHAR_VOCAB, 0)
    lm.load(weights)
    return lambda: lm.train_step(batch)


def verjus_workloads(np) -> Workloads:
    from verjus import rf

    a_, b_, w_, x_, lens_ = inputs(np)
    batch, f, g = rf.Dim(BATCH, name="batch"), rf.Dim(FEAT, name="f"), rf.Dim(FEAT, name="g")
    time_dim = rf.Dim(rf.convert_to_tensor(lens_, dims=[batch]), name="time")
    a = rf.convert_to_tensor(a_, dims=[batch, f])
    b = rf.convert_to_tensor(b_, dims=[batch, f])
    bt = rf.convert_to_tensor(np.ascontiguousarray(b_.T), dims=[f, batch])
    w = rf.convert_to_tensor(w_, dims=[f, g])
    x = rf.convert_to_tensor(x_, dims=[batch, time_dim, f])
    x0 = rf.convert_to_tensor(np.ascontiguousarray(x_[:, 0]), dims=[batch, f])

    def body(s, x_t):
        h = rf.tanh(s * 0.5 + x_t) * rf.sigmoid(x_t)
        h = rf.relu(h - 0.1) + s
        return h, rf.tanh(h * 2.0)

    def loop_step():
        state = rf.loop.State(initial=a)
        with rf.Loop(axis=time_dim) as loop:
            for _ in loop:
                new, y = body(state.get(), loop.unstack(x))
                state.assign(new)
                ys = loop.stack(y)
        ys.get()
        return state.get().copy_transpose([batch, f])

    def scan_step():
        _, s, _ = rf.scan(
            spatial_dim=time_dim,
            initial=a,
            xs=x,
            ys=a,
            body=lambda x_t, s: body(s, x_t)[::-1],
        )
        return s.copy_transpose([batch, f])

    return {
        "add": lambda: a + b,
        "add_permuted": lambda: a + bt,
        "matmul": lambda: rf.matmul(a, w, reduce=f),
        "reduce_sum": lambda: rf.reduce_sum(a, axis=f),
        "softmax": lambda: rf.softmax(a, axis=f),
        "masked_mean": lambda: rf.reduce_mean(x, axis=time_dim),
        "step_body": lambda: body(a, x0)[1],
        "loop_step": loop_step,
        "scan_step": scan_step,
        "char_lm_step": char_lm_step(np, "rf"),
    }


def torch_workloads(np) -> Workloads:
    import torch

    a_, b_, w_, x_, lens_ = inputs(np)
    a, b, w, x = (torch.from_numpy(v) for v in (a_, b_, w_, x_))
    bt = torch.from_numpy(np.ascontiguousarray(b_.T))
    lens = torch.from_numpy(lens_)

    def masked_mean():
        mask = torch.arange(x.shape[1]) < lens[:, None]  # [batch, time]
        return (x * mask[:, :, None]).sum(dim=1) / lens[:, None]

    def body(s, x_t):
        h = torch.tanh(s * 0.5 + x_t) * torch.sigmoid(x_t)
        h = torch.relu(h - 0.1) + s
        return h, torch.tanh(h * 2.0)

    def loop_step():
        s, ys = a, []
        for t in range(x.shape[1]):
            new, y = body(s, x[:, t])
            ys.append(y)
            s = torch.where((t < lens)[:, None], new, s)
        torch.stack(ys, dim=1)
        return s

    return {
        "add": lambda: a + b,
        "add_permuted": lambda: a + bt.T,
        "matmul": lambda: a @ w,
        "reduce_sum": lambda: a.sum(dim=1),
        "softmax": lambda: torch.softmax(a, dim=1),
        "masked_mean": masked_mean,
        "step_body": lambda: body(a, x[:, 0])[1],
        "loop_step": loop_step,
        "scan_step": loop_step,
        "char_lm_step": char_lm_step(np, "torch"),
    }


def returnn_workloads(np) -> Workloads:
    import returnn.frontend as rrf
    import torch
    from returnn.tensor import Dim

    rrf.select_backend_torch()
    a_, b_, w_, x_, lens_ = inputs(np)
    batch, f, g = Dim(BATCH, name="batch"), Dim(FEAT, name="f"), Dim(FEAT, name="g")
    time_dim = Dim(rrf.convert_to_tensor(torch.from_numpy(lens_), dims=[batch]), name="time")

    def tensor(v, dims):
        return rrf.convert_to_tensor(torch.from_numpy(np.ascontiguousarray(v)), dims=dims)

    a, b, bt = tensor(a_, [batch, f]), tensor(b_, [batch, f]), tensor(b_.T, [f, batch])
    w, x = tensor(w_, [f, g]), tensor(x_, [batch, time_dim, f])
    x0 = tensor(x_[:, 0], [batch, f])

    def body(s, x_t):
        h = rrf.tanh(s * 0.5 + x_t) * rrf.sigmoid(x_t)
        h = rrf.relu(h - 0.1) + s
        return h, rrf.tanh(h * 2.0)

    def scan_step():
        _, s, _ = rrf.scan(
            spatial_dim=time_dim,
            initial=a,
            xs=x,
            ys=a,
            body=lambda x_t, s: body(s, x_t)[::-1],
        )
        return s.copy_transpose([batch, f])

    return {
        "add": lambda: a + b,
        "add_permuted": lambda: a + bt,
        "matmul": lambda: rrf.matmul(a, w, reduce=f),
        "reduce_sum": lambda: rrf.reduce_sum(a, axis=f),
        "softmax": lambda: rrf.softmax(a, axis=f),
        "masked_mean": lambda: rrf.reduce_mean(x, axis=time_dim),
        "step_body": lambda: body(a, x0)[1],
        "loop_step": scan_step,  # RETURNN's rf has no Loop: its scan is the reference
        "scan_step": scan_step,
        "char_lm_step": char_lm_step(np, "returnn"),
    }


def check_agreement(np, libs: dict[str, Workloads]) -> None:
    """Fails loudly if the libraries do not compute the same values (each op is
    called once per library: a training step's first loss, from the same
    weights, is compared)."""

    def values(lib: str, op: str):
        out = libs[lib][op]()
        if lib == "verjus":
            return out.numpy()
        raw = out.raw_tensor if lib == "returnn" else out
        return raw.detach().numpy()

    for op in OPS + LOOP_OPS + STEP_OPS:
        results = {lib: values(lib, op) for lib in libs}
        want = results.get("torch")
        for lib, got in results.items():
            if want is not None and not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                raise SystemExit(f"{lib} {op} differs from torch: the comparison would be unfair")


def calls_per_sample(f: Callable[[], object]) -> int:
    start = time.perf_counter()
    for _ in range(20):  # warm-up: caches, lazy initialisation (at most ~1 s)
        f()
        if time.perf_counter() - start > 1.0:
            break
    start, calls = time.perf_counter(), 0
    while calls < 50 and (calls < 3 or time.perf_counter() - start < 1.0):
        f()
        calls += 1
    once = (time.perf_counter() - start) / calls
    return max(1, min(100_000, int(harness.MIN_SAMPLE_S / max(once, 1e-9))))


def measure(
    libs: dict[str, Workloads], samples: int, clock: Callable[[], float]
) -> dict[tuple[str, str], float]:
    """Median microseconds per call (per step for the loops) for every (lib,
    op), samples interleaved, and the loops' overhead per step (step minus
    body)."""
    timed = OPS + LOOP_OPS + STEP_OPS
    calls = {(lib, op): calls_per_sample(w[op]) for lib, w in libs.items() for op in timed}
    times: dict[tuple[str, str], list[float]] = {key: [] for key in calls}
    for _ in range(samples):
        for op in timed:
            for lib, w in libs.items():
                f, n = w[op], calls[(lib, op)]
                start = clock()
                for _ in range(n):
                    f()
                times[(lib, op)].append((clock() - start) * 1e6 / n / PER_CALL.get(op, 1))
    us = {key: statistics.median(v) for key, v in times.items()}
    for lib in libs:
        for row, step in OVERHEAD.items():
            us[(lib, row)] = us[(lib, step)] - us[(lib, "step_body")]
    return us


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or None when either timing is missing (a library was skipped)."""
    return None if a is None or b is None else a / b


HEADER = ["op", "verjus.rf µs", "torch µs", "returnn rf µs", "verjus/torch", "verjus/returnn"]


def table_rows(us: dict[tuple[str, str], float], libs: dict, skipped: dict) -> list[list[str]]:
    rows = []
    for op in OPS + LOOP_OPS + list(OVERHEAD) + STEP_OPS:
        v = us.get(("verjus", op))
        row = [op]
        for lib in LIBS:
            row.append("skipped" if lib in skipped else harness.fmt(us.get((lib, op))))
        if op in OVERHEAD and v is not None and v > LOOP_TARGET_US:
            row[1] += f" (over {LOOP_TARGET_US:.0f})"
        for lib in ("torch", "returnn"):
            r = ratio(v, us.get((lib, op)))
            targeted = op in OPS + STEP_OPS or (op in OVERHEAD and lib == "returnn")
            mark = "" if r is None or not targeted or r <= TARGETS[lib] else " (over target)"
            row.append("-" if r is None else f"{r:.2f}{mark}" if r >= 0.01 else f"{r:.1e}{mark}")
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"warning: load average {load:.1f}: other processes will distort the timings")
    for var in harness.THREAD_VARS:  # before numpy, torch or verjus start their pools
        os.environ[var] = str(args.threads)
    import numpy as np

    samples = 5 if args.quick else 15
    libs: dict[str, Workloads] = {"verjus": verjus_workloads(np)}
    skipped: dict[str, str] = {}
    versions = {"numpy": np.__version__}
    torch = harness.import_optional("torch")
    if torch is None:
        skipped["torch"] = "PyTorch is not installed"
    else:
        torch.set_num_threads(args.threads)
        libs["torch"] = torch_workloads(np)
        versions["torch"] = torch.__version__
    try:
        if torch is None:
            raise ImportError("RETURNN's rf here runs on PyTorch, which is not installed")
        libs["returnn"] = returnn_workloads(np)
        import returnn

        versions["returnn"] = returnn.__version__
    except Exception as e:  # an import error or an incompatible RETURNN
        skipped["returnn"] = f"{type(e).__name__}: {e}"
    check_agreement(np, libs)

    clock = time.thread_time if args.cpu_time else time.perf_counter
    us = measure(libs, samples, clock)
    context = [
        f"CPU: {harness.cpu_name()}, {os.cpu_count()} logical cores",
        f"Date: {time.strftime('%Y-%m-%d %H:%M')}",
        f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}`",
        f"Run: {args.threads} threads, {samples} interleaved samples (median), "
        f"{'calling-thread CPU time' if args.cpu_time else 'wall time'}, "
        f"start load average {load:.1f}",
        "Libraries: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        f"Targets: verjus.rf <= {TARGETS['torch']}x torch and <= {TARGETS['returnn']}x RETURNN "
        f"per op and char-LM step; loop overhead per step <= {LOOP_TARGET_US:.0f} µs and "
        f"<= {TARGETS['returnn']}x RETURNN's rf.scan",
    ]
    rows = table_rows(us, libs, skipped)
    print("\n" + "\n".join(context) + f"\n\n{harness.text_table(rows, HEADER)}")
    for lib, why in skipped.items():
        print(f"skipped {lib}: {why}")
    if args.markdown:
        args.markdown.write_text(harness.markdown_table(rows, context, HEADER))
        print(f"\nwrote {args.markdown}")


if __name__ == "__main__":
    main()
