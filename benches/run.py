"""Benchmarks verjus against numpy and PyTorch on the same workloads.

Builds and runs ``verjus-bench`` (benches/src/main.rs), which times each workload
on the native CPU backend and describes it (op and sizes) in JSON lines; then
times the same workloads in numpy (GEMM only) and, where it is importable,
PyTorch (GEMM, conv2d forward / forward+backward through autograd, and the
example networks of examples/nets built as the same nn.Sequential), all with the
same number of threads. Prints one table; ``--markdown FILE`` also writes it as
Markdown after the machine, the date, the command and the library versions, for
BENCHMARKS.md.

The serving workloads ``{mlp,cnn}_serve_b{1,8,128}``: one request of that many
examples to a ``Runner`` (a context made per request, as a server's call), against
PyTorch's forward under ``torch.inference_mode()``.

The network workloads: ``mlp_infer`` (forward in inference mode), ``mlp_step``,
``mlp_step_sgd`` and ``cnn_step`` (zero_grad, forward, softmax cross-entropy,
backward, optimizer step on one random batch of 128). With ``--epochs``, also
``mlp_epoch`` and ``cnn_epoch``: one shuffled Fashion-MNIST training epoch
(60000 images, batch 128), timed once, or skipped when the dataset is absent.

The LSTM workloads call verjus' fused LSTM ops directly and PyTorch's
``torch.nn.LSTM`` (forward, then ``torch.autograd.grad`` of the outputs to the
input and every weight and bias) or ``torch.nn.LSTMCell`` (one step under
``torch.inference_mode``) at the same sizes; numpy has none. ``lstm_seq_train``
is the recurrent part of a row-by-row Fashion-MNIST LSTM (T=28, B=128, F=28,
H=128). ``lstm_lm_train`` runs 32 sequences of 64 to 256 frames (F=64, H=256);
verjus takes their lengths, PyTorch packs them with ``pack_padded_sequence``
and unpacks the outputs with ``pad_packed_sequence`` inside the timed call, as a
PyTorch user must; ``lstm_lm_train_unpacked`` times verjus the same against
PyTorch's LSTM over the padded batch, ignoring the lengths. ``lstm_cell_step``
is one step of that language model's cell at batch 1, the latency of sampling
text step by step. Their FLOP counts are the GEMMs' of the frames that run.

The sequence-model rows run whole models through verjus' static graph (the
``Trainer``, a ``Network`` context carrying LSTM state): ``rowlstm_step`` is a
training step of examples/nets/fashion_rowlstm.json (B=128, 28 rows of 28
pixels, LSTM 128 on the last frame, Linear 10, Adam 1e-3) against PyTorch's
``nn.LSTM`` + ``nn.Linear`` + Adam step; ``char_sample_step`` samples one
character at batch 1 from a character LM (Embedding 64, LSTM 256, Linear to a
vocabulary of 114, softmax) continuing from the carried state, against the
same model in PyTorch stepping with its ``(h, c)`` under
``torch.inference_mode`` and ``torch.multinomial``, the id read back as a
sampling loop decodes it.

With ``--rf``, runs instead the RF frontend's per-op overhead benchmark,
``benches/rf_overhead.py`` (verjus.rf vs PyTorch vs RETURNN's rf on tiny
tensors; it needs the verjus Python package built), with the same ``--quick``,
``--threads`` and ``--markdown``.

Samples are interleaved: ``verjus-bench --serve`` holds one workload ready and
takes a sample whenever asked, so each round is one sample of verjus, then
numpy's, then PyTorch's, each after a short pause for the previous library's
worker threads to go idle and 50 ms of untimed calls for the cores to come back
to speed. This shared machine runs in spells (the MLP step took 6.5 ms for 40
steps in a row, then 4.8 ms), and samples taken milliseconds apart share their
spell. ``--pairs`` rounds (30; 5 with ``--quick``) per workload; a time is the
median of a library's samples, a ratio the median of the rounds' ratios. An
epoch is timed once per library.

numpy and PyTorch take their samples in a Python process of their own, fresh for
each workload (``run.py --worker LIB``), as verjus-bench does and as a user's
script would. PyTorch's default Adam allocates and frees megabytes per step, and
how fast glibc serves that depends on what the process allocated before: in one
process shared by all workloads the MLP step took 4.4 ms after the GEMM
workloads and 6.5-7 ms with ``--filter mlp_step``, the figure a fresh training
script gets, so a workload's time depended on which workloads ran before it.

Ratios are verjus time / other time: below 1 verjus is faster. A workload
verjus cannot run (e.g. an unsupported op) shows "error", one this machine lacks
the data for "skipped"; either's reason follows the table.

With ``--device cuda`` the GPU set runs instead (f32 GEMM 4096 and 8192, also
with TF32; MLP and CNN Adam steps at batch 128 and 1024; the LSTM workloads) on
CUDA device 0, PyTorch
on the same GPU in the same run (synchronised after every call), and the peak
memory of each step is reported: verjus' allocator high-water mark against
``torch.cuda.max_memory_allocated``. ``--bench-exe`` uses a prebuilt
``verjus-bench`` (the GPU machine has no Rust; see docs/gpu.md).

With ``--torch-adam fused`` (or ``foreach``) PyTorch's Adam runs as that
variant instead of the one ``torch.optim.Adam`` picks by itself (on the CPU, a
loop of per-tensor ops): the default is what a PyTorch user gets, the fused
variant PyTorch's fastest.

    python benches/run.py [--quick] [--pairs N] [--epochs] [--threads N] [--filter SUBSTRING]
                          [--markdown FILE] [--device cpu|cuda] [--bench-exe PATH] [--rf]
                          [--torch-adam default|foreach|fused]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gzip
import importlib
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIN_SAMPLE_S = 0.01  # fast ops repeat within a sample until it lasts this long
# Pause after a library's sample until its worker threads stop spinning
# (measured as the process's CPU time while idle: OpenBLAS about 150 ms,
# PyTorch's OpenMP a few ms, rayon under 1 ms).
SETTLE_S = {"verjus": 0.005, "numpy": 0.2, "torch": 0.02, "python": 0.005}
# Untimed calls before each sample: after a pause this VM's cores take some
# 30-50 ms to run at full speed again.
REWARM_S = 0.05
EPOCH_PAUSE_S = 0.5  # before each library's epoch
# Timed beside verjus (the Rust driver), each in a worker process: "python" is
# verjus itself driven through its Python API (`Trainer.train_minibatch`), to
# show what the binding adds to a training step.
LIBRARIES = ("numpy", "torch", "python")
MODULES = {"numpy": "numpy", "torch": "torch", "python": "verjus"}
THREAD_VARS = ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds (5 instead of 30)")
    p.add_argument(
        "--epochs", action="store_true", help="also time one Fashion-MNIST epoch per network"
    )
    p.add_argument(
        "--pairs",
        type=int,
        default=None,
        help="interleaved rounds of samples per workload (30; 5 with --quick)",
    )
    p.add_argument("--threads", type=int, default=2, help="threads for every library (2)")
    p.add_argument("--filter", default=None, help="only workloads whose name contains this")
    p.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cpu (default) or cuda")
    p.add_argument("--bench-exe", type=Path, default=None, help="a prebuilt verjus-bench")
    p.add_argument(
        "--rf", action="store_true", help="run benches/rf_overhead.py (RF per-op overhead) instead"
    )
    p.add_argument(
        "--torch-adam",
        choices=("default", "foreach", "fused"),
        default="default",
        help="PyTorch's Adam implementation: the one torch.optim.Adam picks by itself (default: "
        "on the CPU the per-tensor loop), or its foreach or fused variant",
    )
    # The other side of LibraryServer: one library's samples of one workload.
    p.add_argument("--worker", choices=LIBRARIES, help=argparse.SUPPRESS)
    p.add_argument("--warmup", type=int, default=2, help=argparse.SUPPRESS)
    return p.parse_args()


def adam_options(choice: str) -> dict:
    """The keyword arguments of ``torch.optim.Adam`` for ``--torch-adam``."""
    return {} if choice == "default" else {choice: True}


def build_bench() -> Path:
    """Builds verjus-bench in release mode and returns the executable's path."""
    cmd = ["cargo", "build", "--release", "-p", "verjus-benches", "--message-format=json"]
    print("==> " + " ".join(cmd[:-1]), file=sys.stderr)
    out = subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "verjus-bench":
            return Path(msg["executable"])
    raise SystemExit("cargo build reported no verjus-bench executable")


