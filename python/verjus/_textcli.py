"""The text side of the ``verjus`` command: ``train`` on a character language
model definition and ``sample`` from a trained one.

A text definition has one int32 sequence input (token ids). Its vocabulary
size comes from the data: wherever the definition says ``"vocab"`` in place
of a number (an ``Embedding``'s ``vocab``, the last ``Linear``'s
``out_features``), the size of the data's vocabulary is filled in; a number
given there must be that size. The run folder gets ``vocab.json`` beside the
checkpoint, so that ``sample`` decodes as training encoded.

Text networks take text (``--data fortunes`` or a folder of text files) and
image classifiers images; ``holds_idx_files`` tells a folder of Fashion-MNIST's
IDX files apart, so that a mismatch is refused by name rather than read as
data of the wrong kind.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from verjus._verjus import VOCAB_FILE
from verjus.data import CharVocab, TextBatcher, fortunes

__all__ = [
    "VOCAB_FILE",
    "check_text_input",
    "fill_vocab",
    "holds_idx_files",
    "is_text_definition",
    "load_text",
    "sample_text",
]

PLACEHOLDER = "vocab"
VAL_EVERY = 20  # every 20th text (the first included) is for validation
TEXT_DATA = "--data fortunes or a folder of text files (texts separated by lines holding only %)"


def _first_input(definition: dict[str, Any]) -> dict[str, Any]:
    inputs = definition.get("inputs")
    first = inputs[0] if isinstance(inputs, list) and inputs else None
    return first if isinstance(first, dict) else {}


def is_text_definition(definition: dict[str, Any]) -> bool:
    """Whether the definition's first input is a sequence of token ids."""
    first = _first_input(definition)
    shape = first.get("shape")
    return first.get("dtype") == "int32" and isinstance(shape, list) and shape[:1] == [None]


def check_text_input(definition: dict[str, Any], what: str) -> None:
    """A ``"vocab"`` size comes from text data, so only a text definition may
    hold one; in any other the core would report the placeholder as a JSON
    type error about ``"vocab"`` instead of the input that is wrong."""
    if has_vocab_placeholder(definition) and not is_text_definition(definition):
        first = _first_input(definition)
        raise ValueError(
            f'{what}: a "vocab" size is taken from text data, which needs the first input to '
            f'be token ids over time ({{"shape": [null], "dtype": "int32"}}); input '
            f"{first.get('name')!r} has shape {json.dumps(first.get('shape'))} and dtype "
            f"{first.get('dtype', 'float32')}"
        )


def holds_idx_files(folder: str) -> bool:
    """Whether ``folder`` holds gzip'd IDX files (Fashion-MNIST's format)."""
    try:
        return any(p.name.endswith("-ubyte.gz") for p in Path(folder).iterdir())
    except OSError:
        return False


VOCAB_FIELDS = {"Embedding": "vocab", "Linear": "out_features"}


