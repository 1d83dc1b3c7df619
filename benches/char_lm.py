"""The character-LM recipe (issue 21) trained in several frameworks on the same batches.

    python benches/char_lm.py [--framework torch|rf|nn|returnn|both|verjus|all] [--epochs 3]
        [--max-batches N] [--threads 2] [--seed 0] [--data DIR]

Every framework trains embedding 64 -> LSTM 256 -> Linear to the vocabulary with
Adam lr 2e-3 and the gradient clipped to norm 1.0, on the fortunes (texts over
512 characters left out, every 20th for validation) in batches of 32 texts
from ``verjus.data.TextBatcher`` with the same seed, so all of them see
identical batches in identical order. Each prints per epoch the validation bits
per character (mean cross-entropy over the real validation frames / ln 2) and
its training time (wall and the process's CPU time):

- ``torch``: ``nn.Embedding``, ``nn.LSTM`` over ``pack_padded_sequence``
  (as PyTorch users must for variable lengths), ``nn.Linear`` on the packed
  frames only, ``clip_grad_norm_``; PyTorch's default initialization;
- ``rf``: ``examples/python/rf_char_lm.py``'s model and step (verjus.rf,
  with PyTorch's initialization, the example's default);
- ``nn``: the static graph (``verjus.nn`` + ``Trainer.train_sequences``), as
  ``examples/python/char_lm.py`` builds it, from its own initialization;
- ``returnn``: the same model in RETURNN's ``returnn.frontend`` on its torch
  backend (``torch.optim.Adam``, ``clip_grad_norm_``, as RETURNN's torch
  engine steps it).

A framework is a class with ``name``, ``__init__(vocab_size, seed)``,
``train_step(batch)`` (returns the step's loss in the framework's own tensor),
``summed_ce(batch) -> float`` and, optionally, ``load(weights)`` (the ``WEIGHT_SHAPES``
arrays, for runs from identical weights: ``benches/rf_overhead.py``'s
``char_lm_step`` row), registered in ``FRAMEWORKS`` (``batch`` is a
``TextBatcher`` batch: ``(inputs, targets, lengths)`` int32 numpy arrays);
adding one is adding such a class (``nn`` has no ``load``).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as harness  # benches/run.py: the shared helpers

ROOT = Path(__file__).resolve().parent.parent
EMBED, HIDDEN, BATCH, LR, CLIP = 64, 256, 32, 2e-3, 1.0
MAX_LEN, VAL_EVERY = 512, 20


def weight_shapes(vocab_size: int) -> dict[str, tuple[int, ...]]:
    """The model's weights in RETURNN's layout, as ``load`` takes them: the
    embedding table, the LSTM's input and recurrent weights and bias (PyTorch's
    gate order i, f, g, o) and the output layer's weight ``[hidden, vocab]``
    and bias."""
    return {
        "embedding": (vocab_size, EMBED),
        "ff_weight": (4 * HIDDEN, EMBED),
        "rec_weight": (4 * HIDDEN, HIDDEN),
        "bias": (4 * HIDDEN,),
        "out_weight": (HIDDEN, vocab_size),
        "out_bias": (vocab_size,),
    }


def load_rf_example():
    """``examples/python/rf_char_lm.py`` as a module (examples are not a package)."""
    path = ROOT / "examples" / "python" / "rf_char_lm.py"
    spec = importlib.util.spec_from_file_location("rf_char_lm", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class TorchLM:
    """PyTorch with packed sequences."""

    name = "torch"

    def __init__(self, vocab_size: int, seed: int) -> None:
        import torch
        from torch import nn

        self.torch = torch
        torch.manual_seed(seed)
        self.embedding = nn.Embedding(vocab_size, EMBED)
        self.lstm = nn.LSTM(EMBED, HIDDEN, batch_first=True)
        self.output = nn.Linear(HIDDEN, vocab_size)
        self.params = [p for m in (self.embedding, self.lstm, self.output) for p in m.parameters()]
        self.opt = torch.optim.Adam(self.params, lr=LR)

    def _summed_ce(self, batch):
        torch = self.torch
        from torch.nn.utils.rnn import pack_padded_sequence

        inputs, targets, lengths = (torch.from_numpy(a) for a in batch)
        lengths = lengths.long()
        x = pack_padded_sequence(
            self.embedding(inputs.long()), lengths, batch_first=True, enforce_sorted=False
        )
        out, _ = self.lstm(x)
        y = pack_padded_sequence(targets.long(), lengths, batch_first=True, enforce_sorted=False)
        logits = self.output(out.data)  # the real frames only
        return torch.nn.functional.cross_entropy(logits, y.data, reduction="sum")

    def load(self, weights: dict) -> None:
        torch = self.torch
        values = {
            self.embedding.weight: weights["embedding"],
            self.lstm.weight_ih_l0: weights["ff_weight"],
            self.lstm.weight_hh_l0: weights["rec_weight"],
            self.lstm.bias_ih_l0: weights["bias"],
            self.lstm.bias_hh_l0: 0 * weights["bias"],
            self.output.weight: weights["out_weight"].T,
            self.output.bias: weights["out_bias"],
        }
        with torch.no_grad():
            for param, value in values.items():
                param.copy_(torch.from_numpy(value))

    def train_step(self, batch):
        loss = self._summed_ce(batch) / float(batch[2].sum())
        self.opt.zero_grad()
        loss.backward()
        self.torch.nn.utils.clip_grad_norm_(self.params, CLIP)
        self.opt.step()
        return loss.detach()

    def summed_ce(self, batch) -> float:
        with self.torch.no_grad():
            return float(self._summed_ce(batch))


class RfLM:
    """verjus.rf: the example's model and training step."""

    name = "rf"

    def __init__(self, vocab_size: int, seed: int) -> None:
        from verjus import rf

        self.rf = rf
        self.example = load_rf_example()
        self.vocab_dim = rf.Dim(vocab_size, name="vocab")
        rf.set_random_seed(seed)
        self.model = self.example.CharLM(self.vocab_dim)
        self.example.init_like_torch(self.model)  # the example's default
        self.opt = rf.Adam(self.model.parameters(), lr=LR, clip_norm=CLIP)

    def load(self, weights: dict) -> None:
        m = self.model
        m.embedding.weight.assign(weights["embedding"])
        for name in ("ff_weight", "rec_weight", "bias"):
            getattr(m.lstm, name).assign(weights[name])
        m.output.weight.assign(weights["out_weight"])
        m.output.bias.assign(weights["out_bias"])

    def train_step(self, batch):
        self.rf.init_train_step_run_ctx(train_flag=True)
        batch = self.example.to_batch(batch, self.vocab_dim)
        return self.example.train_step(self.model, self.opt, batch)

    def summed_ce(self, batch) -> float:
        self.rf.init_forward_step_run_ctx()
        ce = self.example.summed_ce(self.model, self.example.to_batch(batch, self.vocab_dim))
        return float(ce.numpy())