def run_verjus(exe: Path, args: list[str]) -> list[dict]:
    """Runs verjus-bench with ``args`` and returns its records (one per workload)."""
    cmd = [str(exe), *args]
    print("==> " + " ".join(cmd), file=sys.stderr)
    proc = subprocess.run(cmd, check=False, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"verjus-bench failed with exit status {proc.returncode}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def sampler(f: Callable[[], object], warmup: int) -> Callable[[], float]:
    """Warms ``f`` up and returns a function taking one sample: untimed calls for
    ``REWARM_S`` (at least one), then milliseconds per call over enough calls to
    last ``MIN_SAMPLE_S``, as verjus-bench samples."""
    once = 0.0
    for _ in range(max(warmup, 1)):
        start = time.perf_counter()
        f()
        once = time.perf_counter() - start
    calls = max(1, min(10_000, math.ceil(MIN_SAMPLE_S / max(once, 1e-9))))

    def take() -> float:
        start = time.perf_counter()
        f()
        while time.perf_counter() - start < REWARM_S:
            f()
        start = time.perf_counter()
        for _ in range(calls):
            f()
        return (time.perf_counter() - start) * 1e3 / calls

    return take


class LineServer:
    """A process that holds one workload ready and answers each line written to
    its stdin with one JSON line: the side of a workload that one library times."""

    def __init__(self, cmd: list[str], what: str) -> None:
        self.what = what
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            status = self.proc.wait()
            raise SystemExit(f"{self.what} ended with exit status {status}")
        return json.loads(line)

    def _ask(self, line: str) -> dict:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


class VerjusServer(LineServer):
    """``verjus-bench --serve`` for one workload: ``ready`` is its first line
    (description, or ``error`` / ``skipped``); ``sample()`` takes one sample
    after ``REWARM_S`` of untimed calls."""

    def __init__(self, exe: Path, args: list[str]) -> None:
        cmd = [str(exe), *args, "--serve"]
        print("==> " + " ".join(cmd), file=sys.stderr)
        super().__init__(cmd, "verjus-bench --serve")
        self.ready = self._read()

    def sample(self) -> float:
        reply = self._ask(f"{REWARM_S * 1e3}")
        if "error" in reply:
            raise SystemExit(f"verjus-bench failed while sampling: {reply['error']}")
        return reply["ms"]


class LibraryServer(LineServer):
    """numpy's or PyTorch's side of one workload, in a fresh Python process
    (``run.py --worker LIB``, see :func:`worker`): ``ready`` says whether the
    library has the workload (``absent`` when it has not) and what it added to
    the record (``rec``, e.g. PyTorch's peak GPU memory); ``sample()`` takes one
    sample as :func:`sampler` does, ``once()`` times a single call."""

    def __init__(self, lib: str, rec: dict, args: argparse.Namespace, warmup: int) -> None:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", lib]
        cmd += ["--threads", str(args.threads), "--device", args.device]
        cmd += ["--torch-adam", args.torch_adam, "--warmup", str(warmup)]
        super().__init__(cmd, f"the {lib} worker")
        self.ready = self._ask(json.dumps(rec))

    def sample(self) -> float:
        return self._ask("sample")["ms"]

    def once(self) -> float:
        return self._ask("once")["ms"]


def worker(args: argparse.Namespace) -> None:
    """The ``--worker LIB`` process: reads one workload's record from stdin and
    answers each later line, ``sample`` or ``once``, with a JSON line ``{"ms": ...}``."""
    module = import_optional(MODULES[args.worker])
    rec = json.loads(sys.stdin.readline())
    known = set(rec)
    make = numpy_workload
    if args.worker == "python":
        make = python_workload
    elif args.worker == "torch":
        if module is not None:
            module.set_num_threads(args.threads)
        make = functools.partial(
            torch_cuda_workload if args.device == "cuda" else torch_workload,
            adam=adam_options(args.torch_adam),
        )
    f = make(module, rec) if module is not None else None
    reply = {"absent": True} if f is None else {"ready": True}
    reply["rec"] = {key: value for key, value in rec.items() if key not in known}
    print(json.dumps(reply), flush=True)
    take = None  # warmed up at the first sample, not before a single timed epoch
    for line in sys.stdin:
        if line.strip() == "once":
            ms = measure_once(f)
        else:
            take = take or sampler(f, args.warmup)
            ms = take()
        print(json.dumps({"ms": ms}), flush=True)


def measure_once(f: Callable[[], object]) -> float:
    """Milliseconds of one call of ``f``, for workloads too long to repeat."""
    start = time.perf_counter()
    f()
    return (time.perf_counter() - start) * 1e3


def numpy_workload(np, rec: dict) -> Callable[[], object] | None:
    """The workload as a numpy call, or None where numpy has no such op."""
    if rec["op"] != "gemm":
        return None
    rng = np.random.default_rng(0)
    m, n, k = rec["m"], rec["n"], rec["k"]
    a = rng.standard_normal((k, m) if rec["trans_a"] else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if rec["trans_b"] else (k, n), dtype=np.float32)
    a_op = a.T if rec["trans_a"] else a
    b_op = b.T if rec["trans_b"] else b
    return lambda: a_op @ b_op


def python_workload(verjus, rec: dict) -> Callable[[], object] | None:
    """A training step through verjus' Python API, as a user's loop runs it
    (``Trainer.train_minibatch`` on numpy arrays, the output not copied back),
    for the training-step rows; None for the others."""
    if rec["op"] != "train_step":
        return None
    import numpy as np

    net = verjus.Network.from_def(str(ROOT / "examples" / "nets" / rec["net"]))
    if rec["solver"] == "adam":
        opt = verjus.optim.Adam(lr=rec["lr"])
    else:
        opt = verjus.optim.SGD(lr=rec["lr"], momentum=rec["momentum"])
    trainer = verjus.Trainer(net, opt, loss="cross_entropy")
    rng = np.random.default_rng(0)
    x = rng.random((rec["batch"], 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, rec["batch"]).astype(np.int64)
    return lambda: trainer.train_minibatch(x, y, return_output=False)


def torch_net(nn, net: str):
    """The network of examples/nets/``net`` as an ``nn.Sequential``."""
    if net == "fashion_mlp.json":
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(784, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )
    if net == "fashion_cnn.json":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(3136, 128),
            nn.ReLU(),
            nn.Linear(128, 10),
        )
    raise SystemExit(f"no PyTorch version of examples/nets/{net}")


def load_fashion_mnist(torch, data_dir: Path):
    """The training split: images [N, 1, 28, 28] in [0, 1] and int64 labels [N]."""

    def read(name: str, header: int):
        gz = data_dir / f"{name}.gz"
        raw = gzip.decompress(gz.read_bytes()) if gz.is_file() else (data_dir / name).read_bytes()
        return torch.frombuffer(bytearray(raw[header:]), dtype=torch.uint8)

    images = read("train-images-idx3-ubyte", 16).reshape(-1, 1, 28, 28).float() / 255
    return images, read("train-labels-idx1-ubyte", 8).long()


def torch_network_workload(torch, rec: dict, gen, adam: dict) -> Callable[[], object]:
    """Inference, a training step, its optimizer step alone (`update`, from fixed
    gradients) or a training epoch of a network in PyTorch; ``adam`` holds extra
    arguments of ``torch.optim.Adam``."""
    model, batch = torch_net(torch.nn, rec["net"]), rec["batch"]
    x = torch.rand(batch, 1, 28, 28, generator=gen)
    if rec["op"] == "infer":
        model.eval()

        def infer():
            with torch.inference_mode():
                return model(x)

        return infer
    params = model.parameters()
    if rec["solver"] == "adam":
        opt = torch.optim.Adam(params, lr=rec["lr"], **adam)
    else:
        opt = torch.optim.SGD(params, lr=rec["lr"], momentum=rec["momentum"])

    def step(x, y):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    if rec["op"] == "train_step":
        y = torch.randint(10, (batch,), generator=gen)
        return lambda: step(x, y)
    if rec["op"] == "update":
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=gen)
        return opt.step
    images, labels = load_fashion_mnist(torch, Path(rec["data_dir"]))

    def epoch():
        order = torch.randperm(len(labels), generator=gen)
        for start in range(0, len(labels), batch):
            rows = order[start : start + batch]
            step(images[rows], labels[rows])

    return epoch


