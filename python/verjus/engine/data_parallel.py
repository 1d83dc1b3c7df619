"""The engine's data-parallel training: RETURNN's ``torch_distributed`` option.

Started as several ranks (``mpirun -np N verjus returnn CONFIG``, see
``verjus.distributed``), each rank takes every N-th batch of the epoch, from
its own rank on, and draws its own random numbers (dropout), its seed offset
by ``rank * 16127`` as RETURNN offsets it. The ranks stay equal as RETURNN's
``reduce_type`` says:

- ``"grad"`` (the default): the gradients are averaged over the ranks before
  each update (before clipping, as after PyTorch DDP's backward);
- ``"param"``: each rank updates on its own gradients, and the parameters are
  averaged after every ``param_sync_step``-th update and at each epoch's end.

Every rank steps while all still have a batch (RETURNN's MIN ``has_data``), so
none waits for a batch another will never take. Losses are summed over the
ranks before they are reported; rank 0 logs and writes the checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from verjus import distributed
from verjus.engine.optimizer import ParamOptimizer

__all__ = ["DataParallel", "rank_seed_offset", "this_ranks"]

# RETURNN's torch_distributed options verjus takes; "options" (the DDP
# constructor's keyword arguments) has no meaning without DDP and must be empty.
_KNOWN = frozenset({"reduce_type", "param_sync_step", "sync_on_cpu", "options"})

T = TypeVar("T")


@dataclass(frozen=True)
class DataParallel:
    """How the ranks' replicas are kept equal (see the module docs)."""

    param_sync_step: int | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> DataParallel:
        """RETURNN's ``torch_distributed`` dict, checked: an option verjus does
        not take is an error naming it."""
        unknown = sorted(set(options) - _KNOWN)
        if unknown:
            raise ValueError(
                f"torch_distributed: unknown option(s) {unknown}; verjus takes {sorted(_KNOWN)}"
            )
        if options.get("options"):
            raise ValueError(
                "torch_distributed: 'options' passes arguments to PyTorch's "
                "DistributedDataParallel, which verjus does not use; leave it out"
            )
        reduce_type = options.get("reduce_type", "grad")
        if reduce_type == "grad":
            return cls()
        if reduce_type != "param":
            raise ValueError(
                f"torch_distributed: reduce_type must be 'grad' or 'param', got {reduce_type!r}"
            )
        every = options.get("param_sync_step")
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError(
                "torch_distributed: reduce_type 'param' needs param_sync_step, an int >= 1, "
                f"got {every!r}"
            )
        return cls(param_sync_step=every)

    def replicate(self, opt: ParamOptimizer) -> None:
        """Makes ``opt``'s parameters rank 0's and its steps keep them equal."""
        for part in opt.parts:
            part.replicate(self.param_sync_step)

    def end_epoch(self, opt: ParamOptimizer) -> None:
        """Parameter averaging's sync before an epoch's checkpoint and scores."""
        if self.param_sync_step is not None:
            for part in opt.parts:
                part.average_parameters()


def rank_seed_offset() -> int:
    """What this rank adds to the random seeds (0 alone and on rank 0)."""
    comm = distributed.communicator()
    return 0 if comm is None else comm.rank * 16127


def this_ranks(items: Iterator[T]) -> Iterator[T]:
    """Every world-th of ``items``, from this rank's index on (all alone)."""
    comm = distributed.communicator()
    if comm is None:
        yield from items
        return
    for i, item in enumerate(items):
        if i % comm.world == comm.rank:
            yield item
