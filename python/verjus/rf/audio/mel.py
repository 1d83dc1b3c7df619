"""Mel filterbank features, after RETURNN's ``rf.audio.mel_filterbank`` and
``rf.audio.log_mel_filterbank_from_raw``.

The filterbank is RETURNN's: triangular filters whose edges are equally spaced
on the mel scale ``1125 ln(1 + f / 700)`` (Huang, Acero & Hon, "Spoken Language
Processing", eq. 6.141), a constant matrix built on the host and applied by
``matmul``, so the features are differentiable in the signal.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus.rf.audio.stft import stft

__all__ = ["log_mel_filterbank_from_raw", "mel_filterbank"]


def _mel(freq: np.ndarray) -> np.ndarray:
    return 1125.0 * np.log1p(freq / 700.0)


def _inv_mel(mel: np.ndarray) -> np.ndarray:
    return 700.0 * np.expm1(mel / 1125.0)


@functools.lru_cache(maxsize=32)
def _filterbank(
    f_min: float, f_max: float, sampling_rate: float, fft_size: int, num_filters: int
) -> np.ndarray:
    """``[fft_size // 2 + 1, num_filters]``: filter ``j`` rises linearly from
    the FFT bin of edge ``j`` to 1 at edge ``j + 1`` and falls to 0 at edge
    ``j + 2`` (the edges in float32, as RETURNN keeps them)."""
    steps = np.arange(num_filters + 2) * ((_mel(f_max) - _mel(f_min)) / (num_filters + 1))
    edges = (fft_size / sampling_rate * _inv_mel(_mel(f_min) + steps)).astype(np.float32)
    left, center, right = edges[:-2], edges[1:-1], edges[2:]
    bins = np.arange(fft_size // 2 + 1, dtype=np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):  # empty filters stay 0
        rising = (bins - left) / (center - left)
        falling = (right - bins) / (right - center)
    inside = (bins > left) & (bins < right)
    return np.where(inside, np.where(bins < center, rising, falling), 0.0).astype(np.float32)


def mel_filterbank(
    x: Tensor,
    *,
    in_dim: Dim,
    out_dim: Dim,
    sampling_rate: float,
    fft_length: int | None = None,
    f_min: float | None = None,
    f_max: float | None = None,
) -> Tensor:
    """The mel filterbank applied to a (power) spectrum ``x`` over ``in_dim``.

    :param x: ``{..., in_dim}``
    :param in_dim: the frequency bins, ``fft_length // 2 + 1`` (e.g. from ``stft``)
    :param out_dim: the number of mel filters
    :param sampling_rate: samples per second
    :param fft_length: the DFT size; by default ``(in_dim - 1) * 2``
    :param f_min: the lowest frequency (default 0)
    :param f_max: the highest frequency (default ``sampling_rate / 2``)
    :return: ``x`` with ``in_dim`` replaced by ``out_dim`` (last)
    """
    from verjus import rf

    if in_dim not in x.dims:
        raise ValueError(
            f"mel_filterbank: in_dim {in_dim.name} is not a dim of x {[d.name for d in x.dims]}"
        )
    fft_length = fft_length or (in_dim.dimension - 1) * 2
    if in_dim.dimension != fft_length // 2 + 1:
        raise ValueError(
            f"mel_filterbank: in_dim must have fft_length // 2 + 1 = {fft_length // 2 + 1}"
            f" entries, got {in_dim!r}"
        )
    matrix = _filterbank(
        float(f_min or 0.0),
        float(f_max or sampling_rate / 2.0),
        float(sampling_rate),
        fft_length,
        out_dim.dimension,
    )
    bank = rf.convert_to_tensor(matrix, dims=[in_dim, out_dim], feature_dim=out_dim)
    return rf.matmul(x, bank, reduce=in_dim)


def log_mel_filterbank_from_raw(
    raw_audio: Tensor,
    *,
    in_spatial_dim: Dim,
    out_dim: Dim,
    sampling_rate: int = 16_000,
    window_len: float = 0.025,
    step_len: float = 0.010,
    n_fft: int | None = None,
    log_base: float = 10,
) -> tuple[Tensor, Dim]:
    """Log mel filterbank features of raw audio, RETURNN's: ``stft`` (its
    defaults), the power spectrum, ``mel_filterbank``, ``log(max(., 1e-10))``
    to ``log_base``.

    :param raw_audio: ``{..., in_spatial_dim}``; a feature dim of size 1 is
        squeezed away
    :param in_spatial_dim: the samples' dim
    :param out_dim: the number of mel filters
    :param sampling_rate: samples per second
    :param window_len: the window, in seconds
    :param step_len: the hop, in seconds
    :param n_fft: the DFT size; by default the next power of two of the window
    :param log_base: e.g. 10 or ``math.e``
    :return: the features over ``[..., out_spatial_dim, out_dim]`` and
        ``out_spatial_dim``
    """
    from verjus import rf

    feature = raw_audio.feature_dim
    if feature is not None and feature.dimension == 1 and feature != in_spatial_dim:
        raw_audio = rf.gather(raw_audio, indices=0, axis=feature)
    window = int(window_len * sampling_rate)
    step = int(step_len * sampling_rate)
    if not n_fft:
        n_fft = 1 << max(window - 1, 0).bit_length()
    spectrum, out_spatial_dim, freq_dim = stft(
        raw_audio,
        in_spatial_dim=in_spatial_dim,
        frame_step=step,
        frame_length=window,
        fft_length=n_fft,
    )
    power = rf.reduce_sum(rf.square(spectrum), axis=spectrum.dims[-1])
    mel = mel_filterbank(power, in_dim=freq_dim, out_dim=out_dim, sampling_rate=sampling_rate)
    log_mel = rf.safe_log(mel, eps=1e-10)
    if log_base != math.e:
        log_mel = log_mel * (1.0 / math.log(log_base))
    return log_mel, out_spatial_dim
