"""The ``verjus`` command.

    verjus train NET.json --data fashion-mnist --epochs 3 --optimizer adam --lr 1e-3 \\
        --batch-size 128 --device cpu --out runs/cnn
    verjus info NET.json
    verjus predict RUN_FOLDER --data fashion-mnist --split test --device cpu
    verjus predict NET.json WEIGHTS --data fashion-mnist --split test --device cpu
    verjus train examples/nets/char_lm.json --data fortunes --lr 2e-3 --batch-size 32 \
        --clip-norm 1.0 --out runs/char_lm
    verjus train examples/nets/char_lm.json ... --epochs 5 --out runs/char_lm --resume
    verjus sample runs/char_lm --prompt "The " --chars 200 --temperature 0.8 --seed 0
    verjus returnn demo-rf.config ++num_epochs 2

``train`` prints the training loss and the test loss and accuracy after each
epoch and keeps a run folder up to date (rewritten atomically after every
epoch, so an interrupted run leaves usable files): a training checkpoint
(``network.json``, ``weights.safetensors``, ``trainer.json``,
``solver.safetensors``, ``checkpoint.json``; ``verjus.Network.load`` and
``verjus.Trainer.resume`` read it), replaced as a whole atomically, and beside
it ``metrics.jsonl`` (one JSON object per epoch) and ``curves.png``, which the
checkpoint saves keep.
``returnn`` runs a RETURNN config file on verjus (``verjus.returnn``).
``predict`` prints the accuracy and the confusion matrix of saved weights: a
run folder alone (it holds its ``network.json``), or a definition and a
weights file or run folder.

``--device`` (``cpu``, ``cuda``, ``cuda:N``) is where the network is built and
computes; a device that cannot be used here (no GPU, a CUDA library missing)
is a one-line error naming what is missing, before any data is read.

``--out`` must be a new or empty folder, or a run folder of an earlier
``train`` with ``--overwrite``; any other folder is refused, so that a run never
replaces a folder of other files. ``--resume`` continues the run in ``--out``
from its last checkpoint (the end of its last finished epoch) up to
``--epochs`` in all: the next epoch is numbered on (``epoch 2/3``), its rows
are added to ``metrics.jsonl`` and ``curves.png`` is redrawn, and the epochs
train the batches an uninterrupted run would have. The command must repeat
the run's definition and settings (data, optimizer, learning rate, batch
size, seed...; ``run.json`` records them), or it is refused naming the one
that differs. The network and the data are checked against
each other before anything is written there, and one ``train`` at a time holds
the folder (a second one to the same ``--out`` is refused while the first runs).
``predict`` given a run folder checks its files against the folder's manifest
and its ``network.json`` against ``NET.json``.

A text definition (its input is a sequence of int32 token ids, such as
``examples/nets/char_lm.json``) trains a character language model on the
texts of ``--data fortunes`` (the default: Debian's ``fortunes`` package, or
the folder in ``$VERJUS_FORTUNES``) or ``--data FOLDER`` (text files, texts
separated by lines holding only ``%``): texts over ``--max-len`` characters
are left out and every 20th is for validation; each epoch prints the
validation bits per character, as ``metrics.jsonl`` records it and
``curves.png`` draws it, and the run folder also gets ``vocab.json``.
Where the definition says ``"vocab"`` instead of a number, the data's
vocabulary size is filled in. ``sample`` generates text from such a run,
feeding one character per step with the LSTM state carried over
(``--temperature 0``: the most likely character each step).

Any other definition is an image classifier, whose ``--data`` is
``fashion-mnist`` (the default: Debian's ``dataset-fashion-mnist`` package, or
the folder in ``$VERJUS_FASHION_MNIST``) or a folder holding the four IDX
``.gz`` files. Data of the other kind is refused, naming what the network
takes. Errors are printed as one line naming what was wrong, and the
command exits with status 1 (2 for bad arguments, 130 when interrupted).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from verjus import __version__, distributed, optim
from verjus._files import write_text_atomic
from verjus._textcli import (
    VOCAB_FILE,
    batchers,
    check_text_input,
    fill_vocab,
    has_vocab_placeholder,
    holds_idx_files,
    is_text_definition,
    load_text,
    sample_text,
)
from verjus._verjus import DEFINITION_FILE, MANIFEST_FILE
from verjus.data import FASHION_MNIST_CLASSES, CharVocab, fashion_mnist
from verjus.launch import launch, without_nproc
from verjus.network import Network
from verjus.plot import BITS_PER_CHARACTER, LOSS_AND_ACCURACY, plot_curves
from verjus.precision import PRECISIONS, skipped_note
from verjus.trainer import Callback, Trainer

__all__ = ["main"]

METRICS_FILE = "metrics.jsonl"
CURVES_FILE = "curves.png"
SETTINGS_FILE = "run.json"  # the settings a --resume must repeat
RUN_FILES = (METRICS_FILE, CURVES_FILE, VOCAB_FILE, SETTINGS_FILE)  # beside the checkpoint
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a reader gone early
IMAGE_DATA = "--data fashion-mnist (the installed data set) or a folder of its four IDX .gz files"
DATA_HELP = (
    "what to train on: for an image classifier, fashion-mnist (the default; the installed "
    "data set) or a folder of its four IDX .gz files; for a text network (int32 token ids, "
    "such as examples/nets/char_lm.json), fortunes (the default; the installed fortunes) or a "
    "folder of text files, texts separated by lines holding only %%"
)


def _count(n: int, noun: str) -> str:
    """``1 epoch``, ``3 epochs``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _image_data(data: str, network: str) -> str | None:
    """The folder of an image classifier's ``--data``: ``None`` (the installed
    set) for ``fashion-mnist``. Text is refused by name here, since the reader
    of Fashion-MNIST would only say that Fashion-MNIST is not installed."""
    if data == "fashion-mnist":
        return None
    if data == "fortunes" or (Path(data).is_dir() and not holds_idx_files(data)):
        what = (
            "text, for a text network such as examples/nets/char_lm.json"
            if data == "fortunes"
            else "a folder without IDX .gz files"
        )
        raise ValueError(
            f"--data {data}: {what}; {network} is an image classifier, which takes {IMAGE_DATA} "
            "(`apt-get install dataset-fashion-mnist` installs the data set)"
        )
    return data


