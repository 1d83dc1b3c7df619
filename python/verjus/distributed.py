"""Data-parallel training across processes: which rank this is, the
communicator the ranks reduce through, and starting the ranks.

verjus has no networking of its own. CPU ranks (and, staged through host
memory, CUDA ranks) communicate through MPI by ``mpi4py`` (``pip install
verjus[mpi]``), which uses the system's MPI library, the one its ``mpirun``
belongs to. Ranks are started as clusters start them:

- ``verjus train NET --nproc N`` starts N local ranks through ``mpirun``;
- ``mpirun -np N python -m verjus train NET`` / ``srun --mpi=pmix ...``;
- ``torchrun``-style variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``) are
  read too, but CPU ranks still need an MPI launcher: a process started
  without one cannot reach the others, and ``init`` says so.

``init()`` joins the ranks (once per process); a ``verjus.Trainer`` made after
it trains data-parallel: each rank steps on its rows of the same global
batches, gradients and counts are summed over the ranks, and every replica
takes the same update (see docs/distributed.md). Only rank 0 prints and writes
files (``is_main_process``). An exception on any rank ends every rank
(``MPI_Abort``), so a failing rank never leaves the others waiting.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "MpiCommunicator",
    "RankEnv",
    "abort",
    "all_ranks",
    "any_rank",
    "barrier",
    "communicator",
    "init",
    "is_main_process",
    "rank_env",
    "shard_rows",
    "sum_by_key",
    "sum_over_ranks",
]

MPI_MISSING = (
    "data-parallel training on CPU ranks needs MPI: install Open MPI or MPICH "
    "(Debian: apt-get install openmpi-bin libopenmpi-dev) and mpi4py "
    "(pip install 'verjus[mpi]')"
)


@dataclass(frozen=True)
class RankEnv:
    """Where a launcher put this process: its rank among ``world`` processes,
    and its rank among those on this machine (the GPU it takes)."""

    rank: int
    world: int
    local_rank: int
    launcher: str


# (launcher, rank, world, local rank) variables, in the order they are trusted.
_LAUNCHERS = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
)


def rank_env(environ: Mapping[str, str] | None = None) -> RankEnv:
    """This process's place from the launcher's environment variables
    (torchrun, Open MPI's and MPICH's ``mpirun``, Slurm's ``srun``); a world of
    one when none is set. A variable that is not a number is a ``ValueError``
    naming it."""
    env = os.environ if environ is None else environ
    for launcher, rank_var, world_var, local_var in _LAUNCHERS:
        if rank_var in env and world_var in env:
            rank, world = _int(env, rank_var), _int(env, world_var)
            local = _int(env, local_var) if local_var in env else rank
            if not 0 <= rank < world:
                raise ValueError(
                    f"{launcher}: {rank_var}={rank} is not in [0, {world_var}={world})"
                )
            return RankEnv(rank, world, local, launcher)
    return RankEnv(0, 1, 0, "none")


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise ValueError(f"the launcher's {name}={env[name]!r} is not an integer") from None


class MpiCommunicator:
    """The ranks of ``MPI.COMM_WORLD`` (through mpi4py), with the in-place
    collectives verjus' trainers call (``all_reduce``, ``broadcast``,
    ``barrier``) on 1-d float32 or float64 arrays."""

    def __init__(self) -> None:
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise RuntimeError(f"{MPI_MISSING} ({e})") from None
        self._mpi = MPI
        self._comm = MPI.COMM_WORLD
        self.rank: int = self._comm.Get_rank()
        self.world: int = self._comm.Get_size()
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}

    def all_reduce(self, array: npt.NDArray[Any], op: str = "sum") -> None:
        """Combines ``array`` over all ranks in place (``op``: sum, max, min)."""
        self._comm.Allreduce(self._mpi.IN_PLACE, array, op=self._ops[op])

    def broadcast(self, array: npt.NDArray[Any], root: int = 0) -> None:
        """Replaces ``array`` on every rank with rank ``root``'s."""
        self._comm.Bcast(array, root=root)

    def barrier(self) -> None:
        """Returns when every rank has called it."""
        self._comm.Barrier()

    def sum(self, values: list[float]) -> list[float]:
        """The sums over all ranks of a few numbers (metrics, counts)."""
        array = np.asarray(values, dtype=np.float64)
        self.all_reduce(array)
        return [float(v) for v in array]

    def all_gather(self, value: Any) -> list[Any]:
        """Every rank's ``value`` (any picklable object), in rank order."""
        return self._comm.allgather(value)

    def abort(self, code: int) -> None:
        """Ends every rank of the job now, with exit status ``code``."""
        self._comm.Abort(code)

    def __repr__(self) -> str:
        return f"MpiCommunicator(rank={self.rank}, world={self.world})"