def torch_workload(torch, rec: dict, adam: dict) -> Callable[[], object] | None:
    """The workload in PyTorch; conv backward goes through autograd; ``adam`` holds
    extra arguments of ``torch.optim.Adam``."""
    gen = torch.Generator().manual_seed(0)

    def randn(*shape, grad=False):
        return torch.randn(*shape, generator=gen).requires_grad_(grad)

    if rec["op"] == "gemm":
        m, n, k = rec["m"], rec["n"], rec["k"]
        a = randn(k, m).T if rec["trans_a"] else randn(m, k)
        b = randn(n, k).T if rec["trans_b"] else randn(k, n)
        return lambda: torch.matmul(a, b)
    if rec["op"] == "conv2d":
        size, pad, kernel = rec["size"], rec["pad"], rec["kernel"]
        out = size + 2 * pad - kernel + 1
        grad = rec["backward"]
        x = randn(rec["batch"], rec["c_in"], size, size, grad=grad)
        w = randn(rec["c_out"], rec["c_in"], kernel, kernel, grad=grad)
        bias = randn(rec["c_out"], grad=grad)
        dy = randn(rec["batch"], rec["c_out"], out, out)
        conv = torch.nn.functional.conv2d
        if not grad:
            return lambda: conv(x, w, bias, padding=pad)
        return lambda: torch.autograd.grad(conv(x, w, bias, padding=pad), (x, w, bias), dy)
    if rec["op"] in ("infer", "train_step", "update", "train_epoch"):
        return torch_network_workload(torch, rec, gen, adam)
    if rec["op"] in LSTM_OPS:
        return torch_lstm_workload(torch, rec, gen, torch.device("cpu"))
    if rec["op"] in SEQ_NET_OPS:
        return torch_seq_net_workload(torch, rec, gen, adam)
    return None