def _optimizer(args: argparse.Namespace) -> optim.Optimizer:
    if args.optimizer == "sgd":
        return optim.SGD(
            lr=args.lr,
            momentum=args.momentum,
            nesterov=args.nesterov,
            weight_decay=args.weight_decay,
            clip_norm=args.clip_norm,
        )
    if args.optimizer == "adamw":
        return optim.AdamW(lr=args.lr, weight_decay=args.weight_decay, clip_norm=args.clip_norm)
    return optim.Adam(lr=args.lr, weight_decay=args.weight_decay, clip_norm=args.clip_norm)


class _RunFolder(Callback):
    """Prints each epoch and rewrites the run folder's files after it (rank 0
    of a data-parallel run; the other ranks wait for its checkpoint)."""

    def __init__(
        self,
        out: Path,
        title: str,
        total_epochs: int,
        earlier: list[dict],
        *,
        vocab: CharVocab | None = None,
    ):
        self.out = out
        self.title = title
        self.total_epochs = total_epochs
        self.epochs = earlier  # the rows of the epochs before a --resume
        self.vocab = vocab  # a character model's, saved with each checkpoint
        self.text = vocab is not None
        self.plot_failed = False

    def on_epoch_end(self, trainer: Trainer, metrics: Mapping[str, float]) -> None:
        if not distributed.is_main_process():
            trainer.save_checkpoint(self.out, vocab=self.vocab)  # collective: rank 0 writes
            return
        if self.text:
            self._text_row(trainer, metrics)
            return
        row = {
            "epoch": int(metrics["epoch"]),
            "train_loss": metrics["train_loss"],
            "test_loss": metrics["val_loss"],
            "test_accuracy": metrics["val_accuracy"],
            "seconds": metrics["seconds"],
            "examples_per_second": metrics["examples_per_second"],
            "lr": trainer.lr,
            **_skipped(metrics),
        }
        self.epochs.append(row)
        print(
            f"epoch {row['epoch']}/{self.total_epochs}: train loss {row['train_loss']:.4f}, "
            f"test loss {row['test_loss']:.4f}, test accuracy {row['test_accuracy']:.4f} "
            f"({row['seconds']:.1f} s, {row['examples_per_second']:,.0f} examples/s"
            f"{skipped_note(metrics)})",
            flush=True,
        )
        self._write(trainer)

    def _text_row(self, trainer: Trainer, metrics: Mapping[str, float]) -> None:
        """A character model's epoch as its line says it: bits per character on
        training and validation (not the loss in nats, nor a "test" split)."""
        row = {
            "epoch": int(metrics["epoch"]),
            "train_bpc": metrics["train_bpc"],
            "validation_bpc": metrics["val_bpc"],
            "seconds": metrics["seconds"],
            "characters_per_second": metrics["frames_per_second"],
            "lr": trainer.lr,
            **_skipped(metrics),
        }
        self.epochs.append(row)
        print(
            f"epoch {row['epoch']}/{self.total_epochs}: train {row['train_bpc']:.4f} bpc, "
            f"validation {row['validation_bpc']:.4f} bits per character "
            f"({row['seconds']:.1f} s, {row['characters_per_second']:,.0f} characters/s"
            f"{skipped_note(metrics)})",
            flush=True,
        )
        self._write(trainer)

    def _write(self, trainer: Trainer) -> None:
        """The checkpoint, metrics.jsonl and curves.png, each replaced atomically."""
        trainer.save_checkpoint(self.out, vocab=self.vocab)
        lines = "".join(json.dumps(e) + "\n" for e in self.epochs)
        write_text_atomic(self.out / METRICS_FILE, lines)
        panels = BITS_PER_CHARACTER if self.text else LOSS_AND_ACCURACY
        try:
            plot_curves(self.epochs, self.out / CURVES_FILE, title=self.title, panels=panels)
        except Exception as e:  # the plot is a picture: training goes on
            if not self.plot_failed:
                print(f"verjus: warning: no {CURVES_FILE}: {e}", file=sys.stderr, flush=True)
            self.plot_failed = True


