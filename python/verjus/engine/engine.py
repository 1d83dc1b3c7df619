"""``Engine``: trains, evaluates and runs an RF model over datasets, as RETURNN's
PyTorch engine does for a RETURNN config.

A RETURNN user writes no training loop: the config gives ``get_model``,
``train_step`` (which marks losses with ``mark_as_loss``), ``forward_step``,
``extern_data`` and the settings, and the engine runs the epochs. This is that
engine on verjus, usable without RETURNN installed:

    engine = Engine(get_model=get_model, train_step=train_step, extern_data=extern_data,
                    optimizer={"class": "adam"}, learning_rate=1e-3, batch_size=5000,
                    max_seqs=10, num_epochs=5, model="runs/demo/model")
    engine.train(train=ArrayDataset(...), dev={"dev": ArrayDataset(...)})

Per epoch it batches the training data by padded frames (``batching``; with
``online_shuffle_batches`` the batches come shuffled in blocks of that many), with
the next batches prepared in a worker process (``worker.py``; a thread where
processes cannot be forked, or with ``data_worker="thread"``), runs
``train_step`` on each,
optimizes the sum of the marked losses (RETURNN's ``total_loss``), steps the
optimizer every ``accum_grad_multiple_step`` batches with gradient clipping by
value and by global norm, and reports the losses (RETURNN's arithmetic: summed
over frames, divided by the frame count). After each epoch it scores the dev
sets, calls ``on_epoch_end(row)`` with the epoch's metrics row (a script's own
figures, e.g. a decoder's error rate: what it adds to the row is saved too),
saves a checkpoint (``checkpoints``) and rewrites ``metrics.jsonl`` and
``curves.png`` beside it. Started again with the same ``model`` prefix, it
continues after the last finished epoch, to the same weights as a run that
was never interrupted: every epoch's data order and random seed depend only on
the epoch, and the optimizer state is saved with the parameters.

With ``distributed`` (RETURNN's ``torch_distributed``) and several ranks, it
trains data-parallel (``data_parallel``).

With ``torch_amp`` (RETURNN's option: ``"bfloat16"`` or ``"float16"``),
``train_step`` and ``forward_step`` run under ``verjus.autocast``: matrix
products in that dtype, the rest and every gradient in float32, so RETURNN's
``grad_scaler`` is not needed (``verjus.precision``).

While an epoch or an evaluation runs, ``progress`` (on unless ``False``) shows
its steps and the last step's losses on stderr: a tqdm bar on a terminal,
elsewhere (a log file) a line at most every 30 s (``verjus._progress``).

The learning rate of an epoch is ``learning_rate_control``'s (RETURNN's
``LearningRateControl``, or any object with ``get_learning_rate_for_epoch``
and ``set_epoch_error``), else ``learning_rates[epoch - 1]`` while the list
lasts, else ``learning_rate``; ``dynamic_learning_rate`` then maps it per step.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

import verjus.rf as rf
from verjus import distributed as dist
from verjus._files import write_text_atomic
from verjus._progress import EpochProgress, hms
from verjus.engine import checkpoints
from verjus.engine.batching import Prefetcher, batches, collate, shuffle_batches
from verjus.engine.data_parallel import DataParallel, rank_seed_offset, this_ranks
from verjus.engine.extern_data import ExternData, bind
from verjus.engine.optimizer import ParamOptimizer
from verjus.engine.worker import DataWorker, WorkerPrefetcher, can_fork
from verjus.plot import plot_curves
from verjus.precision import autocast

__all__ = ["Engine", "Source"]

METRICS_FILE = "metrics.jsonl"
CURVES_FILE = "curves.png"


class Source(Protocol):
    """A dataset the engine reads: one epoch's sequences, in the epoch's order."""

    def iter_epoch(self, epoch: int) -> Iterator[dict[str, np.ndarray]]: ...


class Engine:
    """Trains ``get_model(epoch=, step=)`` with ``train_step(model=, extern_data=)``;
    see the module docs for what each setting does (they are RETURNN's config
    options of the same names)."""

    def __init__(
        self,
        *,
        get_model: Callable[..., rf.Module],
        extern_data: Mapping[str, Any],
        train_step: Callable[..., None] | None = None,
        forward_step: Callable[..., None] | None = None,
        optimizer: Mapping[str, Any] | str | None = None,
        learning_rate: float = 1.0,
        learning_rates: Sequence[float] | None = None,
        dynamic_learning_rate: Callable[..., float] | None = None,
        learning_rate_control: Any = None,
        gradient_clip: float = 0.0,
        gradient_clip_global_norm: float = 0.0,
        accum_grad_multiple_step: int = 1,
        batch_size: int | dict[str, int] | None = None,
        max_seqs: int | None = None,
        max_seq_length: int | dict[str, int] | None = None,
        online_shuffle_batches: int | None = None,
        num_epochs: int = 1,
        model: str | None = None,
        save_interval: int = 1,
        device: str = "cpu",
        random_seed: int = 42,
        log: Callable[[str], None] | None = None,
        progress: bool | None = None,
        data_worker: str = "process",
        log_steps: bool = False,
        on_epoch_end: Callable[[dict[str, Any]], None] | None = None,
        distributed: Mapping[str, Any] | None = None,
        torch_amp: str | Mapping[str, Any] | None = None,
    ) -> None:
        if accum_grad_multiple_step < 1:
            raise ValueError(
                f"accum_grad_multiple_step must be >= 1, got {accum_grad_multiple_step}"
            )
        if num_epochs < 1 or save_interval < 1:
            raise ValueError(
                f"num_epochs and save_interval must be >= 1, got {num_epochs}, {save_interval}"
            )
        for name, value in (
            ("gradient_clip", gradient_clip),
            ("gradient_clip_global_norm", gradient_clip_global_norm),
        ):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0 (0: off), got {value}")
        self.autocast_dtype = _autocast_dtype(torch_amp)
        self.get_model = get_model
        self.extern = ExternData(extern_data)
        self.train_step = train_step
        self.forward_step = forward_step
        self.optimizer_options = optimizer
        self.learning_rate = float(learning_rate)
        self.learning_rates = list(learning_rates or ())
        self.dynamic_learning_rate = dynamic_learning_rate
        self.learning_rate_control = learning_rate_control
        self.gradient_clip = float(gradient_clip)
        self.gradient_clip_global_norm = float(gradient_clip_global_norm)
        self.accum_grad_multiple_step = int(accum_grad_multiple_step)
        self.batch_size = batch_size
        self.max_seqs = max_seqs
        self.max_seq_length = max_seq_length
        if online_shuffle_batches is not None and not (
            isinstance(online_shuffle_batches, int) and online_shuffle_batches >= 1
        ):
            raise ValueError(
                f"online_shuffle_batches must be None or an int >= 1 (batches), "
                f"got {online_shuffle_batches!r}"
            )
        self.online_shuffle_batches = online_shuffle_batches
        self.num_epochs = int(num_epochs)
        self.model_prefix = model
        self.save_interval = int(save_interval)
        self.device = device
        self.random_seed = int(random_seed)
        self.data_parallel = None
        if distributed is not None:
            self.data_parallel = DataParallel.from_options(distributed)
            if dist.init() is not None and device == "cuda":
                device = f"cuda:{dist.rank_env().local_rank}"  # a rank's own GPU
        main = dist.is_main_process()
        self.log = (log or (lambda line: print(line, flush=True))) if main else _quiet
        self.progress = (progress is None or bool(progress)) and main
        if data_worker not in ("process", "thread"):
            raise ValueError(f"data_worker must be 'process' or 'thread', got {data_worker!r}")
        self.data_worker = data_worker
        self.log_steps = log_steps
        self.on_epoch_end = on_epoch_end
        self.epoch = 0
        self.global_train_step = 0
        self.model: rf.Module | None = None
        self._worker: DataWorker | None = None
        self._worker_sources: list[Source] = []
        self.opt: ParamOptimizer | None = None
        self.metrics: list[dict[str, Any]] = []
        rf.set_default_device(device)

    # -- setup --------------------------------------------------------------

    def init_model(self, *, epoch: int = 1) -> rf.Module:
        """Makes the model (with the seed of the run) and its optimizer."""
        rf.set_random_seed(self.random_seed)
        self.model = self.get_model(epoch=epoch, step=self.global_train_step)
        if not isinstance(self.model, rf.Module):
            raise TypeError(f"get_model must return an rf.Module, got {type(self.model).__name__}")
        if self.train_step is not None:
            self.opt = ParamOptimizer(self.model, self.optimizer_options, self.learning_rate)
            if self.data_parallel is not None and dist.communicator() is not None:
                self.data_parallel.replicate(self.opt)
        return self.model

    def load_checkpoint(self, path: str | Path) -> None:
        """Loads parameters (``model.NNN.safetensors`` of a verjus run, or any
        safetensors file under RETURNN's names) into the model."""
        model = self.model if self.model is not None else self.init_model()
        rf.load_state(model, path)

    def _resume(self) -> int:
        """Loads the last finished epoch of ``model`` (if any); returns it."""
        if self.model_prefix is None:
            return 0
        last = checkpoints.last_epoch(self.model_prefix, up_to=self.num_epochs)
        if last:
            assert self.model is not None
            meta = checkpoints.load(
                checkpoints.Checkpoint(self.model_prefix, last), self.model, self.opt
            )
            self.global_train_step = int(meta["global_train_step"])
            self.metrics = [m for m in self._read_metrics() if m["epoch"] <= last]
            self.log(
                f"Resuming after epoch {last} (checkpoint {self.model_prefix}.{last:03d}), "
                f"global train step {self.global_train_step}"
            )
        return last

    # -- training -----------------------------------------------------------

    def train(self, train: Source, dev: Mapping[str, Source] | None = None) -> None:
        """Trains ``num_epochs`` epochs on ``train``, scoring ``dev`` (name ->
        dataset) after each; continues a run started before (see the module docs)."""
        if self.train_step is None:
            raise ValueError("train: no train_step was given")
        self.start_data_worker(train, *(dev or {}).values())
        try:
            self._train(train, dev)
        finally:
            self.close_data_worker()

    def start_data_worker(self, *sources: Source) -> None:
        """Forks the worker process that prepares the batches of ``sources`` for
        the whole run (``data_worker`` "process", where processes can be forked;
        see ``worker.py`` for why it is forked before the model is made). ``train``
        starts it if this did not; a later call keeps the running one."""
        if self._worker is None and self.data_worker == "process" and can_fork():
            self._worker_sources = list(sources)
            self._worker = DataWorker(self._produce_request)

    def close_data_worker(self) -> None:
        """Stops the worker of ``start_data_worker`` (if any)."""
        if self._worker is not None:
            self._worker.close()
            self._worker, self._worker_sources = None, []

    def _train(self, train: Source, dev: Mapping[str, Source] | None) -> None:
        if self.model is None:
            self.init_model()
        start = self._resume() + 1
        if start > self.num_epochs:
            self.log(f"Already trained until final epoch {self.num_epochs}, nothing to do.")
            return
        self.log(f"Starting training at epoch {start}, global train step {self.global_train_step}")
        for epoch in range(start, self.num_epochs + 1):
            self.epoch = epoch
            row = self.train_epoch(train)
            for name, source in (dev or {}).items():
                row[name] = self.evaluate(source, name=name)
            if dev:
                shown = " ".join(f"{n}: {_format_score(row[n])}" for n in dev)
                self.log(f"Epoch {epoch} evaluation: {shown}")
            if self.on_epoch_end is not None:
                self.on_epoch_end(row)
            self.metrics.append(row)
            if self.model_prefix is not None and (
                epoch % self.save_interval == 0 or epoch == self.num_epochs
            ):
                self._save(epoch)
        self.log(
            f"Finished training at epoch {self.num_epochs}, "
            f"global train step {self.global_train_step}"
        )

    def _learning_rate_for_epoch(self, epoch: int) -> float:
        if self.learning_rate_control is not None:
            return float(self.learning_rate_control.get_learning_rate_for_epoch(epoch))
        if epoch <= len(self.learning_rates):
            return float(self.learning_rates[epoch - 1])
        return self.learning_rate

    def _effective_lr(self, lr: float, epoch_continuous: float | None) -> float:
        if self.dynamic_learning_rate is None:
            return lr
        return float(
            self.dynamic_learning_rate(
                global_train_step=self.global_train_step,
                epoch=self.epoch,
                epoch_continuous=epoch_continuous,
                learning_rate=lr,
            )
        )

    def train_epoch(self, train: Source) -> dict[str, Any]:
        """One epoch over ``train``; returns its metrics row."""
        assert self.model is not None
        assert self.opt is not None
        assert self.train_step is not None
        epoch = self.epoch
        lr = self._learning_rate_for_epoch(epoch)
        self.opt.set_lr(self._effective_lr(lr, epoch - 1.0))
        rf.set_random_seed(
            _merge_seeds(epoch, self.global_train_step, self.random_seed + rank_seed_offset())
        )
        self.log(
            f"start epoch {epoch} global train step {self.global_train_step} "
            f"with effective learning rate {self.opt.lr} ..."
        )
        sums: dict[str, float] = {}
        norms: dict[str, float] = {}
        errors: set[str] = set()
        frames = padded = 0
        steps = 0
        accumulated = 0
        computing = 0.0
        begin = time.monotonic()
        bar = _progress(self.progress, f"ep {epoch} train")
        self.opt.zero_grad()
        with self._batches(train, epoch, shuffle=True) as stream:
            batches_left = iter(stream)
            # Data-parallel, every rank steps while all have a batch.
            while dist.all_ranks((raw := next(batches_left, None)) is not None):
                assert raw is not None
                step_begin = time.monotonic()
                extern_data = bind(self.extern, raw, with_targets=True)
                rf.init_train_step_run_ctx(
                    train_flag=True, step=self.global_train_step, epoch=epoch
                )
                with self._amp():
                    self.train_step(model=self.model, extern_data=extern_data)
                rf.get_run_ctx().total_loss().backward()
                step_scores = _add_losses(rf.get_run_ctx(), sums, norms, errors)
                # The step's graph holds the parameters' values: released before
                # the update, which then writes them in place instead of copying
                # each (RETURNN's AED demo, 87 M parameters: 0.15 s against 0.6 s).
                rf.reset_run_ctx()
                del extern_data
                accumulated += 1
                if accumulated >= self.accum_grad_multiple_step:
                    self.opt.step(
                        clip_value=self.gradient_clip,
                        clip_global_norm=self.gradient_clip_global_norm,
                    )
                    self.opt.zero_grad()
                    accumulated = 0
                step_time = time.monotonic() - step_begin
                computing += step_time
                if self.log_steps:
                    self._log_step(f"ep {epoch} train", steps, step_scores, step_time, begin)
                real, with_padding = _frames(raw)
                frames, padded = frames + real, padded + with_padding
                steps += 1
                self.global_train_step += 1
                if self.dynamic_learning_rate is not None:
                    self.opt.set_lr(self._effective_lr(lr, None))
                bar(step_scores)
        bar(None)
        if accumulated:
            self.opt.step(
                clip_value=self.gradient_clip, clip_global_norm=self.gradient_clip_global_norm
            )
            self.opt.zero_grad()
        if self.data_parallel is not None:
            self.data_parallel.end_epoch(self.opt)
        if steps == 0:
            raise ValueError(f"epoch {epoch}: the training data gave no batch")
        elapsed = time.monotonic() - begin
        scores = _scores(sums, norms)
        self.log(
            f"Epoch {epoch}: Trained {steps} steps, {hms(elapsed)} elapsed "
            f"({computing / elapsed:.1%} computing time, {1 - frames / max(padded, 1):.1%} padding)"
        )
        self.log(f"Epoch {epoch}: Total train loss: {_format_score(scores)}")
        if self.learning_rate_control is not None:
            self.learning_rate_control.set_epoch_error(
                epoch, {f"train_loss_{k}": v for k, v in scores.items()}
            )
        return {
            "epoch": epoch,
            "lr": lr,
            "steps": steps,
            "seconds": elapsed,
            "frames_per_second": frames / elapsed,
            "train": scores,
            "errors": sorted(errors),
        }

    def evaluate(self, source: Source, *, name: str = "dev") -> dict[str, float]:
        """The losses of ``train_step`` on ``source`` without training (train flag
        off), each summed over the data and divided by its frame count."""
        if self.model is None:
            self.init_model()
        assert self.train_step is not None
        sums: dict[str, float] = {}
        norms: dict[str, float] = {}
        bar = _progress(self.progress, f"ep {self.epoch} {name} eval")
        begin = time.monotonic()
        with self._batches(source, self.epoch or 1, this_rank=True) as stream:
            for step, raw in enumerate(stream):
                step_begin = time.monotonic()
                extern_data = bind(self.extern, raw, with_targets=True)
                rf.init_train_step_run_ctx(
                    train_flag=False, step=self.global_train_step, epoch=self.epoch
                )
                with self._amp():
                    self.train_step(model=self.model, extern_data=extern_data)
                scores = _add_losses(rf.get_run_ctx(), sums, norms, set())
                if self.log_steps:
                    prefix = f"ep {self.epoch} {name} eval"
                    self._log_step(prefix, step, scores, time.monotonic() - step_begin, begin)
                bar(scores)
        bar(None)
        scores = _scores(sums, norms)
        if not scores:
            raise ValueError(f"evaluate: dataset {name!r} gave no batch")
        if self.learning_rate_control is not None and self.epoch:
            self.learning_rate_control.set_epoch_error(
                self.epoch, {f"{name}_loss_{k}": v for k, v in scores.items()}
            )
        return scores

    # -- forward ------------------------------------------------------------

    def forward(self, source: Source, *, output: str | Path) -> dict[str, list[np.ndarray]]:
        """Runs ``forward_step`` over ``source`` and writes what it marked
        (``mark_as_output``) per sequence, padding removed, to ``output``: an
        ``.npz`` (``"<index>/<name>"``) or, with RETURNN installed, an ``.hdf``
        through RETURNN's ``SimpleHDFWriter``. Returns the outputs by name."""
        if self.forward_step is None:
            raise ValueError("forward: no forward_step was given")
        if self.model is None:
            self.init_model()
        outputs: dict[str, list[np.ndarray]] = {}
        with self._batches(source, self.epoch or 1, with_targets=False) as stream:
            for raw in stream:
                extern_data = bind(self.extern, raw, with_targets=False)
                rf.init_forward_step_run_ctx(epoch=self.epoch or 1, step=self.global_train_step)
                with self._amp():
                    self.forward_step(model=self.model, extern_data=extern_data)
                for key, value in rf.get_run_ctx().outputs.data.items():
                    outputs.setdefault(key, []).extend(_per_sequence(value))
        _write_outputs(outputs, Path(output))
        return outputs

    # -- helpers ------------------------------------------------------------

    def _batches(
        self,
        source: Source,
        epoch: int,
        *,
        with_targets: bool = True,
        shuffle: bool = False,
        this_rank: bool = False,
    ) -> Prefetcher | WorkerPrefetcher | Any:
        """The epoch's collated batches, prepared in the run's worker process
        (``start_data_worker``), in a worker forked for this pass (``data_worker``
        "process", where processes can be forked) or in a background thread;
        with ``shuffle`` (training) in the order of ``online_shuffle_batches``,
        and data-parallel only this rank's (training, or ``this_rank``)."""
        request = (epoch, with_targets, shuffle, this_rank)
        index = next((i for i, s in enumerate(self._worker_sources) if s is source), None)
        if self._worker is not None and index is not None:
            return self._worker.stream((index, *request))
        if self.data_worker == "process" and can_fork():
            return WorkerPrefetcher(lambda: self._produce(source, *request))
        return Prefetcher(self._produce(source, *request))

    def _produce_request(self, request: tuple[int, int, bool, bool, bool]) -> Iterator[Any]:
        """``_produce`` of a request to the run's worker (the source by its index)."""
        index, *rest = request
        return self._produce(self._worker_sources[index], *rest)

    def _produce(
        self, source: Source, epoch: int, with_targets: bool, shuffle: bool, this_rank: bool
    ) -> Iterator[dict[str, np.ndarray]]:
        """The collated batches of ``source``'s epoch (see ``_batches``)."""
        keys = set(self.extern.keys(with_targets=with_targets))
        seqs = ({k: v for k, v in s.items() if k in keys} for s in source.iter_epoch(epoch))
        groups = batches(
            seqs,
            batch_size=self.batch_size,
            max_seqs=self.max_seqs,
            max_seq_length=self.max_seq_length,
        )
        if shuffle and self.online_shuffle_batches is not None:
            groups = shuffle_batches(
                groups,
                buffer_size=self.online_shuffle_batches,
                seed=_merge_seeds(epoch, self.random_seed),
            )
        if shuffle or this_rank:
            groups = this_ranks(groups)
        for batch in groups:
            yield collate(batch)

    def _log_step(
        self, prefix: str, step: int, scores: dict[str, float], seconds: float, begin: float
    ) -> None:
        """A step's line, as RETURNN's log prints it at verbosity 5."""
        shown = ", ".join(f"{k} {_format_value(v)}" for k, v in scores.items())
        elapsed = hms(time.monotonic() - begin)
        self.log(f"{prefix}, step {step}, {shown}, {seconds:.3f} sec/step, elapsed {elapsed}")

    def _amp(self) -> contextlib.AbstractContextManager[object]:
        """The scope a step runs in: ``torch_amp``'s autocast, or nothing (an
        autocast the caller entered around ``train`` stays in effect)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return autocast(self.autocast_dtype)

    def _save(self, epoch: int) -> None:
        """The epoch's checkpoint and metrics, written by rank 0 (the replicas
        are equal) while the other ranks wait for it."""
        if dist.is_main_process():
            self._write_checkpoint(epoch)
        dist.barrier()

    def _write_checkpoint(self, epoch: int) -> None:
        assert self.model is not None
        assert self.opt is not None
        assert self.model_prefix is not None
        ckpt = checkpoints.Checkpoint(self.model_prefix, epoch)
        # The learning-rate control's file first: a checkpoint found on resumption
        # always has its epoch's scores there (a later epoch's are overwritten).
        if self.learning_rate_control is not None and hasattr(self.learning_rate_control, "save"):
            self.learning_rate_control.save()
        checkpoints.save(
            ckpt,
            self.model,
            self.opt,
            {"epoch": epoch, "global_train_step": self.global_train_step},
        )
        self._write_metrics()
        self.log(f"Saved model {ckpt.params}")

    def _folder(self) -> Path:
        assert self.model_prefix is not None
        return Path(self.model_prefix).parent

    def _read_metrics(self) -> list[dict[str, Any]]:
        path = self._folder() / METRICS_FILE
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def _write_metrics(self) -> None:
        folder = self._folder()
        write_text_atomic(
            folder / METRICS_FILE, "".join(json.dumps(m) + "\n" for m in self.metrics)
        )
        try:
            plot_curves([_curve_row(m) for m in self.metrics], folder / CURVES_FILE)
        except Exception as e:  # the plot is a picture: training goes on
            self.log(f"warning: no {CURVES_FILE}: {e}")


def _quiet(line: str) -> None:
    """The log of a rank other than 0: rank 0 tells the run."""


def _scores(sums: Mapping[str, float], norms: Mapping[str, float]) -> dict[str, float]:
    """Each loss summed (over the ranks too), divided by its summed frame count."""
    sums, norms = dist.sum_by_key(sums), dist.sum_by_key(norms)
    return {k: sums[k] / norms[k] for k in sums}


def _add_losses(
    ctx: Any, sums: dict[str, float], norms: dict[str, float], errors: set[str]
) -> dict[str, float]:
    """Adds the step's summed losses and frame counts to ``sums`` / ``norms``;
    returns the step's normalized scores."""
    step: dict[str, float] = {}
    for name, loss in ctx.losses.items():
        summed = float(loss.get_summed_loss().numpy())
        inv = loss.get_inv_norm_factor()
        inv = float(inv.numpy()) if isinstance(inv, rf.Tensor) else float(inv)
        sums[name] = sums.get(name, 0.0) + summed
        norms[name] = norms.get(name, 0.0) + inv
        step[name] = summed / inv if inv else float("nan")
        if loss.as_error:
            errors.add(name)
    return step


