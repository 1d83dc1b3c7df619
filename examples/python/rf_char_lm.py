"""A character language model on the fortunes, written in verjus.rf, then sampled.

    python examples/python/rf_char_lm.py [--epochs 3] [--seed 0] [--max-batches N]
        [--temperature 0.8] [--init torch|returnn] [--weight-dropout P] [--weight-noise STD]
        [--checkpoint-scope] [--data DIR] [--no-progress]

The recipe of the static-graph char LM (issue 21): ``rf.Embedding`` 64 ->
``rf.LSTM`` 256 over a dynamic time dim (each text runs to its own length in the
fused op) -> ``rf.Linear`` to the vocabulary; Adam lr 2e-3 with the gradient
clipped to norm 1.0, batches of 32 texts, texts over 512 characters left out,
every 20th text for validation (``verjus.data.fortunes``). The loss is the
cross-entropy per real frame (padding frames add nothing), averaged over the
real frames of the batch. The weights start as PyTorch's layers start theirs
(``--init torch``, the default; ``--init returnn``: RETURNN's Glorot-uniform
weights and zero biases).

``verjus.engine.Engine``, RETURNN's training engine, runs the epochs as for a
RETURNN config: each text is a sequence of ``data`` (``<eot>``, then its
characters) and ``classes`` (its characters, then ``<eot>``); ``ce_step`` marks
the cross-entropy of each frame, its mean over the batch's real frames
optimized. The batches are ``verjus.data.TextBatcher``'s, made RETURNN's way:
the texts in ``laplace:.3200`` order (per epoch a random order cut into buckets
of 3200 texts, each sorted by length), 32 at a time, and the epoch's batches
shuffled (``online_shuffle_batches``), so a batch holds texts of similar length
and the lengths of successive batches vary. After each epoch the same step
scores the validation texts (train flag off); the line printed gives their bits
per character (the mean cross-entropy over every real validation frame, / ln 2),
the mean training loss (per real frame) and the time. While an epoch runs, the
engine's progress on stderr (as ``verjus train`` shows its own: a tqdm bar on
a terminal, elsewhere, as in a log file, a line at most every 30 s) counts its
steps with their rate and the last step's loss, and then the validation steps;
``--no-progress`` turns it off.

Measured (3 epochs, seed 0, 2 cores under heavy load): ``--init torch``
2.949 / 2.695 / 2.577 bits per character through the engine, 2.957 / 2.738 /
2.611 with the hand-written training loop it replaced, in about the same time
(one epoch each, alternating: 125-130 against 118-136 ms a step); PyTorch with
this recipe: 3.00 / 2.77 / 2.60. ``--init returnn`` (the loop): 3.163 / 2.865 /
2.688.

Then it samples a few texts at once, one per prompt, in an ``rf.Loop`` ended per
entry by ``loop.end`` at ``<eot>``: the LSTM's state (and the embedding of the
last character) is carried in ``rf.loop.State`` s and the LSTM stepped with
``spatial_dim=rf.single_step_dim``;
each character is the argmax of ``logits / temperature`` plus Gumbel noise
(temperature sampling; ``--temperature 0`` is greedy).

RETURNN-style regularization (issue 23): ``--weight-dropout P`` drops entries of
the LSTM's recurrent weight, ``--weight-noise STD`` adds Gaussian noise to its
input weight, both in training only. With ``--checkpoint-scope`` they are
``rf.weight_dropout`` / ``rf.weight_noise``, which compute the derived weight in
an ``rf.gradient_checkpoint_scope`` (only the random counter is kept, the weight
is recomputed in backward); without it, the same parametrizations computed
plainly (the derived weight is kept for backward), to compare. With any of the
three options each step's peak memory (``verjus.memory_stats``, reset per step:
the allocator's peak, and the peak of the bytes the tape keeps for backward)
is printed per epoch.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import verjus
from verjus import rf
from verjus.engine import ArrayDataset, Engine, Source

EMBED, HIDDEN, BATCH, LR, CLIP = 64, 256, 32, 2e-3, 1.0
MAX_LEN, VAL_EVERY = 512, 20
POOL = 100  # batches of texts of similar length: the buckets of the order hold POOL batches
PROMPTS = ("", "The ", "A ", "You will ")
SAMPLE_CHARS = 300


class CharLM(rf.Module):
    """Embedding -> LSTM -> Linear over the vocabulary dim ``vocab_dim``."""

    def __init__(self, vocab_dim: rf.Dim) -> None:
        self.vocab_dim = vocab_dim
        self.embed_dim = rf.Dim(EMBED, name="embed")
        self.hidden_dim = rf.Dim(HIDDEN, name="hidden")
        self.embedding = rf.Embedding(vocab_dim, self.embed_dim)
        self.lstm = rf.LSTM(self.embed_dim, self.hidden_dim)
        self.output = rf.Linear(self.hidden_dim, vocab_dim)

    def __call__(
        self, ids: rf.Tensor, *, state: rf.LstmState, spatial_dim: rf.Dim
    ) -> tuple[rf.Tensor, rf.LstmState]:
        """Logits over ``vocab_dim`` for the ids (sparse dim ``vocab_dim``) over
        ``spatial_dim`` (or one step: ``rf.single_step_dim``), and the new state."""
        out, state = self.lstm(self.embedding(ids), state=state, spatial_dim=spatial_dim)
        return self.output(out), state


def init_like_torch(model: CharLM) -> None:
    """PyTorch's default initialization of the same layers (``nn.Embedding``:
    N(0, 1); ``nn.LSTM``: every weight and both biases U(-1/sqrt(H), 1/sqrt(H)),
    the biases summed; ``nn.Linear``: U(-1/sqrt(in), 1/sqrt(in))), drawn from
    the rf random stream."""

    def uniform(param: rf.Parameter, bound: float) -> rf.Tensor:
        return rf.random_uniform(list(param.dims), minval=-bound, maxval=bound)

    lstm, out = model.lstm, model.output
    model.embedding.weight.assign(rf.random_normal(list(model.embedding.weight.dims)))
    bound = 1 / math.sqrt(HIDDEN)
    for param in (lstm.ff_weight, lstm.rec_weight):
        param.assign(uniform(param, bound))
    lstm.bias.assign(uniform(lstm.bias, bound) + uniform(lstm.bias, bound))
    for param in (out.weight, out.bias):
        param.assign(uniform(param, 1 / math.sqrt(HIDDEN)))


class PlainWeightDropout:
    """``rf.weight_dropout``'s parametrization computed outside a checkpoint
    scope: the dropped-out weight is kept for backward (the comparison case)."""

    def __init__(self, drop_prob: float) -> None:
        self.drop_prob = drop_prob

    def __call__(self, param: rf.Tensor) -> rf.Tensor:
        if not rf.get_run_ctx().train_flag:
            return param
        return rf.dropout(param, self.drop_prob, on_forward=True)


class PlainWeightNoise:
    """``rf.weight_noise``'s parametrization computed outside a checkpoint scope."""

    def __init__(self, std: float) -> None:
        self.std = std

    def __call__(self, param: rf.Tensor) -> rf.Tensor:
        if not rf.get_run_ctx().train_flag:
            return param
        return param + rf.random_normal(list(param.dims), stddev=self.std)