def _check_out(out: Path, overwrite: bool, resume: bool) -> None:
    """``--out`` is new, an empty folder, or (with ``--overwrite``) a run
    folder; with ``--resume``, a run folder."""
    if resume:
        if not (out / MANIFEST_FILE).is_file():
            raise ValueError(f"--out {out}: holds no run to resume; drop --resume to start one")
        return
    if not out.exists():
        return
    if not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a folder")
    names = sorted(p.name for p in out.iterdir())
    if not names:
        return
    if MANIFEST_FILE not in names:
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise ValueError(
            f"--out {out}: not a verjus run folder (it holds {shown}); give a new or empty folder"
        )
    if not overwrite:
        raise ValueError(
            f"--out {out}: already holds a run; pass --resume to continue it, --overwrite to "
            "replace it, or give another folder"
        )


@contextlib.contextmanager
def _holding(out: Path) -> Iterator[None]:
    """Holds the lock file ``.{name}.run.lock`` beside ``out`` for the whole run:
    a second ``train`` to the same folder is refused instead of the two runs'
    epochs overwriting each other's checkpoints and metrics."""
    try:
        import fcntl
    except ImportError:  # not POSIX: unguarded
        yield
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.run.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"--out {out}: another verjus train is writing to it") from None
        except OSError:
            pass  # a file system without locks: unguarded
        yield