def _frames(raw: Mapping[str, np.ndarray]) -> tuple[int, int]:
    """Real and padded frames of the batch's first key with lengths."""
    for key, value in raw.items():
        if key.endswith(":seq_len"):
            return int(value.sum()), int(value.size * raw[key[: -len(":seq_len")]].shape[1])
    return int(raw["num_seqs"]), int(raw["num_seqs"])


def _per_sequence(value: rf.Tensor) -> list[np.ndarray]:
    """A marked output ``[batch, ...]`` cut into its sequences, the padding of
    its dynamic dims removed."""
    array = value.numpy()
    dims = value.dims
    if not dims or not dims[0].is_batch_dim():
        return [array]
    lengths = [
        (axis, d.dyn_size_ext.numpy()) for axis, d in enumerate(dims) if d.is_dynamic() and axis > 0
    ]
    out = []
    for b in range(array.shape[0]):
        seq = array[b]
        for axis, lens in lengths:
            seq = np.take(
                seq,
                np.arange(int(np.asarray(lens).reshape(-1)[b] if np.ndim(lens) else lens)),
                axis=axis - 1,
            )
        out.append(seq)
    return out


def _write_outputs(outputs: Mapping[str, list[np.ndarray]], path: Path) -> None:
    import io

    from verjus._files import write_bytes_atomic

    if path.suffix == ".hdf":
        _write_hdf(outputs, path)
        return
    buf = io.BytesIO()
    np.savez(
        buf, **{f"{i}/{name}": a for name, seqs in outputs.items() for i, a in enumerate(seqs)}
    )
    write_bytes_atomic(path, buf.getvalue())