def regularize(model: CharLM, weight_dropout: float, weight_noise: float, scoped: bool) -> None:
    """Weight dropout on the LSTM's recurrent weight and weight noise on its
    input weight (0: none), in a checkpoint scope (``rf.weight_dropout`` /
    ``rf.weight_noise``) or plainly."""
    if weight_dropout > 0:
        if scoped:
            rf.weight_dropout(model.lstm, "rec_weight", drop_prob=weight_dropout)
        else:
            rf.register_parametrization(
                model.lstm, "rec_weight", PlainWeightDropout(weight_dropout)
            )
    if weight_noise > 0:
        if scoped:
            rf.weight_noise(model.lstm, "ff_weight", std=weight_noise)
        else:
            rf.register_parametrization(model.lstm, "ff_weight", PlainWeightNoise(weight_noise))


@dataclass
class Batch:
    """One padded batch as rf tensors over ``[batch_dim, time]``."""

    inputs: rf.Tensor
    targets: rf.Tensor
    time: rf.Dim
    frames: int  # real frames (the sum of the lengths)


def to_batch(arrays: tuple[np.ndarray, np.ndarray, np.ndarray], vocab_dim: rf.Dim) -> Batch:
    """A ``TextBatcher`` batch ``(inputs [B, T], targets [B, T], lengths [B])``
    as rf tensors with a dynamic time dim of those lengths."""
    inputs, targets, lengths = arrays
    time_dim = rf.Dim(rf.convert_to_tensor(lengths, dims=[rf.batch_dim]), name="time")
    dims = [rf.batch_dim, time_dim]
    return Batch(
        inputs=rf.convert_to_tensor(inputs, dims=dims, sparse_dim=vocab_dim),
        targets=rf.convert_to_tensor(targets, dims=dims, sparse_dim=vocab_dim),
        time=time_dim,
        frames=int(lengths.sum()),
    )