@contextlib.contextmanager
def _run_folder(
    args: argparse.Namespace, out: Path, trainer: Trainer, vocab: CharVocab | None = None
) -> Iterator[None]:
    """The run folder while a run writes it: held (``_holding``), checked
    again, and for a new run without a replaced run's files and with the
    initial network and ``run.json`` (a folder that cannot be written fails
    now, not after an epoch of training). Rank 0 of a data-parallel run holds
    it; the other ranks write nothing."""
    if not distributed.is_main_process():
        if not args.resume:
            trainer.save_checkpoint(out, vocab=vocab)  # a collective call: rank 0 writes
        yield
        return
    with _holding(out):
        _check_out(out, args.overwrite, args.resume)  # again, now that this run holds it
        if not args.resume:
            for name in RUN_FILES:
                (out / name).unlink(missing_ok=True)
            trainer.save_checkpoint(out, vocab=vocab)
            write_text_atomic(out / SETTINGS_FILE, json.dumps(_settings(args), indent=1) + "\n")
        yield


def _skipped(metrics: Mapping[str, float]) -> dict[str, int]:
    """A ``metrics.jsonl`` row's ``skipped_steps`` (float16's overflowed steps),
    where ``fit`` counted them."""
    return {"skipped_steps": int(metrics["skipped_steps"])} if "skipped_steps" in metrics else {}


def _settings(args: argparse.Namespace) -> dict[str, object]:
    """The settings that decide a run's batches and updates, which a
    ``--resume`` must repeat: ``--data`` (a folder by its absolute path) and
    those of the optimizer, the batches and the text (``--max-len``)."""
    data = args.data if args.data in ("fashion-mnist", "fortunes") else os.path.abspath(args.data)
    names = ["optimizer", "lr", "momentum", "nesterov", "weight_decay", "clip_norm"]
    names += ["batch_size", "seed"] + (["max_len"] if args.text else [])
    return {"data": data, **{name: getattr(args, name) for name in names}}


def _trainer(args: argparse.Namespace, out: Path, definition: str | dict) -> Trainer:
    """A trainer of a new network built from ``definition`` on ``--device``
    (a device that is not there fails before the data loads) or, with
    ``--resume``, the run's trainer, whose network and settings must be
    ``definition`` and the command's."""
    if not args.resume:
        net = Network.from_def(definition, seed=args.seed, device=args.device)
        return Trainer(net, _optimizer(args), "cross_entropy", precision=args.precision)
    trainer = Trainer.resume(out, device=args.device, precision=args.precision)
    if trainer.network.to_def() != Network.from_def(definition).to_def():
        raise ValueError(
            f"--resume: {out / DEFINITION_FILE} is not the network of {args.network}; "
            "resume with the definition the run was trained with"
        )
    recorded = _recorded_settings(out)
    given = _settings(args)
    differ = [k for k in given if recorded.get(k) != given[k]]
    if differ:
        shown = ", ".join(
            f"--{k.replace('_', '-')} {given[k]} differs from the run's {recorded.get(k)}"
            for k in differ
        )
        raise ValueError(f"--resume: {shown}; continue with the run's settings, or start a new run")
    return trainer


def _recorded_settings(out: Path) -> dict[str, object]:
    """The settings a run began with (``run.json``)."""
    path = out / SETTINGS_FILE
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(
            f"--resume: {path} is missing (a run of an earlier verjus): its settings are not "
            "known, so it cannot be continued as it would have gone on"
        ) from None
    except ValueError as e:
        raise ValueError(f"--resume: {path}: not JSON: {e}") from None
    if not isinstance(recorded, dict):
        raise ValueError(f"--resume: {path}: not a JSON object of settings")
    return recorded