_current: MpiCommunicator | None = None


def init() -> MpiCommunicator | None:
    """Joins the ranks this process was launched with (see the module docs)
    and returns their communicator, or None when the process runs alone. Once
    called, an uncaught exception on this rank ends every rank (``abort``)."""
    global _current
    if _current is not None:
        return _current
    env = rank_env()
    if env.world == 1:
        return None
    comm = MpiCommunicator()
    if comm.world != env.world:
        raise RuntimeError(
            f"{env.launcher} started this process as rank {env.rank} of {env.world}, but MPI "
            f"sees {comm.world} process(es): CPU ranks communicate through MPI, so start them "
            "with mpirun, srun --mpi=pmix, or verjus train --nproc N"
        )
    sys.excepthook = _abort_on_uncaught
    _current = comm
    return comm


def communicator() -> MpiCommunicator | None:
    """The communicator ``init`` joined, or None."""
    return _current


def is_main_process() -> bool:
    """Whether this process prints and writes files: rank 0, or the only one."""
    return _current is None or _current.rank == 0


def barrier() -> None:
    """Waits for every rank (returns at once when alone)."""
    if _current is not None:
        _current.barrier()


def any_rank(flag: bool) -> bool:
    """Whether ``flag`` is true on some rank: a decision every rank then takes
    together (stopping early, a callback's ``stop_training``)."""
    if _current is None:
        return flag
    array = np.array([float(flag)])
    _current.all_reduce(array, "max")
    return bool(array[0])


def all_ranks(flag: bool) -> bool:
    """Whether ``flag`` is true on every rank (e.g. each still has a batch)."""
    return not any_rank(not flag)


def sum_by_key(values: Mapping[str, float]) -> dict[str, float]:
    """``values`` summed over all ranks key by key (a rank may lack a key, or
    have none: one that saw no batch)."""
    if _current is None:
        return dict(values)
    total: dict[str, float] = {}
    for part in _current.all_gather(dict(values)):
        for key, value in part.items():
            total[key] = total.get(key, 0.0) + value
    return total


def shard_rows(rows: int) -> slice:
    """This rank's rows of a global batch of ``rows`` (``rank, rank + world,
    ...``; all of them when alone): may be empty for a batch smaller than the
    world."""
    if _current is None:
        return slice(0, rows)
    return slice(_current.rank, rows, _current.world)


def sum_over_ranks(values: list[float]) -> list[float]:
    """``values`` summed over all ranks (themselves when alone)."""
    return values if _current is None else _current.sum(values)


def abort(message: str, code: int = 1) -> None:
    """Prints ``message`` on stderr and ends this process; with other ranks,
    ends all of them (they would otherwise wait for this one forever)."""
    prefix = "" if _current is None else f"[rank {_current.rank}] "
    print(f"{prefix}{message}", file=sys.stderr, flush=True)
    if _current is not None:
        _current.abort(code)
    raise SystemExit(code)


def _abort_on_uncaught(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    sys.__excepthook__(kind, value, tb)
    if _current is not None:
        _current.abort(1)
