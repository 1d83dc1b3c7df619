"""The rotation of rotary positional encoding (RoPE, Su et al. 2021), as
RETURNN's ``_apply_rope`` / ``_apply_rope_real`` (``returnn/frontend/attention.py``,
where ``verjus.rf.attention`` makes them importable too).

RETURNN's ``_apply_rope`` hands the rotation to the backend (PyTorch's has a
fused one) and ``_apply_rope_real`` is the plain-rf reference it is checked
against. On verjus the backend is rf itself, so both are the rf composition
(``split``, ``split_dims``, ``unstack``, products with the ``sin`` / ``cos``
tables, ``stack``, ``merge_dims``), which is on the tape.
"""

from __future__ import annotations

from verjus._verjus import Dim, Tensor


def _apply_rope_real(x: Tensor, pos_enc: Tensor, feat_dim: Dim) -> Tensor:
    """RoPE of ``x`` along ``feat_dim``: each pair ``(x[2i], x[2i + 1])``, read as
    the complex number ``re + i im``, is multiplied by ``cos + i sin`` of
    ``pos_enc`` (``sin`` in the first half of ``feat_dim``, ``cos`` in the second).

    :param x: ``{..., feat_dim}`` (with the positions' dims, e.g. time)
    :param pos_enc: ``{..., feat_dim}``, as ``sinusoidal_positional_encoding``
    :param feat_dim: static, even
    :return: ``x`` rotated, over ``x``'s dims (plus ``pos_enc``'s other dims)
    """
    from verjus import rf

    if feat_dim not in x.dims or feat_dim not in pos_enc.dims:
        raise ValueError(
            f"apply_rope: feat_dim {feat_dim.name} must be a dim of x "
            f"{[d.name for d in x.dims]} and of pos_enc {[d.name for d in pos_enc.dims]}"
        )
    half = feat_dim.div_left(2)
    sin, cos = rf.split(pos_enc, axis=feat_dim, out_dims=[half, half])
    pair = Dim(2, name="complex")
    re, im = rf.unstack(rf.split_dims(x, axis=feat_dim, dims=(half, pair)), axis=pair)
    rotated, _ = rf.stack((re * cos - im * sin, re * sin + im * cos), out_dim=pair)
    out, _ = rf.merge_dims(rotated, dims=(half, pair), out_dim=feat_dim)
    return out


def _apply_rope(x: Tensor, pos_enc: Tensor, feat_dim: Dim) -> Tensor:
    """RETURNN's backend entry of the rotation: ``_apply_rope_real`` on verjus."""
    return _apply_rope_real(x, pos_enc, feat_dim)