def _resume_point(
    args: argparse.Namespace, out: Path, trainer: Trainer, steps_per_epoch: int
) -> tuple[int, list[dict]]:
    """The epochs the run has done and their ``metrics.jsonl`` rows (none for
    a new run). The checkpoint's step count says how many: a checkpoint is
    written at each epoch's end before that epoch's row, so a run killed
    between the two lacks that row, and one killed mid-epoch has no row past
    its checkpoint."""
    if not args.resume:
        return 0, []
    done, part = divmod(trainer.step, steps_per_epoch)
    if part:
        raise ValueError(
            f"--resume: the checkpoint in {out} is at step {trainer.step}, not at the end of an "
            f"epoch of {steps_per_epoch} steps"
        )
    if done >= args.epochs:
        raise ValueError(
            f"--resume: the run in {out} has done {_count(done, 'epoch')} already; "
            f"give --epochs more than {done} to train on"
        )
    path = out / METRICS_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        return done, [row for row in map(json.loads, lines) if row["epoch"] <= done]
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"--resume: {path}: not the metrics of a run: {e!r}") from None


def _announce(line: str) -> None:
    """Prints a run's first line (rank 0 of a data-parallel run, naming the ranks)."""
    comm = distributed.communicator()
    if comm is None:
        print(line, flush=True)
    elif comm.rank == 0:
        print(f"{line}, {comm.world} ranks", flush=True)


def _rank_device(device: str) -> str:
    """``--device``: ``cuda`` means the GPU of this rank's local rank."""
    if device == "cuda" and distributed.communicator() is not None:
        return f"cuda:{distributed.rank_env().local_rank}"
    return device


def _check_classifier(net: Network) -> None:
    """The network's one output scores the Fashion-MNIST classes."""
    name, unit = net.outputs[0]
    if list(unit) != [len(FASHION_MNIST_CLASSES)]:
        raise ValueError(
            f"the network's output {name!r} has unit shape {list(unit)}, "
            f"expected [{len(FASHION_MNIST_CLASSES)}] class scores"
        )


def _read_definition(path: str) -> dict | None:
    """The definition file as a dict, or None when it is not a JSON object
    (``Network.from_def`` then says what is wrong)."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            definition = json.load(f)
    except (OSError, ValueError):
        return None
    return definition if isinstance(definition, dict) else None


def _train(args: argparse.Namespace) -> int:
    distributed.init()  # a rank of a data-parallel run joins the others
    args.device = _rank_device(args.device)
    out = Path(args.out).resolve()
    main = distributed.is_main_process()
    if main:
        _check_out(out, args.overwrite, args.resume)
    definition = _read_definition(args.network)
    args.text = definition is not None and is_text_definition(definition)
    if args.data is None:
        args.data = "fortunes" if args.text else "fashion-mnist"
    if args.text:
        return _train_text(args, out, definition)
    if definition is not None:
        check_text_input(definition, args.network)
    data_dir = _image_data(args.data, args.network)
    trainer = _trainer(args, out, args.network)
    net = trainer.network
    _check_classifier(net)
    x, y = fashion_mnist("train", data_dir)
    test = fashion_mnist("test", data_dir)
    done, earlier = _resume_point(args, out, trainer, -(-len(x) // args.batch_size))
    # A surrogate-escaped (non-UTF-8) file name cannot be drawn in the plot's title.
    name = Path(args.network).name.encode("utf-8", "replace").decode("utf-8")
    _announce(
        f"{name}: {len(x)} training and {len(test[0])} test images, "
        f"{args.optimizer} lr {args.lr:g}, batch {args.batch_size}, "
        f"{_count(args.epochs, 'epoch')}, device {trainer.device}{_resumed(args, done)}"
    )
    net.forward(x[:1])  # the data fits the network, before anything is written
    with _run_folder(args, out, trainer):
        title = f"{name}, {args.optimizer} lr {args.lr:g}, batch {args.batch_size}"
        run = _RunFolder(out, title, args.epochs, earlier)
        trainer.fit(
            x,
            y,
            epochs=args.epochs,
            initial_epoch=done,
            batch_size=args.batch_size,
            validation_data=test,
            seed=args.seed,
            progress=not args.no_progress,
            verbose=0,  # _RunFolder prints each epoch, naming the test split
            callbacks=[run],
        )
    shown = Path(args.out)  # as given, not resolved
    if not main:
        return 0
    if not run.epochs:
        print(f"no epochs run; the initial network is in {shown}")
        return 0
    print(f"final test accuracy: {run.epochs[-1]['test_accuracy']:.4f}")
    print(f"run folder: {shown} ({', '.join(sorted(p.name for p in out.iterdir()))})")
    print(f"plot: {shown / CURVES_FILE}")
    return 0


def _resumed(args: argparse.Namespace, done: int) -> str:
    """The end of a run's first line: where a resumed run goes on from."""
    return f", resumed after epoch {done}" if args.resume else ""