def frame_ce(model: CharLM, inputs: rf.Tensor, targets: rf.Tensor, time: rf.Dim) -> rf.Tensor:
    """The cross-entropy of each frame, ``[batch_dim, time]``, of the texts
    ``inputs`` (the next characters: ``targets``)."""
    initial = model.lstm.default_initial_state(batch_dims=[rf.batch_dim])
    logits, _ = model(inputs, state=initial, spatial_dim=time)
    return rf.cross_entropy(
        estimated=logits, target=targets, axis=model.vocab_dim, estimated_type="logits"
    )


def summed_ce(model: CharLM, batch: Batch) -> rf.Tensor:
    """The cross-entropy summed over the real frames of the batch (a scalar)."""
    ce = frame_ce(model, batch.inputs, batch.targets, batch.time)
    return rf.reduce_sum(ce, axis=[rf.batch_dim, batch.time])  # masked: padding adds 0


def train_step(model: CharLM, opt: rf.Adam, batch: Batch) -> rf.Tensor:
    """One update on the mean cross-entropy over the batch's real frames, outside
    the engine (``benches/char_lm.py`` times it against the other frameworks on
    the same batches); returns that mean (not read here, so nothing waits on it)."""
    loss = summed_ce(model, batch) * (1.0 / batch.frames)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return rf.stop_gradient(loss)


time_dim = rf.Dim(None, name="time")


def extern_data(vocab_dim: rf.Dim) -> dict[str, Any]:
    """The engine's inputs: the texts' ids and the next ids, over one time dim."""
    ids = {"dims": [rf.batch_dim, time_dim], "sparse_dim": vocab_dim, "dtype": "int32"}
    return {"data": ids, "classes": dict(ids)}


def text_dataset(
    texts: Sequence[str], vocab: verjus.data.CharVocab, **options: Any
) -> ArrayDataset:
    """Per text: ``data``, ``<eot>`` then its characters, and ``classes``, its
    characters then ``<eot>`` (``TextBatcher``'s inputs and targets)."""
    eot = np.array([vocab.eot_id], np.int32)
    ids = [np.asarray(vocab.encode(text), np.int32) for text in texts]
    return ArrayDataset(
        {
            "data": [np.concatenate([eot, seq]) for seq in ids],
            "classes": [np.concatenate([seq, eot]) for seq in ids],
        },
        **options,
    )


class FirstBatches:
    """``count`` batches of each epoch of ``source`` (``--max-batches``): its first
    ``count * BATCH`` texts, as every batch holds BATCH texts (in the laplace order
    the shortest of a random part)."""

    def __init__(self, source: Source, count: int) -> None:
        self.source, self.count = source, count

    def iter_epoch(self, epoch: int) -> Iterator[dict[str, np.ndarray]]:
        return itertools.islice(self.source.iter_epoch(epoch), self.count * BATCH)


class StepMemory:
    """Each training step's peak memory (``verjus.memory_stats``): the peaks are
    reset as a step begins and read as the next one begins (the last one's when
    the epoch is over), so each covers a step's forward, backward and update."""

    def __init__(self) -> None:
        self.peaks: list[tuple[int, int]] = []  # (allocator, tape saved) per step
        self._open = False

    def begin_step(self) -> None:
        self._close()
        verjus.reset_peak_memory_stats()
        self._open = True

    def epoch(self) -> list[tuple[int, int]]:
        """The peaks of the steps since the last call."""
        self._close()
        peaks, self.peaks = self.peaks, []
        return peaks

    def _close(self) -> None:
        if self._open:
            stats = verjus.memory_stats()
            self.peaks.append((stats["peak_bytes"], stats["tape_saved_peak_bytes"]))
            self._open = False


