"""``verjus.Runner``: serving inference while the network is swapped.

A runner serves one network (a copy it owns) on one device: ``"cpu"`` (the
default), ``"cuda"`` or ``"cuda:N"``; inputs are uploaded and outputs come back
as numpy arrays. ``infer`` can be
called from many threads at once: it releases the GIL and runs with no lock
around the computation. ``swap`` and ``swap_from`` replace the served network
with one that has the same interface: input names and shapes, and output
names and shapes (an output's name is its own, ``{"name": "logits", "from":
"fc3"}`` in the definition, so networks with other layers swap for each
other). One that does not fit raises ``ValueError`` naming the mismatch and
both interfaces, and the old network keeps serving. ``watch`` polls a
checkpoint folder and swaps in each new version of it.

    runner = verjus.Runner.from_checkpoint("runs/mlp")
    runner.watch("runs/mlp", interval=1.0, on_event=print)
    logits = runner.infer(images)
"""

from __future__ import annotations

import atexit
import os
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from verjus import _verjus
from verjus._sequences import is_ragged, pad
from verjus.network import Network

__all__ = ["Runner"]

# Runners whose watcher runs. Python calls back into a watcher's callback from
# a thread it does not own; if the interpreter shuts down while that callback
# runs, the thread is killed inside Rust code and the process aborts. So the
# watchers are stopped (each callback allowed to finish) before shutdown.
_watching: weakref.WeakSet[Runner] = weakref.WeakSet()


@atexit.register
def _stop_watchers() -> None:
    for runner in list(_watching):
        runner.stop_watching()


class Runner:
    """Serves ``network`` (copied; training it later does not change what is served)."""

    def __init__(self, network: Network, *, device: str = "cpu") -> None:
        """Serves a copy of ``network`` on ``device`` (wherever ``network`` lives).
        A device that cannot be used here raises ``RuntimeError`` naming what is
        missing."""
        if not isinstance(network, Network):
            raise TypeError(f"network must be a verjus.Network, got {type(network).__name__}")
        self._native = _verjus.Runner(network._native, device)

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike[str], *, device: str = "cpu") -> Runner:
        """A runner serving the network saved in ``path`` (a network folder or a
        training checkpoint) on ``device``."""
        runner = cls.__new__(cls)
        runner._native = _verjus.Runner.from_checkpoint(os.fspath(path), device)
        return runner

    @property
    def device(self) -> str:
        """The device the served networks live and compute on."""
        return self._native.device

    @property
    def generation(self) -> int:
        """0 for the first network, +1 for each swap."""
        return self._native.generation

    def infer(self, *inputs: npt.ArrayLike, lengths: npt.ArrayLike | None = None) -> Any:
        """Inference on one batch (one array per network input) with the network
        served now. Returns one float32 array, or a tuple for several outputs.

        A sequence network takes padded batch-major inputs (token ids ``[batch,
        T]``, frames ``[batch, T, ...]``) with each example's ``lengths``, or a
        list of per-example arrays, as ``Network.forward`` does; each call has
        its own length, and sequence outputs come back batch-major."""
        outputs, _ = self.infer_with_generation(*inputs, lengths=lengths)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def infer_with_generation(
        self, *inputs: npt.ArrayLike, lengths: npt.ArrayLike | None = None
    ) -> tuple[list[npt.NDArray[np.float32]], int]:
        """``infer``'s outputs (always a list) and the generation that computed them."""
        arrays = list(inputs)
        if lengths is not None or any(is_ragged(a) for a in arrays):
            if any(is_ragged(a) for a in arrays):
                padded = [
                    pad(a, f"infer: input {i}", ids=_ids(a)) if is_ragged(a) else (a, None)
                    for i, a in enumerate(arrays)
                ]
                arrays = [p for p, _ in padded]
                found = next(ls for _, ls in padded if ls is not None)
                lengths = found if lengths is None else lengths
            return self._native.infer_sequences(arrays, lengths)
        if any(np.asarray(a).dtype.kind in "iu" for a in arrays):
            return self._native.infer_sequences(arrays, None)
        return self._native.infer(arrays)

    def swap(self, network: Network) -> int:
        """Serves a copy of ``network`` from now on; returns the new generation."""
        if not isinstance(network, Network):
            raise TypeError(f"swap takes a verjus.Network, got {type(network).__name__}")
        return self._native.swap(network._native)

    def swap_from(self, path: str | os.PathLike[str]) -> int:
        """Loads the checkpoint folder ``path`` and serves it from now on."""
        return self._native.swap_from(os.fspath(path))

    def watch(
        self,
        path: str | os.PathLike[str],
        interval: float = 1.0,
        on_event: Callable[[dict[str, Any]], object] | None = None,
    ) -> None:
        """Polls ``path`` every ``interval`` seconds and swaps in each new version.
        ``on_event`` receives ``{"event": "swapped", "generation": n}`` or
        ``{"event": "refused", "error": message}`` (refusals go to stderr without
        it); it runs on the watcher's thread, may call ``stop_watching``, and
        should return promptly: interpreter exit waits for it."""
        self._native.watch(os.fspath(path), interval, on_event)
        _watching.add(self)

    def stop_watching(self) -> None:
        """Stops watching; returns once the watcher has stopped (called from the
        watcher's own callback: once that callback returns)."""
        _watching.discard(self)
        self._native.stop_watching()

    def __repr__(self) -> str:
        return f"Runner(generation={self.generation})"


def _ids(items: list[Any]) -> bool:
    """Whether per-example arrays hold token ids (integers) rather than frames."""
    return bool(items) and np.asarray(items[0]).dtype.kind in "iu"