def _train_text(args: argparse.Namespace, out: Path, definition: dict) -> int:
    """``train`` on a character language model definition."""
    train, validation, vocab = load_text(args.data, args.max_len, args.network)
    filled = fill_vocab(definition, vocab.size, args.network)
    trainer = _trainer(args, out, filled)
    name, unit = trainer.network.outputs[0]
    if list(unit) != [vocab.size]:
        raise ValueError(
            f"the network's output {name!r} has unit shape {list(unit)}, expected "
            f'[{vocab.size}] scores over the vocabulary (write "out_features": "vocab")'
        )
    if args.resume and CharVocab.from_run(out).chars != vocab.chars:
        raise ValueError(
            f"--resume: the characters of --data {args.data} are not those of the run's "
            f"{out / VOCAB_FILE}: the data changed since the run began"
        )
    train_batches, val_batches = batchers(train, validation, vocab, args.batch_size)
    done, earlier = _resume_point(args, out, trainer, len(train_batches))
    shown_name = Path(args.network).name.encode("utf-8", "replace").decode("utf-8")
    _announce(
        f"{shown_name}: {len(train)} training texts ({train_batches.tokens:,} characters) and "
        f"{len(validation)} validation texts, vocabulary {vocab.size}, {args.optimizer} lr "
        f"{args.lr:g}, batch {args.batch_size}, clip norm {args.clip_norm}, "
        f"{_count(args.epochs, 'epoch')}, device {trainer.device}{_resumed(args, done)}"
    )
    with _run_folder(args, out, trainer, vocab):
        title = f"{shown_name}, {args.optimizer} lr {args.lr:g}, batch {args.batch_size}"
        run = _RunFolder(out, title, args.epochs, earlier, vocab=vocab)
        trainer.fit(
            train_batches,
            epochs=args.epochs,
            initial_epoch=done,
            validation_data=val_batches,
            seed=args.seed,
            progress=not args.no_progress,
            verbose=0,
            callbacks=[run],
        )
    shown = Path(args.out)
    if not distributed.is_main_process():
        return 0
    if run.epochs:
        print(f"final validation bits per character: {run.epochs[-1]['validation_bpc']:.4f}")
    print(f"run folder: {shown} ({', '.join(sorted(p.name for p in out.iterdir()))})")
    return 0


def _sample(args: argparse.Namespace) -> int:
    print(
        sample_text(args.folder, args.prompt, args.chars, args.temperature, args.seed, args.device)
    )
    return 0


def _info(args: argparse.Namespace) -> int:
    definition = _read_definition(args.network)
    if definition is not None:
        check_text_input(definition, args.network)
    if definition is None or not has_vocab_placeholder(definition):
        Network.from_def(args.network).summary()
        return 0
    if args.vocab is None:
        raise ValueError(
            f'{args.network}: its size is "vocab", taken from the data by `verjus train`; '
            "give the vocabulary size with --vocab N"
        )
    Network.from_def(fill_vocab(definition, args.vocab, args.network)).summary()
    return 0


def _confusion(labels: npt.NDArray[np.int64], predicted: npt.NDArray[np.int64], classes: int):
    """``matrix[true, predicted]`` counts."""
    flat = labels.astype(np.int64) * classes + predicted.astype(np.int64)
    return np.bincount(flat, minlength=classes * classes).reshape(classes, classes)


