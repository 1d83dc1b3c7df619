"""The engine's checkpoints: one per epoch, named as RETURNN names them.

RETURNN's ``model = "/path/model"`` makes ``/path/model.005.pt`` after epoch 5;
here the same prefix gives, after epoch 5:

- ``model.005.safetensors``: the parameters under RETURNN's names
  (``rf.save_state``), readable with ``safetensors`` (numpy or torch);
- ``model.005.opt.npz``: the optimizer state (moments and step counts per
  parameter);
- ``model.005.meta.json``: the epoch, the global step and the parameter names.

Each file is written atomically and the parameters last, so a ``.safetensors``
file is the sign that the whole epoch's checkpoint is there: a run killed while
saving leaves either the epoch complete or no trace of it. ``last_epoch`` finds
the newest complete one, from which a run started again continues.
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from verjus._files import write_bytes_atomic, write_text_atomic
from verjus.engine.optimizer import ParamOptimizer
from verjus.rf.module import Module
from verjus.rf.state import load_state, save_state

__all__ = ["Checkpoint", "last_epoch", "load", "save"]


@dataclass
class Checkpoint:
    """The files of one epoch's checkpoint."""

    prefix: str
    epoch: int

    def path(self, suffix: str) -> Path:
        """``{prefix}.{epoch:03d}{suffix}``."""
        return Path(f"{self.prefix}.{self.epoch:03d}{suffix}")

    @property
    def params(self) -> Path:
        return self.path(".safetensors")

    @property
    def optimizer(self) -> Path:
        return self.path(".opt.npz")

    @property
    def meta(self) -> Path:
        return self.path(".meta.json")


def save(ckpt: Checkpoint, model: Module, opt: ParamOptimizer, meta: dict[str, Any]) -> None:
    """Writes the epoch's checkpoint, the parameters last (see the module docs)."""
    Path(ckpt.prefix).parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, **opt.state_arrays())
    write_bytes_atomic(ckpt.optimizer, buf.getvalue())
    names = [n for n, _ in model.named_parameters()]
    write_text_atomic(ckpt.meta, json.dumps({**meta, "parameters": names}, indent=1) + "\n")
    save_state(model, ckpt.params)


def last_epoch(prefix: str, *, up_to: int) -> int:
    """The newest epoch ``<= up_to`` with a complete checkpoint under ``prefix``, or 0."""
    folder = Path(prefix).parent
    if not folder.is_dir():
        return 0
    pattern = re.compile(re.escape(Path(prefix).name) + r"\.(\d{3,})\.safetensors$")
    epochs = [int(m.group(1)) for f in os.listdir(folder) if (m := pattern.match(f))]
    done = [
        e
        for e in epochs
        if e <= up_to
        and Checkpoint(prefix, e).optimizer.exists()
        and Checkpoint(prefix, e).meta.exists()
    ]
    return max(done, default=0)


def load(ckpt: Checkpoint, model: Module, opt: ParamOptimizer | None) -> dict[str, Any]:
    """Restores the parameters (and the optimizer state) of an epoch's checkpoint
    into ``model``; returns its meta data. A checkpoint of another model is a
    ``ValueError`` naming the file and the parameters that differ, before
    anything changes."""
    meta = json.loads(ckpt.meta.read_text())
    names = [n for n, _ in model.named_parameters()]
    if meta.get("parameters") != names:
        saved = set(meta.get("parameters") or ())
        raise ValueError(
            f"{ckpt.meta}: a checkpoint of another model (missing here: "
            f"{sorted(saved - set(names))[:5]}, not in the checkpoint: "
            f"{sorted(set(names) - saved)[:5]}); give another model path or remove it"
        )
    arrays = None
    if opt is not None:
        with np.load(ckpt.optimizer) as data:
            arrays = {k: data[k] for k in data.files}
    try:
        load_state(model, ckpt.params)
    except (KeyError, ValueError) as e:
        raise ValueError(f"{ckpt.params}: {e}") from None
    if opt is not None and arrays is not None:
        opt.load_state_arrays(arrays, str(ckpt.optimizer))
    return meta
