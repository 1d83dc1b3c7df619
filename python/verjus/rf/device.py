"""RETURNN's device and gradient helpers that act on one tensor.

``copy_to_device`` moves values between devices; ``set_requires_gradient``
makes a tensor a leaf that ``rf.gradient`` can differentiate by.
"""

from __future__ import annotations

from verjus._verjus import Tensor


def copy_to_device(x: Tensor, device: str | None = None) -> Tensor:
    """``x`` on ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``; None: unchanged),
    a copy when it is elsewhere."""
    import verjus.rf as rf

    if device is None or x.is_template() or x.device == device:
        return x
    with rf.set_default_device_ctx(device):
        out = rf.convert_to_tensor(
            x.raw_tensor,
            dims=list(x.dims),
            dtype=x.dtype,
            sparse_dim=x.sparse_dim,
            feature_dim=x.feature_dim,
        )
    return out


def set_requires_gradient(tensor: Tensor) -> None:
    """Makes ``tensor`` a leaf of the autograd tape (in place: the same handle),
    so that ``rf.gradient(y, tensor)`` gives ``dy/dtensor``."""
    tensor.requires_grad = True
