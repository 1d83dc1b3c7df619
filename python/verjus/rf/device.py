"""RETURNN's device and gradient helpers that act on one tensor.

``copy_to_device`` moves values between devices; ``set_requires_gradient``
makes a tensor a leaf that ``rf.gradient`` can differentiate by;
``get_default_dim_size_device`` says where new dims' lengths go.
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


def get_default_dim_size_device() -> str | None:
    """Where RETURNN code should put the lengths of a new dim (``Dim(rf.copy_to_device(
    lengths, rf.get_default_dim_size_device()))``): None, which leaves them where
    they were computed.

    RETURNN's torch backend keeps dim sizes on the CPU and answers ``"cpu"``. verjus
    makes a dim's lengths where its data is (a conv's or a pad's out dim on the
    data's device) and builds a dim's mask where its lengths are, to combine it
    with the data, so the lengths belong on the data's device and stay there;
    ``copy_to_device(x, None)`` returns ``x`` itself.
    """
    return None