def _write_hdf(outputs: Mapping[str, list[np.ndarray]], path: Path) -> None:
    """The default output through RETURNN's ``SimpleHDFWriter`` (RETURNN's forward format)."""
    try:
        from returnn.datasets.hdf import SimpleHDFWriter
    except ImportError as e:
        raise RuntimeError(
            f"{path}: writing HDF needs RETURNN and h5py (pip install 'verjus[returnn]'): {e}"
        ) from None
    seqs = outputs.get("output") or next(iter(outputs.values()))
    first = seqs[0]
    tmp = path.with_name(path.name + ".tmp")
    writer = SimpleHDFWriter(
        str(tmp), dim=first.shape[-1] if first.ndim >= 2 else None, ndim=first.ndim
    )
    for i, seq in enumerate(seqs):
        writer.insert_batch(
            seq[None], seq_len=[seq.shape[0]] if seq.ndim else [1], seq_tag=[f"seq-{i}"]
        )
    writer.close()
    tmp.replace(path)


def _curve_row(m: Mapping[str, Any]) -> dict[str, float]:
    """The ``plot_curves`` row of a metrics row: the first loss that is not an
    error, on train and on the first dev set, and 1 - the first error as accuracy."""
    row: dict[str, float] = {"epoch": m["epoch"]}
    train = m["train"]
    losses = [k for k in train if k not in m.get("errors", ())]
    dev = next((v for k, v in m.items() if isinstance(v, dict) and k != "train"), None)
    if losses:
        row["train_loss"] = train[losses[0]]
        if dev and losses[0] in dev:
            row["test_loss"] = dev[losses[0]]
    errors = m.get("errors") or []
    if dev and errors and errors[0] in dev:
        row["test_accuracy"] = 1.0 - dev[errors[0]]
    return row