def _format_confusion(matrix: npt.NDArray[np.int64], names: Sequence[str]) -> str:
    """The matrix with whole class names: each column as wide as its name or its
    largest count."""
    label_width = max(len(n) for n in names)
    widths = [max(len(name), len(str(int(matrix[:, j].max())))) for j, name in enumerate(names)]

    def line(label: str, cells: Sequence[str]) -> str:
        return label.ljust(label_width) + "".join(
            "  " + cell.rjust(w) for cell, w in zip(cells, widths, strict=True)
        )

    rows = [line(names[i], [str(v) for v in matrix[i]]) for i in range(len(names))]
    return "\n".join(["rows: true class, columns: predicted class", line("", names), *rows])


def _predict(args: argparse.Namespace) -> int:
    if args.weights is None:
        # One argument: a run (or network) folder, which holds its definition.
        weights = Path(args.network)
        if not weights.is_dir():
            raise ValueError(
                f"predict {args.network}: a definition needs the weights too "
                "(verjus predict NET.json WEIGHTS); a run folder can be given alone"
            )
        net = Network.load(weights, device=args.device)
    elif (weights := Path(args.weights)).is_dir():
        # The whole run folder, checked against its manifest, and its
        # definition against the one given.
        net = Network.load(weights, device=args.device)
        if net.to_def() != Network.from_def(args.network).to_def():
            raise ValueError(
                f"{weights / DEFINITION_FILE} is not the network of {args.network}: "
                "predict with the definition the run was trained with"
            )
    else:
        net = Network.from_def(args.network, device=args.device)
        net.load_weights(weights)
    broken = [k for k, v in net.state_dict().items() if not np.isfinite(v).all()]
    if broken:
        raise ValueError(f"{weights}: {broken[0]} holds NaN or infinite values")
    _check_classifier(net)
    x, y = fashion_mnist(args.split, _image_data(args.data, args.network))
    predicted = np.concatenate(
        [
            np.argmax(net.forward(x[i : i + args.batch_size]), axis=1)
            for i in range(0, len(x), args.batch_size)
        ]
    )
    accuracy = float(np.mean(predicted == y))
    print(f"{args.split}: {len(y)} images, accuracy {accuracy:.4f}")
    matrix = _confusion(y, predicted, len(FASHION_MNIST_CLASSES))
    print(_format_confusion(matrix, FASHION_MNIST_CLASSES))
    return 0