def ce_step(
    *,
    model: CharLM,
    extern_data: rf.TensorDict,
    memory: StepMemory | None = None,
    **_kwargs: Any,
) -> None:
    """The engine's ``train_step``: the cross-entropy of each real frame, its mean
    over the batch optimized (as ``train_step``); ``memory`` measures each training step."""
    if memory is not None and rf.get_run_ctx().train_flag:
        memory.begin_step()
    ce = frame_ce(model, extern_data["data"], extern_data["classes"], time_dim)
    ce.mark_as_loss("ce", use_normalized_loss=True)


def sample(
    model: CharLM,
    vocab: verjus.data.CharVocab,
    prompts: Sequence[str],
    *,
    temperature: float,
    max_chars: int = SAMPLE_CHARS,
) -> list[str]:
    """A continuation of each prompt, all at once: the prompt (after ``<eot>``)
    runs through the LSTM over its own length, then an ``rf.Loop`` steps one
    character at a time until each entry draws ``<eot>`` (or ``max_chars``)."""
    rf.init_forward_step_run_ctx()
    samples = rf.Dim(len(prompts), name="samples")
    vocab_dim = model.vocab_dim
    ids = [np.concatenate([[vocab.eot_id], vocab.encode(p)]).astype(np.int64) for p in prompts]
    # All but each prompt's last id over a dynamic dim (length 0 for an empty prompt) ...
    prefix = np.zeros((len(ids), max(len(i) for i in ids) - 1), np.int64)
    for row, seq in enumerate(ids):
        prefix[row, : len(seq) - 1] = seq[:-1]
    lens = np.array([len(i) - 1 for i in ids], np.int32)
    prompt_dim = rf.Dim(rf.convert_to_tensor(lens, dims=[samples]), name="prompt")
    x = rf.convert_to_tensor(prefix, dims=[samples, prompt_dim], sparse_dim=vocab_dim)
    initial = model.lstm.default_initial_state(batch_dims=[samples])
    # Only the state is needed (and rf.matmul fails on a dim of size 0, as the
    # prompt dim is when every prompt is empty, so the output layer is skipped).
    _, after_prompt = model.lstm(model.embedding(x), state=initial, spatial_dim=prompt_dim)
    # ... and the last one as the loop's first input. The State carries its
    # embedding, not the id: a State masks its value with rf.where, which drops
    # an int tensor's sparse_dim (that rf.Embedding needs).
    last = rf.convert_to_tensor(
        np.array([i[-1] for i in ids], np.int64), dims=[samples], sparse_dim=vocab_dim
    )
    embedded = rf.loop.State(initial=model.embedding(last))
    lstm_state = rf.loop.State(initial=after_prompt)
    with rf.Loop(max_seq_len=max_chars, name="sampling") as loop:
        for _ in loop:
            out, new_state = model.lstm(
                embedded.get(), state=lstm_state.get(), spatial_dim=rf.single_step_dim
            )
            logits = model.output(out)
            if temperature > 0:  # Gumbel-max: argmax of logits / T + Gumbel noise
                u = rf.random_uniform([samples, vocab_dim], minval=1e-9, maxval=1.0)
                logits = logits * (1.0 / temperature) - rf.log(-rf.log(u))
            drawn = rf.reduce_argmax(logits, axis=vocab_dim)
            lstm_state.assign(new_state)
            embedded.assign(model.embedding(drawn))
            chars = loop.stack(drawn)
            loop.end(drawn == vocab.eot_id, include_eos=False)
    out = chars.get().copy_transpose([samples, loop.axis]).numpy()
    lengths = loop.axis.dyn_size_ext.copy_transpose([samples]).numpy()
    return [p + vocab.decode(row[:n]) for p, row, n in zip(prompts, out, lengths, strict=True)]


@dataclass
class Result:
    """What a run printed, for tests: per epoch the mean training loss (nats
    per real frame) and the validation bits per character; the samples."""

    train_loss: list[float] = field(default_factory=list)
    val_bpc: list[float] = field(default_factory=list)
    samples: list[str] = field(default_factory=list)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-batches", type=int, default=None, help="training batches per epoch")
    p.add_argument("--temperature", type=float, default=0.8, help="0: greedy")
    p.add_argument(
        "--init",
        choices=("torch", "returnn"),
        default="torch",
        help="PyTorch's default initialization or RETURNN's (Glorot, zero biases)",
    )
    p.add_argument("--weight-dropout", type=float, default=0.0, metavar="P")
    p.add_argument("--weight-noise", type=float, default=0.0, metavar="STD")
    p.add_argument("--checkpoint-scope", action="store_true")
    p.add_argument("--data", default=None, help="fortunes folder (default: $VERJUS_FORTUNES)")
    p.add_argument("--no-progress", action="store_true", help="no progress (bar or log lines)")
    return p.parse_args(argv)


