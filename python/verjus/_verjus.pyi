"""Type stub of the native module ``verjus._verjus`` (crates/verjus-py)."""

import numpy as np
import numpy.typing as npt

__version__: str

def devices() -> list[str]:
    """Names of the devices this build can compute on; ``"cpu"`` is always first."""

def gemm(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """``a @ b`` for float32 arrays on the CPU (the GIL is released while computing).

    Matrices are the last two axes; leading axes are a batch, equal in both
    operands or absent in one. Raises ``ValueError`` naming both shapes when they
    do not fit, and ``TypeError`` for anything but float32 numpy arrays.
    """