class NnLM:
    """verjus's static graph (``verjus.nn`` + ``Trainer``), as
    ``examples/python/char_lm.py`` builds it."""

    name = "nn"

    def __init__(self, vocab_size: int, seed: int) -> None:
        import verjus
        from verjus import nn

        self.net = verjus.Network.from_def(
            nn.Sequential(
                nn.Embedding(vocab_size, EMBED, name="embed"),
                nn.LSTM(HIDDEN, name="rnn"),
                nn.Linear(vocab_size, name="fc"),
                input_shape=(None,),
                input_name="chars",
                input_dtype="int32",
            ),
            seed=seed,
        )
        self.trainer = verjus.Trainer(self.net, verjus.optim.Adam(lr=LR, clip_norm=CLIP))

    def train_step(self, batch):
        inputs, targets, lengths = batch
        return self.trainer.train_sequences(inputs, lengths, targets)

    def summed_ce(self, batch) -> float:
        inputs, targets, lengths = batch
        loss, frames = self.trainer.evaluate_sequences(inputs, lengths, targets)
        return loss * frames


class ReturnnLM:
    """RETURNN's ``returnn.frontend`` on its torch backend, stepped as RETURNN's
    torch engine does (``backward`` on the raw loss, ``clip_grad_norm_``,
    ``torch.optim.Adam``)."""

    name = "returnn"

    def __init__(self, vocab_size: int, seed: int) -> None:
        import returnn.frontend as rrf
        import torch
        from returnn.tensor import Dim

        rrf.select_backend_torch()
        torch.manual_seed(seed)
        self.rrf, self.torch, self.Dim = rrf, torch, Dim
        self.vocab_dim = Dim(vocab_size, name="vocab")
        embed, hidden = Dim(EMBED, name="embed"), Dim(HIDDEN, name="hidden")
        self.embedding = rrf.Embedding(self.vocab_dim, embed)
        self.lstm = rrf.LSTM(embed, hidden)
        self.output = rrf.Linear(hidden, self.vocab_dim)
        self.params = {
            "embedding": self.embedding.weight,
            "ff_weight": self.lstm.ff_weight,
            "rec_weight": self.lstm.rec_weight,
            "bias": self.lstm.bias,
            "out_weight": self.output.weight,
            "out_bias": self.output.bias,
        }
        self.raw = [p.raw_tensor for p in self.params.values()]
        self.opt = torch.optim.Adam(self.raw, lr=LR)

    def load(self, weights: dict) -> None:
        with self.torch.no_grad():
            for name, param in self.params.items():
                param.raw_tensor.copy_(self.torch.from_numpy(weights[name]))

    def _summed_ce(self, batch):
        rrf, torch, dim = self.rrf, self.torch, self.Dim
        inputs, targets, lengths = batch
        batch_dim = dim(len(lengths), name="batch")  # static: for the initial state
        lens = rrf.convert_to_tensor(torch.from_numpy(lengths), dims=[batch_dim])
        time_dim = dim(lens, name="time")

        def ids(array):
            raw = torch.from_numpy(array).long()
            return rrf.convert_to_tensor(raw, dims=[batch_dim, time_dim], sparse_dim=self.vocab_dim)

        initial = self.lstm.default_initial_state(batch_dims=[batch_dim])
        out, _ = self.lstm(self.embedding(ids(inputs)), state=initial, spatial_dim=time_dim)
        ce = rrf.cross_entropy(
            estimated=self.output(out),
            target=ids(targets),
            axis=self.vocab_dim,
            estimated_type="logits",
        )
        return rrf.reduce_sum(ce, axis=[batch_dim, time_dim])

    def train_step(self, batch):
        loss = self._summed_ce(batch) / float(batch[2].sum())
        self.opt.zero_grad()
        loss.raw_tensor.backward()
        self.torch.nn.utils.clip_grad_norm_(self.raw, CLIP)
        self.opt.step()
        return loss

    def summed_ce(self, batch) -> float:
        with self.torch.no_grad():
            return float(self._summed_ce(batch).raw_tensor)