def make_model(vocab_dim: rf.Dim, args: argparse.Namespace) -> CharLM:
    """The engine's ``get_model``: the LM with the chosen initialization and
    regularization."""
    model = CharLM(vocab_dim)
    if args.init == "torch":
        init_like_torch(model)
    regularize(model, args.weight_dropout, args.weight_noise, args.checkpoint_scope)
    return model


def main(argv: Sequence[str] | None = None) -> Result:
    args = parse_args(argv)
    train_texts, val_texts, vocab = verjus.data.fortunes(args.data, MAX_LEN, VAL_EVERY)
    vocab_dim = rf.Dim(vocab.size, name="vocab")
    train: Source = text_dataset(
        train_texts, vocab, seq_ordering=f"laplace:.{POOL * BATCH}", seed=args.seed
    )
    if args.max_batches is not None:
        train = FirstBatches(train, args.max_batches)
    val = text_dataset(val_texts, vocab, seq_ordering="sorted")
    measure_memory = args.weight_dropout > 0 or args.weight_noise > 0 or args.checkpoint_scope
    memory = StepMemory() if measure_memory else None
    result = Result()
    cpu_start = time.process_time()

    def report(row: dict[str, Any]) -> None:
        """After each epoch: the validation bits per character and the line."""
        nonlocal cpu_start
        cpu_s = time.process_time() - cpu_start
        bpc = engine.evaluate(val, name="validation")["ce"] / math.log(2)
        result.train_loss.append(row["train"]["ce"])
        result.val_bpc.append(bpc)
        line = (
            f"epoch {row['epoch']}: train loss {row['train']['ce']:.4f} nats, validation "
            f"{bpc:.3f} bits/char, {row['seconds']:.1f} s/epoch "
            f"({1e3 * row['seconds'] / row['steps']:.0f} ms/step, CPU {cpu_s:.1f} s)"
        )
        if memory is not None:
            peaks, tape_peaks = np.array(memory.epoch()).T / 2**20
            line += f", peak memory per step {peaks.mean():.1f} MiB mean, "
            line += f"{peaks.max():.1f} MiB max; tape saved peak "
            line += f"{tape_peaks.mean():.2f} MiB mean, {tape_peaks.max():.2f} MiB max"
        print(line)
        cpu_start = time.process_time()

    engine = Engine(
        get_model=lambda **_: make_model(vocab_dim, args),
        train_step=functools.partial(ce_step, memory=memory),
        extern_data=extern_data(vocab_dim),
        optimizer={"class": "adam"},
        learning_rate=LR,
        gradient_clip_global_norm=CLIP,
        batch_size=None,
        max_seqs=BATCH,
        online_shuffle_batches=math.ceil(len(train_texts) / BATCH),  # all of an epoch's
        # The texts are in memory: a batch is made in less time than a worker
        # process would take to ship it, and the steps keep both cores.
        data_worker="thread",
        num_epochs=args.epochs,
        random_seed=args.seed,
        log=lambda line: None,
        # The steps of each epoch on a progress bar on a terminal, else in a line
        # every 30 s.
        progress=not args.no_progress,
        on_epoch_end=report,
    )
    model = engine.init_model()
    n_params = sum(int(np.prod(p.shape)) for p in model.parameters())
    frames = sum(len(text) + 1 for text in train_texts)  # with each text's <eot>
    print(
        f"{len(train_texts)} training texts ({frames} frames), {len(val_texts)} "
        f"validation, vocabulary {vocab.size}; {n_params} parameters"
    )
    engine.train(train)
    rf.set_random_seed(args.seed)
    prompts = [p for p in PROMPTS if set(p) <= set(vocab.chars)]  # those it can encode
    result.samples = sample(model, vocab, prompts, temperature=args.temperature)
    for text in result.samples:
        print("---\n" + text)
    return result


if __name__ == "__main__":
    main()
