"""RETURNN's random functions (``returnn/frontend/rand.py``) over the native
uniform and normal draws: the generic ``random``, ``random_uniform`` /
``random_normal`` with RETURNN's options (dtype, sparse_dim, ...),
``random_truncated_normal``, ``random_choice_with_replacement``,
``random_choice_without_replacement``, and the static step-based seeds
(``reset_step_random_state``, ``get_static_step_based_seed``).

Every draw comes from the rf random stream (so ``set_random_seed`` makes it
reproducible), except with ``static=True``, which draws from a numpy generator
seeded by ``seed`` (by default the next step-based seed), the same numbers in
every step after ``reset_step_random_state``. Random numbers carry no
gradient, so the transforms (integer flooring, truncation by redrawing,
sampling from a categorical) run on the host where that is simpler.

``get_random_state`` / ``set_random_state`` save and restore the rf random
stream's position (its seed and offset; reading it draws nothing), so the draws
after a ``set_random_state(state)`` are those that followed
``get_random_state()``, in this run or a later one.

Not supported: ``explicit_state``, ``out`` and ``like``. Unlike RETURNN's,
``rf.set_random_seed`` (native) does not move the step-based seeds; they start
from RETURNN's initial seed 42.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verjus import _verjus
from verjus._verjus import Dim, Tensor
from verjus.rf._dim_args import takes_dims

__all__ = [
    "get_random_state",
    "get_static_step_based_seed",
    "random",
    "random_choice_with_replacement",
    "random_choice_without_replacement",
    "random_normal",
    "random_truncated_normal",
    "random_uniform",
    "reset_step_random_state",
    "set_random_state",
]

# The key of the rf stream's state in ``get_random_state``'s dict (RETURNN's torch
# backend uses "cpu" and "cuda..." for torch's generators).
RANDOM_STATE_KEY = "verjus_rf"
_STATE_BYTES = 16  # the seed and the offset, 8 bytes each, little-endian


def get_random_state() -> dict[str, bytes]:
    """The rf random stream's state, to restore it with ``set_random_state`` (e.g.
    after a restart); reading it draws nothing.

    :return: ``{RANDOM_STATE_KEY: the seed and the offset, 16 bytes}``
    """
    seed, offset = _verjus.rf_random_state()
    return {RANDOM_STATE_KEY: seed.to_bytes(8, "little") + offset.to_bytes(8, "little")}


def set_random_state(state: dict[str, bytes]) -> None:
    """Continues the rf random stream where ``get_random_state`` read it. As in
    RETURNN, the entries of other backends' generators are ignored (the stream then
    stays as it was).

    :param state: as ``get_random_state`` returned it
    """
    saved = state.get(RANDOM_STATE_KEY)
    if saved is None:
        return
    if not isinstance(saved, bytes) or len(saved) != _STATE_BYTES:
        raise ValueError(
            f"set_random_state: {RANDOM_STATE_KEY} must be {_STATE_BYTES} bytes"
            f" (as get_random_state gives), got {saved!r}"
        )
    seed, offset = int.from_bytes(saved[:8], "little"), int.from_bytes(saved[8:], "little")
    _verjus.rf_restore_random_state(seed, offset)


_STEP_SEED = 42
_step_rng = np.random.RandomState(_STEP_SEED)


def reset_step_random_state() -> None:
    """Restarts the step-based seeds: call it at the start of each step, so
    ``static=True`` draws give the same numbers in every step."""
    _step_rng.seed(_STEP_SEED)


def get_static_step_based_seed(*, size: int | Sequence[int] | None = None) -> int | np.ndarray:
    """The next seed(s) from the step-based state (the default seed of
    ``random(..., static=True)``).

    :param size: None for one int, else the shape of an array of seeds
    :return: seed(s) in ``[0, 2**31)``
    """
    return _step_rng.randint(2**31, size=size)


def _number(who: str, name: str, value: float | Tensor | None) -> float | None:
    """A bound as a Python number (a scalar Tensor is read)."""
    if isinstance(value, Tensor):
        if value.dims:
            raise ValueError(f"{who}: {name} must be a number or a scalar Tensor, got {value.dims}")
        return float(value.numpy())
    return None if value is None else float(value)


def _shape(who: str, dims: Sequence[Dim]) -> tuple[int, ...]:
    sizes = tuple(d.get_dim_value_or_none() for d in dims)
    if any(n is None for n in sizes):
        raise ValueError(f"{who}: all dims need a known size, got {list(dims)}")
    return sizes


def _from_host(array: np.ndarray, dims: Sequence[Dim], dtype: str, **kwargs: Dim | None) -> Tensor:
    from verjus import rf

    return rf.convert_to_tensor(array, dims=list(dims), dtype=dtype, **kwargs)


def _host_uniform(dims: Sequence[Dim], rng: np.random.RandomState | None) -> np.ndarray:
    """Uniform ``[0, 1)`` over ``dims``, from ``rng`` or the rf random stream."""

    shape = _shape("random", dims)
    if rng is not None:
        return rng.random_sample(shape)
    fresh = [Dim(n, name=f"rand{i}") for i, n in enumerate(shape)]
    return _verjus.rf_random_uniform(fresh, minval=0.0, maxval=1.0).numpy().astype(np.float64)


def _host_normal(shape: tuple[int, ...], rng: np.random.RandomState | None) -> np.ndarray:
    """Standard normal values of ``shape``, from ``rng`` or the rf random stream."""

    if rng is not None:
        return rng.standard_normal(shape)
    fresh = [Dim(n, name=f"rand{i}") for i, n in enumerate(shape)]
    return _verjus.rf_random_normal(fresh).numpy().astype(np.float64)


def _truncated_normal(
    shape: tuple[int, ...],
    mean: float,
    std: float,
    lo: float,
    hi: float,
    rng: np.random.RandomState | None,
) -> np.ndarray:
    """Normal values in ``[lo, hi]``: those outside are drawn again until all fit."""
    if not lo < hi:
        raise ValueError(f"random: truncated_normal needs minval < maxval, got {lo}, {hi}")
    out = mean + std * _host_normal(shape, rng)
    bad = (out < lo) | (out > hi)
    for _ in range(1000):
        if not bad.any():
            return out
        out[bad] = mean + std * _host_normal((int(bad.sum()),), rng)
        bad = (out < lo) | (out > hi)
    raise ValueError(f"random: truncated_normal range [{lo}, {hi}] is too unlikely to sample")


@takes_dims
def random(
    dims: Sequence[Dim],
    *,
    dtype: str | None = None,
    device: str | None = None,
    sparse_dim: Dim | None = None,
    feature_dim: Dim | None = None,
    distribution: str,
    mean: float | Tensor | None = None,
    stddev: float | Tensor | None = None,
    bound: float | Tensor | None = None,
    minval: float | Tensor | None = None,
    maxval: float | Tensor | None = None,
    seed: int | Sequence[int] | np.ndarray | None = None,
    algorithm: str | None = None,
    explicit_state: Tensor | None = None,
    auto_update_state: bool | None = None,
    static: bool | None = None,
    out: Tensor | None = None,
    like: Tensor | None = None,
) -> Tensor:
    """Random values over ``dims`` (all of known size), as RETURNN's ``rf.random``.

    :param dims: the result's dims
    :param dtype: ``"float32"`` (default; ``"int32"`` with ``sparse_dim``), or
        ``"int32"`` / ``"int64"`` for ``"uniform"``
    :param device: the default device (None)
    :param sparse_dim: for int results
    :param feature_dim: the result's feature dim
    :param distribution: ``"uniform"``, ``"normal"`` or ``"truncated_normal"``
    :param mean: normal / truncated normal (default 0)
    :param stddev: normal / truncated normal (default 1)
    :param bound: uniform in ``[-bound, bound)``
    :param minval: uniform: inclusive lower bound (default 0); truncated normal:
        the lower cut (default ``mean - 2 stddev``)
    :param maxval: uniform: exclusive upper bound (default 1); truncated normal:
        the upper cut (default ``mean + 2 stddev``)
    :param seed: with ``static``: the numpy seed (default the next step-based seed)
    :param algorithm: accepted for RETURNN (one generator here)
    :param explicit_state: not supported
    :param auto_update_state: accepted for RETURNN (no explicit state)
    :param static: draw from ``seed`` instead of the rf random stream
    :param out: not supported
    :param like: not supported
    :return: the random tensor (no gradient)
    """
    from verjus import rf

    del algorithm, auto_update_state
    who = "random"
    if explicit_state is not None or out is not None or like is not None:
        raise NotImplementedError(f"{who}: explicit_state, out and like are not supported")
    if device is not None and device != rf.get_default_device():
        raise ValueError(f"{who}: made on the default device, got device={device!r}")
    dtype = dtype or ("int32" if sparse_dim is not None else "float32")
    if dtype not in ("float32", "int32", "int64"):
        raise ValueError(f"{who}: dtype must be float32, int32 or int64, got {dtype!r}")
    if dtype != "float32" and distribution != "uniform":
        raise ValueError(f"{who}: integer dtypes need distribution='uniform', got {distribution!r}")
    rng = None
    if static:
        rng = np.random.RandomState(get_static_step_based_seed() if seed is None else seed)
    dims = [dims] if isinstance(dims, Dim) else list(dims)
    bound_ = _number(who, "bound", bound)
    lo, hi = _number(who, "minval", minval), _number(who, "maxval", maxval)
    mu, sigma = _number(who, "mean", mean), _number(who, "stddev", stddev)
    if distribution == "uniform":
        if bound_ is not None:
            lo, hi = -bound_, bound_
        lo, hi = 0.0 if lo is None else lo, 1.0 if hi is None else hi
        if dtype != "float32":
            ints = np.floor(lo + _host_uniform(dims, rng) * (hi - lo))
            return _from_host(ints, dims, dtype, sparse_dim=sparse_dim, feature_dim=feature_dim)
        if rng is None and feature_dim is None and all(d.size is not None for d in dims):
            return _verjus.rf_random_uniform(dims, minval=lo, maxval=hi)
        values = lo + _host_uniform(dims, rng) * (hi - lo)
    elif distribution == "normal":
        mu, sigma = mu or 0.0, 1.0 if sigma is None else sigma
        if rng is None and feature_dim is None and all(d.size is not None for d in dims):
            return _verjus.rf_random_normal(dims, mean=mu, stddev=sigma)
        values = mu + sigma * _host_normal(_shape(who, dims), rng)
    elif distribution == "truncated_normal":
        mu, sigma = mu or 0.0, 1.0 if sigma is None else sigma
        lo = mu - 2 * sigma if lo is None else lo
        hi = mu + 2 * sigma if hi is None else hi
        values = _truncated_normal(_shape(who, dims), mu, sigma, lo, hi, rng)
    else:
        raise ValueError(
            f"{who}: distribution must be 'uniform', 'normal' or 'truncated_normal',"
            f" got {distribution!r}"
        )
    return _from_host(values, dims, "float32", feature_dim=feature_dim)


@takes_dims
def random_uniform(
    dims: Sequence[Dim],
    *,
    dtype: str | None = None,
    device: str | None = None,
    sparse_dim: Dim | None = None,
    feature_dim: Dim | None = None,
    minval: float | Tensor | None = None,
    maxval: float | Tensor | None = None,
    seed: int | Sequence[int] | np.ndarray | None = None,
    algorithm: str | None = None,
    explicit_state: Tensor | None = None,
    auto_update_state: bool | None = None,
    static: bool | None = None,
    out: Tensor | None = None,
    like: Tensor | None = None,
) -> Tensor:
    """Uniform values in ``[minval, maxval)``; ``random`` with ``distribution="uniform"``.

    ``dtype`` defaults to the array index dtype with ``sparse_dim``, else float32;
    ``minval`` to 0 and ``maxval`` to ``sparse_dim``'s size for an integer result
    with ``sparse_dim`` (any index of it), else 1. Integer results are
    ``floor(minval + u * (maxval - minval))``."""
    from verjus import rf

    if dtype is None:
        dtype = rf.get_default_array_index_dtype() if sparse_dim is not None else "float32"
    if maxval is None and sparse_dim is not None and dtype.startswith("int"):
        if sparse_dim.dimension is None:
            raise ValueError(f"random_uniform: sparse_dim {sparse_dim} needs a static size")
        maxval = sparse_dim.dimension
    return random(
        dims,
        dtype=dtype,
        device=device,
        sparse_dim=sparse_dim,
        feature_dim=feature_dim,
        distribution="uniform",
        minval=0.0 if minval is None else minval,
        maxval=1.0 if maxval is None else maxval,
        seed=seed,
        algorithm=algorithm,
        explicit_state=explicit_state,
        auto_update_state=auto_update_state,
        static=static,
        out=out,
        like=like,
    )


@takes_dims
def random_normal(
    dims: Sequence[Dim],
    *,
    dtype: str | None = None,
    device: str | None = None,
    sparse_dim: Dim | None = None,
    feature_dim: Dim | None = None,
    mean: float | Tensor | None = 0.0,
    stddev: float | Tensor | None = 1.0,
    seed: int | Sequence[int] | np.ndarray | None = None,
    algorithm: str | None = None,
    explicit_state: Tensor | None = None,
    auto_update_state: bool | None = None,
    static: bool | None = None,
    out: Tensor | None = None,
    like: Tensor | None = None,
) -> Tensor:
    """Normal values of ``mean`` and ``stddev``; ``random`` with ``distribution="normal"``."""
    return random(
        dims,
        dtype=dtype,
        device=device,
        sparse_dim=sparse_dim,
        feature_dim=feature_dim,
        distribution="normal",
        mean=mean,
        stddev=stddev,
        seed=seed,
        algorithm=algorithm,
        explicit_state=explicit_state,
        auto_update_state=auto_update_state,
        static=static,
        out=out,
        like=like,
    )


@takes_dims
def random_truncated_normal(
    dims: Sequence[Dim],
    *,
    dtype: str | None = None,
    device: str | None = None,
    sparse_dim: Dim | None = None,
    feature_dim: Dim | None = None,
    mean: float | Tensor | None = 0.0,
    stddev: float | Tensor | None = 1.0,
    minval: float | Tensor | None = None,
    maxval: float | Tensor | None = None,
    seed: int | Sequence[int] | np.ndarray | None = None,
    algorithm: str | None = None,
    explicit_state: Tensor | None = None,
    auto_update_state: bool | None = None,
    static: bool | None = None,
    out: Tensor | None = None,
    like: Tensor | None = None,
) -> Tensor:
    """Normal values cut to ``[minval, maxval]`` (default ``mean -+ 2 stddev``);
    ``random`` with ``distribution="truncated_normal"``."""
    return random(
        dims,
        dtype=dtype,
        device=device,
        sparse_dim=sparse_dim,
        feature_dim=feature_dim,
        distribution="truncated_normal",
        mean=mean,
        stddev=stddev,
        minval=minval,
        maxval=maxval,
        seed=seed,
        algorithm=algorithm,
        explicit_state=explicit_state,
        auto_update_state=auto_update_state,
        static=static,
        out=out,
        like=like,
    )


def _uniform_tensor(dims: Sequence[Dim], shape: tuple[int, ...]) -> Tensor:
    """Uniform ``[0, 1)`` over ``dims`` (of ``shape``; the batch dim may have no
    known size) from the rf random stream."""
    from verjus import rf

    if all(d.size is not None for d in dims):
        return _verjus.rf_random_uniform(list(dims), minval=0.0, maxval=1.0)
    fresh = [Dim(n, name=f"rand{i}") for i, n in enumerate(shape)]
    values = _verjus.rf_random_uniform(fresh, minval=0.0, maxval=1.0).numpy()
    return rf.convert_to_tensor(values, dims=list(dims))


@takes_dims
def random_choice_without_replacement(
    *,
    log_probs: Tensor,
    axis: Dim | Sequence[Dim],
    num_samples_dim: Dim,
    noise_scale: float | Tensor = 1.0,
) -> Tensor | Sequence[Tensor]:
    """``num_samples_dim`` distinct entries of ``axis`` drawn without
    replacement by the Gumbel top-k trick (``top_k`` of ``log_probs`` plus
    Gumbel noise); ``noise_scale=0`` gives ``top_k``.

    :param log_probs: ``{..., axis}``
    :param axis: the dim(s) to choose from, as in ``top_k``
    :param num_samples_dim: how many to draw
    :param noise_scale: scales the noise
    :return: int32 indices over ``{..., num_samples_dim}`` (one tensor per dim
        of a sequence ``axis``)
    """
    from verjus import rf
    from verjus.rf.search import top_k

    u = _uniform_tensor(log_probs.dims, tuple(log_probs.shape))
    noise = -rf.log(-rf.log(u))
    if not isinstance(noise_scale, (int, float)) or noise_scale != 1.0:
        noise = noise * noise_scale
    _, indices, _ = top_k(log_probs + noise, axis=axis, k_dim=num_samples_dim)
    return indices


@takes_dims
def random_choice_with_replacement(dims: Sequence[Dim], *, probs: Tensor, axis: Dim) -> Tensor:
    """Entries of ``axis`` drawn with replacement from the categorical
    distribution ``probs`` (normalised over ``axis``; padding of a dynamic
    ``axis`` never drawn).

    :param dims: the result's dims: the dims ``probs`` shares (one distribution
        each) and new ones (how many draws)
    :param probs: ``{common dims..., axis}``, non-negative
    :param axis: the dim drawn from
    :return: int32 indices over ``dims``, ``sparse_dim`` = ``axis``
    """
    from verjus import rf

    who = "random_choice_with_replacement"
    dims = list(dims)
    extra = [d.name for d in probs.dims if d != axis and d not in dims]
    if axis not in probs.dims or axis in dims or extra:
        raise ValueError(
            f"{who}: probs {[d.name for d in probs.dims]} must be over axis {axis.name} and"
            f" dims of the result {[d.name for d in dims]} (without axis)"
        )
    if axis.is_dynamic():
        probs = rf.where(rf.sequence_mask(axis), probs, 0.0)
    sizes = dict(zip(probs.dims, probs.shape, strict=True))
    shape = tuple(sizes.get(d, d.size) for d in dims)
    if any(n is None for n in shape):
        raise ValueError(f"{who}: the new dims need a known size, got {dims}")
    common = [d for d in dims if d in probs.dims]
    p = probs.copy_transpose([*common, axis]).numpy().astype(np.float64)
    p = p.reshape([sizes[d] if d in common else 1 for d in dims] + [sizes[axis]])
    cdf = np.cumsum(p, axis=-1)
    u = 1.0 - _uniform_tensor(dims, shape).numpy().astype(np.float64)  # in (0, 1]
    index = np.sum(cdf < (u * cdf[..., -1])[..., None], axis=-1)
    index = np.minimum(index, sizes[axis] - 1)
    return rf.convert_to_tensor(index, dims=dims, dtype="int32", sparse_dim=axis)


# The native ops these wrap (see tests/test_docs.py).
random_uniform.extends_native = _verjus.rf_random_uniform
random_normal.extends_native = _verjus.rf_random_normal