FRAMEWORKS = {cls.name: cls for cls in (TorchLM, RfLM, NnLM, ReturnnLM)}
GROUPS = {"both": ["torch", "rf"], "verjus": ["torch", "nn", "rf"], "all": list(FRAMEWORKS)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=[*FRAMEWORKS, *GROUPS], default="both")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--max-batches", type=int, default=None, help="training batches per epoch")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default=None, help="fortunes folder (default: $VERJUS_FORTUNES)")
    return p.parse_args(argv)


def bits_per_char(lm, batcher) -> float:
    total, frames = 0.0, 0
    for batch in batcher.epoch(None):
        total += lm.summed_ce(batch)
        frames += int(batch[2].sum())
    return total / frames / math.log(2)


def run(name: str, args: argparse.Namespace, train, val, vocab_size: int) -> list[float]:
    """Trains one framework; prints and returns the validation bpc per epoch."""
    lm = FRAMEWORKS[name](vocab_size, args.seed)
    results = []
    for epoch in range(args.epochs):
        start, cpu = time.perf_counter(), time.process_time()
        steps = 0
        for batch in train.epoch(args.seed, epoch):
            if args.max_batches is not None and steps >= args.max_batches:
                break
            lm.train_step(batch)
            steps += 1
        train_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
        bpc = bits_per_char(lm, val)
        results.append(bpc)
        print(
            f"{name} epoch {epoch + 1}: validation {bpc:.3f} bits/char, {train_s:.1f} s/epoch "
            f"({1e3 * train_s / steps:.0f} ms/step, {steps} steps; CPU {cpu_s:.1f} s, all "
            "threads: steadier than wall time on a busy machine)",
            flush=True,
        )
    return results


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    args = parse_args(argv)
    for var in harness.THREAD_VARS:  # before numpy, torch or verjus start their pools
        os.environ[var] = str(args.threads)
    import verjus

    names = GROUPS.get(args.framework, [args.framework])
    if "torch" in names:
        import torch

        torch.set_num_threads(args.threads)
    train_texts, val_texts, vocab = verjus.data.fortunes(args.data, MAX_LEN, VAL_EVERY)
    train = verjus.data.TextBatcher(train_texts, vocab, BATCH)
    val = verjus.data.TextBatcher(val_texts, vocab, BATCH)
    print(
        f"{len(train_texts)} training texts ({train.tokens} frames), {len(val_texts)} "
        f"validation, vocabulary {vocab.size}; {args.threads} threads, seed {args.seed}"
    )
    return {name: run(name, args, train, val, vocab.size) for name in names}


if __name__ == "__main__":
    main()