def _integer(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``[low, high]``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer in [{low}, {high}], got {text!r}")
        return value

    return parse


EPOCHS = _integer(0, 10**9)
BATCH_SIZE = _integer(1, 2**31 - 1)
SEED = _integer(0, 2**64 - 1)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="verjus", description="verjus deep learning framework")
    parser.add_argument("--version", action="version", version=f"verjus {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser(
        "train", help="train a network on Fashion-MNIST, or a character model on text"
    )
    train.add_argument("network", help="network definition (JSON file)")
    train.add_argument("--data", help=DATA_HELP)
    train.add_argument(
        "--epochs", type=EPOCHS, default=3, help="epochs in all (with --resume, the run's included)"
    )
    train.add_argument("--optimizer", choices=("adam", "adamw", "sgd"), default="adam")
    train.add_argument("--lr", type=float, default=1e-3)
    train.add_argument("--momentum", type=float, default=0.0, help="SGD momentum")
    train.add_argument("--nesterov", action="store_true", help="SGD with Nesterov momentum")
    train.add_argument("--weight-decay", type=float, default=0.0)
    train.add_argument("--batch-size", type=BATCH_SIZE, default=128)
    train.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    train.add_argument(
        "--precision",
        choices=tuple(PRECISIONS),
        default="32",
        help="mixed precision: Linear and Conv2d products on bfloat16 / float16 operands",
    )
    train.add_argument("--seed", type=SEED, default=0, help="initialisation and shuffling")
    train.add_argument("--out", default="runs/latest", help="run folder (new, or empty)")
    replace = train.add_mutually_exclusive_group()
    replace.add_argument(
        "--overwrite", action="store_true", help="replace the run already in --out"
    )
    replace.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its last checkpoint up to --epochs in all "
        "(repeat its definition and settings)",
    )
    train.add_argument("--no-progress", action="store_true", help="no progress (bar or log lines)")
    train.add_argument(
        "--nproc",
        type=BATCH_SIZE,
        default=1,
        help="data-parallel: train on N local ranks (started by mpirun; see docs/distributed.md)",
    )
    train.add_argument(
        "--clip-norm", type=float, default=None, help="clip the gradient's global L2 norm"
    )
    train.add_argument(
        "--max-len", type=BATCH_SIZE, default=512, help="text data: leave out longer texts"
    )
    train.set_defaults(run=_train)

    sample = commands.add_parser("sample", help="generate text from a trained character model")
    sample.add_argument("folder", metavar="RUN", help="run folder of a text `verjus train`")
    sample.add_argument("--prompt", default="", help="the text to continue")
    sample.add_argument("--chars", type=EPOCHS, default=200, help="characters to generate")
    sample.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sharpens (below 1) or flattens (above 1) the distribution; 0: the most likely "
        "character each step",
    )
    sample.add_argument("--seed", type=SEED, default=None)
    sample.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    sample.set_defaults(run=_sample)

    info = commands.add_parser("info", help="print a network's layers, shapes and parameters")
    info.add_argument("network", help="network definition (JSON file)")
    info.add_argument(
        "--vocab",
        type=BATCH_SIZE,
        help='the vocabulary size, for a text network whose definition says "vocab"',
    )
    info.set_defaults(run=_info)

    predict = commands.add_parser("predict", help="accuracy and confusion matrix of saved weights")
    predict.add_argument("network", help="network definition (JSON file), or a run folder alone")
    predict.add_argument(
        "weights",
        nargs="?",
        help="weights.safetensors or a run folder (none when the first argument is a run folder)",
    )
    predict.add_argument("--data", default="fashion-mnist", help=IMAGE_DATA.removeprefix("--data "))
    predict.add_argument("--split", choices=("train", "test"), default="test")
    predict.add_argument("--batch-size", type=BATCH_SIZE, default=1000)
    predict.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    predict.set_defaults(run=_predict)

    returnn = commands.add_parser(
        "returnn", help="run a RETURNN config file (RETURNN's frontend, on verjus)"
    )
    returnn.add_argument("config", help="the RETURNN config file")
    returnn.add_argument(
        "overrides", nargs=argparse.REMAINDER, help="RETURNN's overrides: ++key value ..."
    )
    returnn.set_defaults(run=_returnn)
    return parser


def _returnn(args: argparse.Namespace) -> int:
    from verjus.returnn import run

    run([args.config, *args.overrides])
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.command == "train" and args.optimizer != "sgd" and (args.momentum or args.nesterov):
        parser.error("--momentum and --nesterov are SGD settings: they need --optimizer sgd")
    try:
        if args.command == "train" and args.nproc > 1 and distributed.rank_env().world == 1:
            return launch(without_nproc(argv), args.nproc)
        status = args.run(args)
        sys.stdout.flush()  # so that a reader gone early shows here, not at exit
        return status
    except BrokenPipeError:
        # The reader left early (`verjus predict ... | head`): stop quietly, as
        # Unix tools do. Whatever is still buffered goes to /dev/null, or the
        # interpreter's last flush would fail again with a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except (ValueError, TypeError, OSError, RuntimeError, NotImplementedError) as e:
        if distributed.communicator() is not None:
            distributed.abort(f"verjus: error: {e}")  # ends the other ranks too
        print(f"verjus: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("verjus: interrupted", file=sys.stderr)
        return 130