LSTM_OPS = ("lstm_train", "lstm_cell")
SEQ_NET_OPS = ("rowlstm_step", "char_sample_step")


def torch_seq_net_workload(torch, rec: dict, gen, adam: dict) -> Callable[[], object]:
    """A sequence model in PyTorch: ``rowlstm_step``, a training step of
    ``nn.LSTM`` over the rows (batch first) whose last hidden state feeds an
    ``nn.Linear`` (zero_grad, forward, cross-entropy, backward, Adam step with
    ``adam``'s extra arguments); ``char_sample_step``, one character of a
    character LM (``nn.Embedding``, ``nn.LSTM``, ``nn.Linear``, softmax,
    ``torch.multinomial``) at batch 1, carrying ``(h, c)`` and the drawn id from
    call to call."""
    nn = torch.nn
    if rec["op"] == "rowlstm_step":
        lstm = nn.LSTM(rec["input"], rec["hidden"], batch_first=True)
        fc = nn.Linear(rec["hidden"], rec["classes"])
        params = [*lstm.parameters(), *fc.parameters()]
        opt = torch.optim.Adam(params, lr=rec["lr"], **adam)
        x = torch.rand(rec["batch"], rec["steps"], rec["input"], generator=gen)
        y = torch.randint(rec["classes"], (rec["batch"],), generator=gen)

        def step():
            opt.zero_grad()
            _, (h, _) = lstm(x)
            torch.nn.functional.cross_entropy(fc(h[-1]), y).backward()
            opt.step()

        return step
    vocab = rec["vocab"]
    embed, lstm = nn.Embedding(vocab, rec["embed"]), nn.LSTM(rec["embed"], rec["hidden"])
    fc = nn.Linear(rec["hidden"], vocab)
    carried = {"x": torch.ones(1, 1, dtype=torch.long), "state": None}

    def sample():
        with torch.inference_mode():
            y, state = lstm(embed(carried["x"]), carried["state"])
            probs = torch.softmax(fc(y[0]), dim=-1)
            nxt = torch.multinomial(probs, 1, generator=gen)
        carried["x"], carried["state"] = nxt, state
        return int(nxt)

    return sample


