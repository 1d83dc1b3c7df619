"""The short-time Fourier transform, after RETURNN's ``rf.stft``
(``returnn/frontend/signal.py``), with its options to match TensorFlow/SciPy
(the defaults) or PyTorch/librosa framing, and its Hann window.

verjus has no complex dtype, so the result holds the real and imaginary
parts on a size-2 pair dim appended last (index 0 real, 1 imaginary), the
layout of RETURNN's ``rf.complex_as_real`` applied to its complex result; the
power spectrum is ``rf.reduce_sum(rf.square(y), axis=y.dims[-1])``.

The transform is composed of rf ops, so it is differentiable: the frames are
one ``gather`` of the signal, and the windowed DFT one ``matmul`` with a
constant matrix (``window[m] * exp(-2 pi i k n / fft_length)``, built on the
host in float64).
"""

from __future__ import annotations

import functools

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus.rf._dim_args import takes_dims
from verjus.rf.backend import use_mask_default

__all__ = ["stft"]


@functools.lru_cache(maxsize=32)
def _dft_matrix(win_len: int, offset: int, fft_length: int) -> np.ndarray:
    """``[win_len, fft_length // 2 + 1, 2]``: the periodic Hann window times
    ``cos`` / ``-sin`` of ``2 pi k (offset + m) / fft_length``."""
    m = np.arange(win_len)
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * m / win_len) if win_len > 1 else np.ones(1)
    angle = 2.0 * np.pi * np.outer(offset + m, np.arange(fft_length // 2 + 1)) / fft_length
    return np.stack([np.cos(angle), -np.sin(angle)], axis=-1) * window[:, None, None]


@takes_dims
def stft(
    x: Tensor,
    *,
    in_spatial_dim: Dim,
    frame_step: int,
    frame_length: int,
    fft_length: int | None = None,
    window_use_frame_length: bool = True,
    align_window_left: bool = True,
    window_enforce_even: bool = True,
    out_spatial_dim: Dim | None = None,
    out_dim: Dim | None = None,
    use_mask: bool | None = None,
) -> tuple[Tensor, Dim, Dim]:
    """The STFT of ``x`` along ``in_spatial_dim`` with a periodic Hann window,
    as RETURNN's ``rf.stft`` (frames without centering, ``"valid"``).

    :param x: ``{..., in_spatial_dim}``; the other dims are batch dims
    :param in_spatial_dim: the time (sample) dim, may be dynamic
    :param frame_step: the hop between frames (``hop_length``)
    :param frame_length: the window length (``win_length``), at most ``fft_length``
    :param fft_length: the DFT size (``n_fft``); by default ``frame_length``
    :param window_use_frame_length: frames counted with windows of
        ``frame_length`` (TF/SciPy), else of ``fft_length`` (PyTorch/librosa):
        ``ceil((T - window + 1) / frame_step)`` frames per sequence
    :param align_window_left: a window shorter than ``fft_length`` sits at the
        left of each DFT frame (TF/SciPy), else in its center (PyTorch/librosa)
    :param window_enforce_even: an odd window length is lowered by one (TF)
    :param out_spatial_dim: the frames' dim; by default a new one
    :param out_dim: the frequency dim (``fft_length // 2 + 1``); by default a new one
    :param use_mask: zero the padding of a dynamic ``in_spatial_dim`` first
        (None: as RETURNN's ``rf.use_mask_default``: yes, but not with a RETURNN
        behavior version up to 22; the padding frames then enter the frames
        past each sequence's end)
    :return: ``(y, out_spatial_dim, out_dim)``, ``y`` over ``[*batch dims,
        out_dim, out_spatial_dim, pair]`` (``pair``: real, imaginary)
    """
    from verjus import rf
    from verjus.rf.conv import make_conv_out_spatial_dims

    if in_spatial_dim not in x.dims:
        raise ValueError(
            f"stft: in_spatial_dim {in_spatial_dim.name} is not a dim of x "
            f"{[d.name for d in x.dims]}"
        )
    fft_length = fft_length or frame_length
    if not 0 < frame_length <= fft_length or frame_step <= 0:
        raise ValueError(
            f"stft: need 0 < frame_length <= fft_length and frame_step > 0, got"
            f" frame_length={frame_length}, fft_length={fft_length}, frame_step={frame_step}"
        )
    if out_dim is None:
        out_dim = Dim(fft_length // 2 + 1, name="stft-freq")
    elif out_dim.dimension != fft_length // 2 + 1:
        raise ValueError(f"stft: out_dim must have {fft_length // 2 + 1} entries, got {out_dim!r}")
    counted = frame_length if window_use_frame_length else fft_length
    if out_spatial_dim is None:
        (out_spatial_dim,) = make_conv_out_spatial_dims(
            [in_spatial_dim], filter_size=counted, strides=frame_step, padding="valid"
        )
    if use_mask is None:
        use_mask = use_mask_default(
            default=True, default_false_for_behavior_version_up_to=22, func_name="stft"
        )
    if use_mask and in_spatial_dim.is_dynamic():
        x = rf.where(rf.sequence_mask(in_spatial_dim), x, 0.0)
    win_len = frame_length - frame_length % 2 if window_enforce_even else frame_length
    offset = 0 if align_window_left or win_len == fft_length else (fft_length - win_len) // 2
    n_frames, total = out_spatial_dim.size, in_spatial_dim.size
    win_dim = Dim(win_len, name="stft-window")
    sample = np.arange(n_frames)[:, None] * frame_step + offset + np.arange(win_len)[None, :]
    indices = rf.convert_to_tensor(
        np.minimum(sample, max(total - 1, 0)), dims=[out_spatial_dim, win_dim], dtype="int32"
    )
    frames = rf.gather(x, indices=indices, axis=in_spatial_dim)
    if (sample >= total).any():  # past the end of the signal: zeros (PyTorch's padding)
        inside = rf.convert_to_tensor((sample < total).astype(np.float32), dims=indices.dims)
        frames = frames * inside
    pair = Dim(2, name="complex")
    dft = rf.convert_to_tensor(
        _dft_matrix(win_len, offset, fft_length).astype(np.float32), dims=[win_dim, out_dim, pair]
    )
    y = rf.matmul(frames, dft, reduce=win_dim)
    batch_dims = [d for d in x.dims if d != in_spatial_dim]
    return y.copy_transpose([*batch_dims, out_dim, out_spatial_dim, pair]), out_spatial_dim, out_dim