def _merge_seeds(*values: int) -> int:
    """One 31-bit seed from several ints (epoch, step, base seed)."""
    return zlib.crc32(np.asarray(values, np.int64).tobytes()) & 0x7FFFFFFF


def _format_value(v: float) -> str:
    """A score as RETURNN prints it."""
    return f"{v:.3e}" if abs(v) > 1e3 or abs(v) < 1e-3 else f"{v:.3f}"


def _autocast_dtype(torch_amp: str | Mapping[str, Any] | None) -> str | None:
    """The dtype of RETURNN's ``torch_amp`` (``"bfloat16"``, ``"float16"``, or a
    dict with ``"dtype"``; ``"bf16"``/``"fp16"`` as RETURNN accepts them), or
    None for float32."""
    if torch_amp is None:
        return None
    dtype = torch_amp.get("dtype") if isinstance(torch_amp, Mapping) else torch_amp
    names = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16"}
    if not isinstance(dtype, str) or dtype not in names:
        raise ValueError(
            "torch_amp: expected 'bfloat16' or 'float16' (or a dict with 'dtype'), "
            f"got {torch_amp!r}"
        )
    return names[dtype]


def _format_score(score: Mapping[str, float]) -> str:
    """RETURNN's format of scores: ``ce 0.123 fer 0.045`` (one score alone: its value)."""
    if len(score) == 1:
        return _format_value(next(iter(score.values())))
    return " ".join(f"{k} {_format_value(v)}" for k, v in score.items())


def _progress(enabled: bool, desc: str) -> Callable[[dict[str, float] | None], None]:
    """Progress over steps (``verjus._progress``: a bar on a terminal, else a line
    now and then) as an update function: a step's scores, ``None`` at the end.
    The text after the counts is the last step's scores."""
    progress = EpochProgress(desc, enabled)

    def update(scores: dict[str, float] | None) -> None:
        if scores is None:
            progress.close()
            return
        progress.step(lambda: ", ".join(f"{k}={v:.4g}" for k, v in scores.items()))

    return update