def torch_lstm_workload(torch, rec: dict, gen, dev) -> Callable[[], object]:
    """An LSTM workload on ``dev``: ``lstm_cell``, one ``torch.nn.LSTMCell`` step
    in inference mode; ``lstm_train``, ``torch.nn.LSTM``'s forward over the
    time-major batch and the gradients of random output gradients wrt the input
    and all weights and biases. With ``lengths``, ``torch_lengths`` says whether
    the sequences are packed (``pack_padded_sequence`` and back with
    ``pad_packed_sequence``, inside the call) or run padded, lengths ignored."""
    batch, features, hidden = rec["batch"], rec["input"], rec["hidden"]

    def randn(*shape, grad=False):
        return torch.randn(*shape, generator=gen).to(dev).requires_grad_(grad)

    if rec["op"] == "lstm_cell":
        cell = torch.nn.LSTMCell(features, hidden).to(dev)
        x, state = randn(batch, features), (randn(batch, hidden), randn(batch, hidden))

        def step():
            with torch.inference_mode():
                return cell(x, state)

        return step
    lstm = torch.nn.LSTM(features, hidden).to(dev)
    steps = rec["steps"]
    x = randn(steps, batch, features, grad=True)
    dy = randn(steps, batch, hidden)
    wrt = (x, *lstm.parameters())
    if rec.get("torch_lengths") != "packed":
        return lambda: torch.autograd.grad(lstm(x)[0], wrt, dy)
    lengths = torch.tensor(rec["lengths"])  # on the CPU, as pack_padded_sequence wants
    rnn = torch.nn.utils.rnn

    def packed():
        seqs = rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
        y, _ = rnn.pad_packed_sequence(lstm(seqs)[0], total_length=steps)
        return torch.autograd.grad(y, wrt, dy)

    return packed


