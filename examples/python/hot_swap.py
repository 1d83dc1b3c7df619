"""Hot-swapping the served network under load, from Python.

    python examples/python/hot_swap.py [--mlp-steps N] [--cnn-steps N] [--out runs/hot_swap_py]

Trains the MLP and the CNN of examples/nets/ briefly on Fashion-MNIST (other
layers, one interface: input ``image`` [1, 28, 28], output ``logits`` [10],
from ``fc3`` in one and ``fc2`` in the other), saves both as checkpoints, then
four threads call ``Runner.infer`` on test images while the main thread swaps
between the checkpoints several times and offers one network that does not
fit (flat [784] inputs), which is refused. Prints the requests served, the
failures (zero) and the accuracy on the first 2000 test images before and
after each swap.
"""

import argparse
import json
import threading
import time
from pathlib import Path

import numpy as np

import verjus

NETS = Path(__file__).resolve().parent.parent / "nets"

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--mlp-steps", type=int, default=469)
parser.add_argument("--cnn-steps", type=int, default=150)
parser.add_argument("--out", default="runs/hot_swap_py")
args = parser.parse_args()
out = Path(args.out)


def definition(file: str) -> dict:
    """The definition in examples/nets/``file``, as shipped."""
    return json.loads((NETS / file).read_text())


x, y = verjus.data.fashion_mnist("train")
xt, yt = verjus.data.fashion_mnist("test")


def train(definition: dict, steps: int, folder: Path) -> None:
    trainer = verjus.Trainer(verjus.Network.from_def(definition), verjus.optim.Adam(lr=1e-3))
    order = np.random.default_rng(0).permutation(len(x))
    start = time.perf_counter()
    for step in range(steps):
        rows = order[(step * 128) % len(x) :][:128]
        trainer.train_minibatch(x[rows], y[rows], return_output=False)
    trainer.save_checkpoint(folder)
    print(f"trained {folder} for {steps} steps in {time.perf_counter() - start:.1f} s")


mlp, cnn = out / "mlp", out / "cnn"
train(definition("fashion_mlp.json"), args.mlp_steps, mlp)
train(definition("fashion_cnn.json"), args.cnn_steps, cnn)

runner = verjus.Runner.from_checkpoint(mlp)


def accuracy() -> float:
    return float((runner.infer(xt[:2000]).argmax(axis=1) == yt[:2000]).mean())


counts = {"requests": 0, "failures": 0}
lock = threading.Lock()
stop = threading.Event()


def serve(thread: int) -> None:
    start, requests, failures = thread * 997, 0, 0
    while not stop.is_set():
        start = (start + 32) % (len(xt) - 32)
        try:
            logits = runner.infer(xt[start : start + 32])
            failures += logits.shape != (32, 10)
        except Exception:
            failures += 1
        requests += 1
    with lock:
        counts["requests"] += requests
        counts["failures"] += failures


threads = [threading.Thread(target=serve, args=(t,)) for t in range(4)]
for t in threads:
    t.start()
print(f"serving {mlp} with {len(threads)} threads: accuracy {accuracy():.4f}")
for i in range(6):
    time.sleep(0.3)
    target = cnn if i % 2 == 0 else mlp
    before = accuracy()
    generation = runner.swap_from(target)
    print(f"swap {i + 1}: generation {generation} serves {target}: "
          f"accuracy {before:.4f} -> {accuracy():.4f}")  # fmt: skip

bad = definition("fashion_mlp.json")
bad["inputs"][0]["shape"] = [784]
bad["layers"] = [layer for layer in bad["layers"] if layer["type"] != "Flatten"]
verjus.Network.from_def(bad).save(out / "incompatible")
try:
    runner.swap_from(out / "incompatible")
    raise SystemExit("the incompatible network was accepted")
except ValueError as e:
    print(f"offered {out / 'incompatible'}: {e}")
time.sleep(0.3)
print(f"still generation {runner.generation}: accuracy {accuracy():.4f}")
stop.set()
for t in threads:
    t.join()
print(f"requests served: {counts['requests']}, failures: {counts['failures']}, "
      f"swaps: {runner.generation}")  # fmt: skip
if counts["failures"]:
    raise SystemExit(f"{counts['failures']} requests failed")
