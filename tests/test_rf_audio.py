"""``rf.stft`` and ``rf.audio`` (``mel_filterbank``,
``log_mel_filterbank_from_raw``, ``specaugment``, ``random_mask``, ``mask``):
against numpy (``np.fft.rfft`` of windowed frames, per sequence of a dynamic
time dim), finite-difference gradients, against RETURNN's own on its torch
backend, the masks' structure, and bad input.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_rf_grad import check_gradient

from verjus import rf

LENS = [50, 23, 37]
TOL = {"rtol": 1e-4, "atol": 1e-4}

OPTIONS = [
    {"frame_length": 16, "frame_step": 5},
    {"frame_length": 11, "frame_step": 4, "fft_length": 16},
    {"frame_length": 11, "frame_step": 4, "fft_length": 16, "align_window_left": False},
    {"frame_length": 11, "frame_step": 3, "fft_length": 16, "window_enforce_even": False},
    {"frame_length": 12, "frame_step": 3, "fft_length": 16, "window_use_frame_length": False},
]


def time_dim(lens: list[int], name: str = "t") -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name=name)


def signal(lens: list[int]) -> np.ndarray:
    return np.random.default_rng(4).standard_normal((len(lens), max(lens))).astype(np.float32)


def numpy_stft(
    x: np.ndarray,
    frame_length: int,
    frame_step: int,
    fft_length: int | None = None,
    window_use_frame_length: bool = True,
    align_window_left: bool = True,
    window_enforce_even: bool = True,
) -> np.ndarray:
    """``[freq, frames]`` complex STFT of one sequence, TF-style framing and a
    periodic Hann window placed inside each ``fft_length`` frame."""
    n = fft_length or frame_length
    counted = frame_length if window_use_frame_length else n
    frames = max(-(-(len(x) - counted + 1) // frame_step), 0)
    win = frame_length - frame_length % 2 if window_enforce_even else frame_length
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(win) / win)
    offset = 0 if align_window_left else (n - win) // 2
    window = np.zeros(n)
    window[offset : offset + win] = hann
    padded = np.concatenate([x, np.zeros(n)])
    cols = [
        np.fft.rfft(padded[t * frame_step : t * frame_step + n] * window) for t in range(frames)
    ]
    return np.stack(cols, axis=-1) if cols else np.zeros((n // 2 + 1, 0), complex)


@pytest.mark.parametrize("opts", OPTIONS, ids=range(len(OPTIONS)))
def test_stft_against_numpy_per_sequence(opts: dict) -> None:
    xv = signal(LENS)
    time = time_dim(LENS)
    noisy = np.where(np.arange(max(LENS)) < np.array(LENS)[:, None], xv, 1e3).astype(np.float32)
    x = rf.convert_to_tensor(noisy, dims=[rf.batch_dim, time])
    y, frames, freq = rf.stft(x, in_spatial_dim=time, **opts)
    assert y.dims[:3] == (rf.batch_dim, freq, frames)
    assert y.dims[3].dimension == 2
    got = y.numpy()
    lens = frames.dyn_size_ext.numpy()
    for b, n in enumerate(LENS):
        want = numpy_stft(xv[b, :n], **opts)
        assert lens[b] == want.shape[1]
        np.testing.assert_allclose(got[b, :, : lens[b], 0], want.real, **TOL)
        np.testing.assert_allclose(got[b, :, : lens[b], 1], want.imag, **TOL)


def test_stft_gradient() -> None:
    time = time_dim([9, 6])
    xv = signal([9, 6])

    def f(x: rf.Tensor) -> rf.Tensor:
        y, frames, _ = rf.stft(x, in_spatial_dim=time, frame_length=4, frame_step=2, fft_length=6)
        return rf.where(rf.sequence_mask(frames), y, 0.0)

    check_gradient(f, xv, [rf.batch_dim, time])


@pytest.mark.parametrize("opts", OPTIONS[:4], ids=range(4))
def test_stft_against_returnn_on_its_torch_backend(opts: dict) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own stft is the reference")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    xv = signal(LENS)
    tb = Dim(len(LENS), name="b")
    tt = Dim(Tensor("l", [tb], "int32", raw_tensor=torch.tensor(LENS, dtype=torch.int32)), name="t")
    tx = Tensor("x", [tb, tt], "float32", raw_tensor=torch.from_numpy(xv))
    ty, t_frames, t_freq = rrf.stft(tx, in_spatial_dim=tt, use_mask=True, **opts)
    want = ty.copy_transpose([tb, t_freq, t_frames]).raw_tensor.numpy()

    time = time_dim(LENS)
    y, frames, _ = rf.stft(
        rf.convert_to_tensor(xv, dims=[rf.batch_dim, time]), in_spatial_dim=time, **opts
    )
    got = y.numpy()
    lens = frames.dyn_size_ext.numpy()
    np.testing.assert_array_equal(lens, t_frames.dyn_size_ext.raw_tensor.numpy())
    for b in range(len(LENS)):
        np.testing.assert_allclose(got[b, :, : lens[b], 0], want[b, :, : lens[b]].real, **TOL)
        np.testing.assert_allclose(got[b, :, : lens[b], 1], want[b, :, : lens[b]].imag, **TOL)


def numpy_mel(sr: float, n_fft: int, n_mel: int, f_min: float = 0.0, f_max: float | None = None):
    """Triangular filters between mel-spaced edges (in FFT bins)."""
    f_max = f_max or sr / 2

    def mel(f: float) -> float:
        return 1125.0 * math.log(1 + f / 700.0)

    step = (mel(f_max) - mel(f_min)) / (n_mel + 1)
    edges = [
        n_fft / sr * 700.0 * (math.exp((mel(f_min) + i * step) / 1125.0) - 1)
        for i in range(n_mel + 2)
    ]
    out = np.zeros((n_fft // 2 + 1, n_mel))
    for k in range(n_fft // 2 + 1):
        for j in range(n_mel):
            lo, mid, hi = edges[j], edges[j + 1], edges[j + 2]
            if lo < k <= mid:
                out[k, j] = (k - lo) / (mid - lo)
            elif mid < k < hi:
                out[k, j] = (hi - k) / (hi - mid)
    return out


def test_mel_filterbank_values_and_gradient() -> None:
    freq, mel = rf.Dim(33, name="freq"), rf.Dim(10, name="mel")
    time = time_dim([3, 2])
    xv = np.abs(np.random.default_rng(1).standard_normal((2, 3, 33))).astype(np.float32)
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, freq])
    y = rf.audio.mel_filterbank(x, in_dim=freq, out_dim=mel, sampling_rate=8000, f_min=60)
    assert y.dims == (rf.batch_dim, time, mel)
    want = xv @ numpy_mel(8000, 64, 10, f_min=60)
    np.testing.assert_allclose(y.numpy()[0], want[0], **TOL)
    np.testing.assert_allclose(y.numpy()[1, :2], want[1, :2], **TOL)

    def f(x: rf.Tensor) -> rf.Tensor:
        return rf.audio.mel_filterbank(x, in_dim=freq, out_dim=mel, sampling_rate=8000)

    check_gradient(f, xv[:, :, :], [rf.batch_dim, time, freq])


def test_log_mel_against_returnn_on_its_torch_backend() -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own log mel features are the reference")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    lens = [2400, 1000, 1700]
    xv = signal(lens)
    tb = Dim(len(lens), name="b")
    tt = Dim(Tensor("l", [tb], "int32", raw_tensor=torch.tensor(lens, dtype=torch.int32)), name="t")
    tx = Tensor("x", [tb, tt], "float32", raw_tensor=torch.from_numpy(xv))
    tmel = Dim(40, name="mel")
    ty, t_frames = rrf.audio.log_mel_filterbank_from_raw(tx, in_spatial_dim=tt, out_dim=tmel)
    want = ty.copy_transpose([tb, t_frames, tmel]).raw_tensor.numpy()

    time, mel = time_dim(lens), rf.Dim(40, name="mel")
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time])
    y, frames = rf.audio.log_mel_filterbank_from_raw(x, in_spatial_dim=time, out_dim=mel)
    assert y.dims == (rf.batch_dim, frames, mel)
    n = frames.dyn_size_ext.numpy()
    np.testing.assert_array_equal(n, t_frames.dyn_size_ext.raw_tensor.numpy())
    for b in range(len(lens)):
        np.testing.assert_allclose(y.numpy()[b, : n[b]], want[b, : n[b]], rtol=1e-4, atol=1e-4)


def spec_input(lens: list[int], feat: int = 20) -> tuple[rf.Tensor, rf.Dim, rf.Dim]:
    time, f = time_dim(lens), rf.Dim(feat, name="f")
    x = rf.convert_to_tensor(
        np.ones((len(lens), max(lens), feat), np.float32), dims=[rf.batch_dim, time, f]
    )
    return x, time, f


def test_specaugment_only_in_training_and_reproducible() -> None:
    x, time, f = spec_input([300, 120])
    rf.init_forward_step_run_ctx()
    assert rf.audio.specaugment(x, spatial_dim=time, feature_dim=f) is x
    rf.init_train_step_run_ctx()
    try:
        rf.set_random_seed(5)
        a = rf.audio.specaugment(x, spatial_dim=time, feature_dim=f).numpy()
        rf.set_random_seed(5)
        b = rf.audio.specaugment(x, spatial_dim=time, feature_dim=f).numpy()
        np.testing.assert_array_equal(a, b)
        assert set(np.unique(a)) <= {0.0, 1.0}
        assert (a == 0).any()
    finally:
        rf.init_forward_step_run_ctx()


def test_random_mask_spans_within_each_sequence() -> None:
    lens = [40, 9, 25]
    x, time, f = spec_input(lens)
    rf.set_random_seed(1)
    for _ in range(5):
        y = rf.audio.random_mask(
            x, mask_axis=time, broadcast_axis=f, min_num=2, max_num=3, max_dims=4, mask_value=-1.0
        )
        assert y.dims == x.dims
        out = y.numpy()
        assert (out == out[..., :1]).all()  # the same mask for every feature
        for b, n in enumerate(lens):
            masked = out[b, :, 0] == -1.0
            assert not masked[n:].any()  # padding is never masked
            starts = np.flatnonzero(masked & ~np.r_[False, masked[:-1]])
            ends = np.flatnonzero(masked & ~np.r_[masked[1:], False])
            assert 1 <= len(starts) <= 3
            assert ((ends - starts) < 4 * 3).all()
            assert 2 <= masked.sum() <= 12


def test_mask_at_positions() -> None:
    x, time, _f = spec_input([10, 4])
    pos = rf.convert_to_tensor(np.array([2, 3], np.int32), dims=[rf.batch_dim])
    out = rf.audio.mask(x, mask_axis=time, pos=pos, max_amount=3).numpy()[..., 0]
    for b, (p, n) in enumerate([(2, 10), (3, 4)]):
        zero = np.flatnonzero(out[b] == 0)
        assert zero[0] == p
        assert len(zero) <= 3
        assert zero[-1] < n
        assert np.array_equal(zero, np.arange(p, zero[-1] + 1))


def test_bad_input() -> None:
    x, time, f = spec_input([5, 3])
    other = rf.Dim(5, name="other")
    with pytest.raises(ValueError, match="stft: in_spatial_dim other is not a dim"):
        rf.stft(x, in_spatial_dim=other, frame_length=2, frame_step=1)
    with pytest.raises(ValueError, match="stft: need 0 < frame_length <= fft_length"):
        rf.stft(x, in_spatial_dim=time, frame_length=8, frame_step=1, fft_length=4)
    with pytest.raises(ValueError, match="mel_filterbank: in_dim must have"):
        rf.audio.mel_filterbank(x, in_dim=f, out_dim=other, sampling_rate=16000, fft_length=64)
    with pytest.raises(ValueError, match=r"random_mask: \['other'\] not among"):
        rf.audio.random_mask(x, mask_axis=other, broadcast_axis=f, min_num=1, max_num=1, max_dims=1)