def torch_cuda_workload(torch, rec: dict, adam: dict) -> Callable[[], object] | None:
    """The GPU workload in PyTorch on cuda:0, synchronised after each call; records
    the step's peak memory (``torch.cuda.max_memory_allocated``) in ``rec``;
    ``adam`` holds extra arguments of ``torch.optim.Adam``."""
    if not torch.cuda.is_available() or rec["op"] not in ("gemm", "train_step", *LSTM_OPS):
        return None
    torch.backends.cuda.matmul.allow_tf32 = bool(rec.get("tf32"))
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda:0")
    gen = torch.Generator().manual_seed(0)
    if rec["op"] == "gemm":
        a = torch.randn(rec["m"], rec["k"], generator=gen).to(dev)
        b = torch.randn(rec["k"], rec["n"], generator=gen).to(dev)

        def call():
            torch.matmul(a, b)
            torch.cuda.synchronize()

        return call
    if rec["op"] in LSTM_OPS:
        run = torch_lstm_workload(torch, rec, gen, dev)

        def synchronised():
            run()
            torch.cuda.synchronize()

        return synchronised
    model = torch_net(torch.nn, rec["net"]).to(dev)
    batch = rec["batch"]
    x = torch.rand(batch, 1, 28, 28, generator=gen).to(dev)
    y = torch.randint(10, (batch,), generator=gen).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=rec["lr"], **adam)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        torch.cuda.synchronize()

    step()
    torch.cuda.reset_peak_memory_stats()
    step()
    rec["torch_peak_bytes"] = torch.cuda.max_memory_allocated()
    return step


