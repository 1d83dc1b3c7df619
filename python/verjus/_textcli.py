"""The text side of the ``verjus`` command: ``train`` on a character language
model definition and ``sample`` from a trained one.

A text definition has one int32 sequence input (token ids). Its vocabulary
size comes from the data: wherever the definition says ``"vocab"`` in place
of a number (an ``Embedding``'s ``vocab``, the last ``Linear``'s
``out_features``), the size of the data's vocabulary is filled in; a number
given there must be that size. The run folder gets ``vocab.json`` beside the
checkpoint, so that ``sample`` decodes as training encoded.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from verjus.data import CharVocab, TextBatcher, fortunes

__all__ = ["VOCAB_FILE", "fill_vocab", "is_text_definition", "load_text", "sample_text"]

VOCAB_FILE = "vocab.json"
PLACEHOLDER = "vocab"


def is_text_definition(definition: dict[str, Any]) -> bool:
    """Whether the definition's first input is a sequence of token ids."""
    inputs = definition.get("inputs") or [{}]
    first = inputs[0]
    return first.get("dtype") == "int32" and (first.get("shape") or [0])[:1] == [None]


VOCAB_FIELDS = {"Embedding": "vocab", "Linear": "out_features"}


def _layers(definition: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every layer of ``definition``, nested ones included."""
    stack = list(definition.get("layers", []))
    while stack:
        layer = stack.pop()
        stack.extend(layer.get("layers", []))
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


def load_text(data: str, max_len: int | None) -> tuple[list[str], list[str], CharVocab]:
    """``--data fortunes`` (the installed package, or ``$VERJUS_FORTUNES``) or a
    folder of fortune files: every 20th text for validation."""
    path = None if data == "fortunes" else data
    return fortunes(path, max_len=max_len, val_every=20)


def batchers(
    train: list[str], validation: list[str], vocab: CharVocab, batch_size: int
) -> tuple[TextBatcher, TextBatcher | None]:
    """The training and validation batches."""
    val = TextBatcher(validation, vocab, batch_size=batch_size) if validation else None
    return TextBatcher(train, vocab, batch_size=batch_size), val


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
    is read once)."""
    from verjus.network import Network

    folder = Path(run)
    vocab_path = folder / VOCAB_FILE
    if not vocab_path.is_file():
        raise OSError(
            f"{vocab_path}: missing; sample needs the run folder of a text `verjus train`"
        )
    vocab = CharVocab.load(vocab_path)
    net = Network.load(folder, device=device)
    if temperature <= 0 or not math.isfinite(temperature):
        raise ValueError(f"--temperature must be a positive number, got {temperature}")
    unknown = sorted({c for c in prompt if c not in vocab.chars})
    if unknown:
        raise ValueError(f"--prompt: {unknown[0]!r} is not in the model's vocabulary")
    rng = np.random.default_rng(seed)
    stepper = net.stepper()
    ids = np.array([[vocab.eot_id, *vocab.encode(prompt)]], dtype=np.int32)
    logits = stepper.step(ids)[0, -1]
    out = []
    for _ in range(chars):
        z = logits.astype(np.float64) / temperature
        z[vocab.pad_id] = -np.inf
        p = np.exp(z - z.max())
        next_id = int(rng.choice(len(p), p=p / p.sum()))
        if next_id == vocab.eot_id:
            break
        out.append(next_id)
        logits = stepper.step(np.array([next_id], dtype=np.int32))[0]
    return prompt + vocab.decode(out)