def _layers(definition: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every layer of ``definition``, nested ones included."""
    stack = list(definition.get("layers") or [])
    while stack:
        layer = stack.pop()
        if isinstance(layer, dict):  # anything else: the core names what is wrong
            stack.extend(layer.get("layers") or [])
            yield layer


def has_vocab_placeholder(definition: dict[str, Any]) -> bool:
    """Whether some layer's size is the ``"vocab"`` placeholder."""
    return any(
        layer.get(VOCAB_FIELDS.get(layer.get("type", ""), "")) == PLACEHOLDER
        for layer in _layers(definition)
    )


def fill_vocab(definition: dict[str, Any], size: int, what: str) -> dict[str, Any]:
    """``definition`` with each ``"vocab"`` placeholder (Embedding ``vocab``,
    Linear ``out_features``) set to ``size``; a number there must be ``size``."""
    filled = json.loads(json.dumps(definition))
    for layer in _layers(filled):
        field = VOCAB_FIELDS.get(layer.get("type", ""))
        if field is None or field not in layer:
            continue
        value = layer[field]
        if value == PLACEHOLDER:
            layer[field] = size
        elif layer["type"] == "Embedding" and value != size:
            raise ValueError(
                f"{what}: Embedding {layer.get('name')!r} has vocab {value}, but the data's "
                f'vocabulary has {size} ids (write "vocab": "vocab" to take it from the data)'
            )
    return filled


def load_text(data: str, max_len: int, network: str) -> tuple[list[str], list[str], CharVocab]:
    """``--data fortunes`` (the installed package, or ``$VERJUS_FORTUNES``) or a
    folder of text files for the text network ``network``: every 20th text
    for validation. Fashion-MNIST is refused, and so is data that leaves no
    text to train on (the core's batcher would only say it has none)."""
    if data == "fashion-mnist" or (data != "fortunes" and holds_idx_files(data)):
        raise ValueError(
            f"--data {data}: Fashion-MNIST images; {network} is a text network (its input "
            f"is int32 token ids), which takes {TEXT_DATA}"
        )
    path = None if data == "fortunes" else data
    train, validation, vocab = fortunes(path, max_len=max_len, val_every=VAL_EVERY)
    if not train:
        texts, _, _ = fortunes(path, max_len=None, val_every=None)
        found = f"{len(validation)} text{'' if len(validation) == 1 else 's'}"
        if len(texts) > len(validation):
            shortest = min(len(t) for t in texts)
            found += (
                f" of at most --max-len {max_len} characters (of {len(texts)}; the shortest "
                f"has {shortest})"
            )
        raise ValueError(
            f"--data {data}: {found}; training needs at least 2, as every {VAL_EVERY}th text, "
            "the first included, is for validation (a file's texts are separated by lines "
            "holding only %)"
        )
    return train, validation, vocab


def batchers(
    train: list[str], validation: list[str], vocab: CharVocab, batch_size: int
) -> tuple[TextBatcher, TextBatcher | None]:
    """The training and validation batches."""
    val = TextBatcher(validation, vocab, batch_size=batch_size) if validation else None
    return TextBatcher(train, vocab, batch_size=batch_size), val


def _check_vocab_fits(net: Any, vocab: CharVocab, path: Path) -> None:
    """The network reads and scores ``vocab.size`` symbols (its Embedding's
    vocabulary and its output), or ``path`` is not its vocabulary."""
    sizes = {d["path"]: d["params"][0][1][0] for d in net.layers() if d["kind"] == "Embedding"}
    (_, unit), *_ = net.outputs
    wrong = [f"{p} reads {n}" for p, n in sizes.items() if n != vocab.size]
    if list(unit) != [vocab.size]:
        wrong.append(f"the output scores {list(unit)}")
    if wrong:
        raise ValueError(
            f"{path}: {vocab.size} symbols, but the network's {', '.join(wrong)}: "
            "the vocabulary is not this model's"
        )


def sample_text(
    run: str | os.PathLike[str],
    prompt: str,
    chars: int,
    temperature: float,
    seed: int | None,
    device: str,
) -> str:
    """``chars`` characters after ``prompt`` from the character model in the
    run folder ``run``, one step per character with carried state (the prompt
    is read once). Temperature 0 takes the most likely character each step
    (greedy, as ``examples/python/rf_char_lm.py``)."""
    from verjus.network import Network

    folder = Path(run)
    vocab_path = folder / VOCAB_FILE
    if not vocab_path.is_file():
        raise OSError(
            f"{vocab_path}: missing; sample needs the run folder of a text `verjus train`"
        )
    if not (temperature >= 0 and math.isfinite(temperature)):
        raise ValueError(
            f"--temperature must be a number >= 0 (0: the most likely character), got {temperature}"
        )
    vocab = CharVocab.from_run(folder)
    net = Network.load(folder, device=device)
    _check_vocab_fits(net, vocab, vocab_path)
    unknown = sorted({c for c in prompt if c not in vocab.chars})
    if unknown:
        raise ValueError(f"--prompt: {unknown[0]!r} is not in the model's vocabulary")
    rng = np.random.default_rng(seed)
    stepper = net.stepper()
    ids = np.array([[vocab.eot_id, *vocab.encode(prompt)]], dtype=np.int32)
    logits = stepper.step(ids)[0, -1]
    out = []
    for _ in range(chars):
        z = logits.astype(np.float64)
        z[vocab.pad_id] = -np.inf
        if temperature == 0:
            next_id = int(np.argmax(z))
        else:
            z /= temperature
            p = np.exp(z - z.max())
            next_id = int(rng.choice(len(p), p=p / p.sum()))
        if next_id == vocab.eot_id:
            break
        out.append(next_id)
        logits = stepper.step(np.array([next_id], dtype=np.int32))[0]
    return prompt + vocab.decode(out)