def measure_interleaved(
    rec: dict,
    exe: Path,
    bench_args: list[str],
    args: argparse.Namespace,
    libs: list[str],
    pairs: int,
    warmup: int,
) -> None:
    """Times one workload in verjus and each of ``libs``, one sample of each in
    turn for ``pairs`` rounds, and stores in ``rec`` the median times
    (``median_ms``, ``<lib>_ms``) and the median of the rounds' ratios
    (``<lib>_ratio``)."""
    servers = [VerjusServer(exe, [*bench_args, "--warmup", str(warmup), "--name", rec["name"]])]
    try:
        rec.update(servers[0].ready)
        if "error" in rec or "skipped" in rec:
            return
        takes = {"verjus": servers[0].sample}
        for lib in libs:
            servers.append(LibraryServer(lib, rec, args, warmup))
            rec.update(servers[-1].ready["rec"])
            if "absent" not in servers[-1].ready:
                takes[lib] = servers[-1].sample
        times: dict[str, list[float]] = {lib: [] for lib in takes}
        print(f"==> {rec['name']}: {pairs} rounds of {', '.join(takes)}", file=sys.stderr)
        for _ in range(pairs):
            for lib, take in takes.items():
                times[lib].append(take())
                time.sleep(SETTLE_S[lib])
    finally:
        for server in servers:
            server.close()
    ours = times.pop("verjus")
    rec["median_ms"] = statistics.median(ours)
    for lib, theirs in times.items():
        rec[f"{lib}_ms"] = statistics.median(theirs)
        pairs_of = zip(ours, theirs, strict=True)
        ratios = sorted(a / b for a, b in pairs_of)
        rec[f"{lib}_ratio"] = statistics.median(ratios)
        rec[f"{lib}_ratio_spread"] = (ratios[len(ratios) // 10], ratios[-1 - len(ratios) // 10])


def measure_epoch(
    rec: dict, exe: Path, bench_args: list[str], args: argparse.Namespace, libs: list[str]
) -> None:
    """Times one epoch once in verjus and once in each of ``libs``, each after a pause."""
    time.sleep(EPOCH_PAUSE_S)
    [line] = run_verjus(exe, [*bench_args, "--name", rec["name"]])
    rec.update(line)
    if "median_ms" not in rec or "skipped" in rec:
        return
    for lib in libs:
        server = LibraryServer(lib, rec, args, warmup=0)
        try:
            if "absent" in server.ready:
                continue
            time.sleep(EPOCH_PAUSE_S)
            print(f"==> {lib}: {rec['name']}", file=sys.stderr)
            rec[f"{lib}_ms"] = server.once()
        finally:
            server.close()
        rec[f"{lib}_ratio"] = rec["median_ms"] / rec[f"{lib}_ms"]


def library_version(name: str) -> str | None:
    """The installed version of ``name`` as its module reports it, or None when
    it is not installed; asked of a short-lived process so that this one stays
    free of the libraries it times."""
    module = MODULES[name]
    code = f"import {module}; print({module}.__version__)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return run.stdout.strip() if run.returncode == 0 else None


def import_optional(name: str):
    """The module, or None when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"


def gflops(rec: dict, ms: float | None) -> float | None:
    return None if ms is None or rec["flops"] is None else rec["flops"] / (ms * 1e6)


def table_rows(records: list[dict]) -> list[list[str]]:
    rows = []
    for rec in records:
        v, npy, tch = rec.get("median_ms"), rec.get("numpy_ms"), rec.get("torch_ms")
        rows.append(
            [
                rec["name"],
                "error" if "error" in rec else "skipped" if "skipped" in rec else fmt(v),
                fmt(npy),
                fmt(tch),
                fmt(rec.get("numpy_ratio"), 2),
                fmt(rec.get("torch_ratio"), 2),
                fmt(gflops(rec, v)),
                fmt(gflops(rec, npy)),
                fmt(gflops(rec, tch)),
            ]
        )
    return rows


HEADER = [
    "workload",
    "verjus ms",
    "numpy ms",
    "torch ms",
    "verjus/numpy",
    "verjus/torch",
    "verjus GFLOP/s",
    "numpy GFLOP/s",
    "torch GFLOP/s",
]


def text_table(rows: list[list[str]], header: list[str] = HEADER) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r):
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def markdown_table(rows: list[list[str]], context: list[str], header: list[str] = HEADER) -> str:
    out = [
        *(f"- {line}" for line in context),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def spread_notes(records: list[dict]) -> list[str]:
    """For the network and LSTM workloads: how far the rounds' ratios ranged (10th
    to 90th percentile), to show how much one ratio can be trusted."""
    notes = []
    for rec in records:
        spread = ("train_step", "update", "infer", *LSTM_OPS, *SEQ_NET_OPS)
        if rec["op"] in spread and "torch_ratio_spread" in rec:
            lo, hi = rec["torch_ratio_spread"]
            notes.append(
                f"{rec['name']}: verjus/torch per round {lo:.2f}-{hi:.2f} (10th-90th percentile)"
            )
        if "python_ratio" in rec:
            # Stored as Rust/Python, like every ratio; shown the other way up.
            lo, hi = (1 / r for r in reversed(rec["python_ratio_spread"]))
            notes.append(
                f"{rec['name']}: from Python {rec['python_ms']:.3g} ms, from Rust "
                f"{rec['median_ms']:.3g} ms: Python/Rust {1 / rec['python_ratio']:.3f} "
                f"(per round {lo:.3f}-{hi:.3f}, 10th-90th percentile)"
            )
    return notes


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# The instruction sets the kernels choose between, as /proc/cpuinfo names them.
ISA_FLAGS = (
    ("avx2", "AVX2"),
    ("fma", "FMA"),
    ("avx512f", "AVX-512"),
    ("avx512_bf16", "AVX-512 BF16"),
)


def instruction_sets() -> str:
    """The SIMD instruction sets of this CPU that verjus's kernels use (a
    figure on AVX2 says nothing of AVX-512 and the reverse)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown (no /proc/cpuinfo)"
    flags = next((set(line.split(":", 1)[1].split()) for line in text.splitlines()
                  if line.startswith("flags")), set())  # fmt: skip
    found = [name for flag, name in ISA_FLAGS if flag in flags]
    return ", ".join(found) if found else "none of AVX2, FMA, AVX-512"


