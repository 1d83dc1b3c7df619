"""``verjus train ... --nproc N``: starts N ranks of a command on this machine.

The ranks are started by the system's ``mpirun`` (verjus has no process
manager or networking of its own), so they find each other through MPI as
ranks started by hand or by a cluster's scheduler do. Each rank computes with
an equal share of the cores (``RAYON_NUM_THREADS``, unless set); with CUDA
each takes the GPU of its local rank. When a rank fails, mpirun ends the
others and exits with an error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

from verjus.distributed import MPI_MISSING

__all__ = ["launch", "without_nproc"]


def without_nproc(argv: Sequence[str]) -> list[str]:
    """``argv`` without its ``--nproc N`` (or ``--nproc=N``): what each rank runs."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            out.append(arg)
    return out


def launch(argv: Sequence[str], nproc: int) -> int:
    """Runs ``python -m verjus ARGV`` as ``nproc`` ranks; returns mpirun's exit
    status. A machine without MPI (or mpi4py) is a ``RuntimeError`` saying what
    to install."""
    mpirun = shutil.which("mpirun")
    try:
        import mpi4py  # noqa: F401  (each rank needs it; fail here, once)
    except ImportError:
        mpirun = None
    if mpirun is None:
        raise RuntimeError(f"--nproc {nproc}: {MPI_MISSING}")
    env = dict(os.environ)
    env.setdefault("RAYON_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    command = [mpirun, "-np", str(nproc)]
    if _is_open_mpi(mpirun):
        # More ranks than cores is allowed (the ranks share them), and no
        # binding: each rank runs its own thread pool.
        command += ["--oversubscribe", "--bind-to", "none"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    command += [sys.executable, "-m", "verjus", *argv]
    return subprocess.run(command, env=env, check=False).returncode


def _is_open_mpi(mpirun: str) -> bool:
    """Whether ``mpirun`` is Open MPI's (its options differ from MPICH's)."""
    try:
        version = subprocess.run(
            [mpirun, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in version.stdout + version.stderr