def machine_context(
    args: argparse.Namespace, pairs: int, load: float, versions: dict[str, str]
) -> list[str]:
    """Lines saying where, when and how the table was made."""
    label = {"python": "verjus's Python API"}
    installed = ", ".join(f"{label.get(lib, lib)} {version}" for lib, version in versions.items())
    mode = "quick" if args.quick else "full"
    return [
        f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; instruction sets: "
        f"{instruction_sets()}",
        f"Date: {datetime.datetime.now():%Y-%m-%d %H:%M}",
        f"Command: `{shlex.join([Path(sys.executable).name, *sys.argv])}`",
        f"Run: {args.threads} threads, {mode} ({pairs} rounds per workload of one sample per "
        f"library, interleaved), start load average {load:.1f}",
        f"Libraries: {installed or 'no numpy/torch'}"
        + ("" if args.torch_adam == "default" else f"; PyTorch's Adam: {args.torch_adam}"),
    ]


def main() -> None:
    args = parse_args()
    if args.rf:
        import rf_overhead  # beside this file

        forwarded = ["--threads", str(args.threads)] + ["--quick"] * args.quick
        if args.markdown:
            forwarded += ["--markdown", str(args.markdown)]
        rf_overhead.main(forwarded)
        return
    if args.worker:  # its stdout answers LibraryServer: nothing else may go there
        worker(args)
        return
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"warning: load average {load:.1f}: other processes will distort the timings")
    for var in THREAD_VARS:  # before numpy or torch start their thread pools
        os.environ[var] = str(args.threads)
    warmup = 1 if args.quick else 2

    exe = args.bench_exe or build_bench()
    device = ["--device", args.device] + ["--epochs"] * args.epochs
    name_filter = ["--filter", args.filter] if args.filter else []
    records = run_verjus(exe, [*device, *name_filter, "--list"])
    libs = ["torch"] if args.device == "cuda" else list(LIBRARIES)
    versions = {lib: library_version(lib) for lib in libs}
    libs = [lib for lib in libs if versions[lib] is not None]
    pairs = args.pairs if args.pairs is not None else 5 if args.quick else 30
    if pairs < 1:
        raise SystemExit("--pairs must be at least 1")
    for rec in records:
        if rec["op"] == "train_epoch":
            measure_epoch(rec, exe, device, args, libs)
        else:
            measure_interleaved(rec, exe, device, args, libs, pairs, warmup)

    context = machine_context(args, pairs, load, {lib: versions[lib] for lib in libs})
    rows = table_rows(records)
    notes = spread_notes(records)
    print("\n" + "\n".join(context) + f"\n\n{text_table(rows)}\n" + "\n".join(notes))
    for rec in records:
        if "peak_bytes" in rec and "torch_peak_bytes" in rec:
            mb = 1 << 20
            print(
                f"peak memory {rec['name']}: verjus {rec['peak_bytes'] / mb:.1f} MiB, "
                f"torch {rec['torch_peak_bytes'] / mb:.1f} MiB"
            )
    for rec in records:
        for kind in ("error", "skipped"):
            if kind in rec:
                print(f"{kind} {rec['name']}: {rec[kind]}")
    if args.markdown:
        spread = "".join(f"- {n}\n" for n in notes)
        args.markdown.write_text(markdown_table(rows, context) + (f"\n{spread}" if spread else ""))
        print(f"\nwrote {args.markdown}")


if __name__ == "__main__":
    main()
