"""RETURNN's further ``Tensor`` and ``Dim`` API, written over the native handles.

``verjus.rf.Tensor`` and ``verjus.rf.Dim`` are native classes that keep the
state (values, dims, sizes) and the dim logic in Rust. RETURNN's model code
and tests also use a long tail of convenience methods on them
(``x.mark_as_default_output(shape=...)``, ``x.get_axis_from_description(...)``,
``dim.get_dim_value()``, ``dim.is_batch_dim()``, ...). Those are written here in
Python: when an attribute is not one of the native class's own, the native
class looks it up in ``TensorApi`` (for tensors) or ``DimApi`` (for dims) —
a property gives its value, a method is bound to the object. So adding a
RETURNN method is adding it here; the native classes stay small.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor


def _rf() -> Any:
    # verjus.rf imports this module's users; imported late to avoid the cycle.
    import verjus.rf as rf

    return rf


class TensorApi:
    """RETURNN's Tensor methods beyond the native ones (see the module docs).
    ``self`` is the native ``Tensor``."""

    # -- run context -----------------------------------------------------------------

    def mark_as_output(self: Any, name: str, *, shape: Sequence[Dim] | None = None) -> None:
        """``rf.get_run_ctx().mark_as_output(self, name, dims=shape)``."""
        _rf().get_run_ctx().mark_as_output(self, name, dims=shape)

    def mark_as_default_output(self: Any, *, shape: Sequence[Dim] | None = None) -> None:
        """``rf.get_run_ctx().mark_as_default_output(self, shape=shape)``."""
        _rf().get_run_ctx().mark_as_default_output(self, shape=shape)

    def mark_as_loss(self: Any, name: str, **kwargs: Any) -> None:
        """``rf.get_run_ctx().mark_as_loss(self, name, ...)`` (its keyword options)."""
        _rf().get_run_ctx().mark_as_loss(self, name, **kwargs)

    @property
    def control_flow_ctx(self: Any) -> None:
        """RETURNN's loop/cond context of the tensor: always None, as every op runs
        eagerly (a loop's results are ordinary tensors)."""
        return None

    # -- dims ------------------------------------------------------------------------

    @property
    def dims_set(self: Any) -> set[Dim]:
        """The dims as a set."""
        return set(self.dims)

    @property
    def dim_tags(self: Any) -> tuple[Dim, ...]:
        """The dims (RETURNN's older name)."""
        return self.dims

    @property
    def batch_ndim(self: Any) -> int:
        """The number of dims (RETURNN's name: the batch dim counts)."""
        return len(self.dims)

    @property
    def ndim(self: Any) -> int:
        """The number of dims."""
        return len(self.dims)

    @property
    def batch_shape(self: Any) -> tuple[int | None, ...]:
        """Each dim's static size, None where it is not static (RETURNN's)."""
        return tuple(d.dimension for d in self.dims)

    @property
    def dim(self: Any) -> int | None:
        """The feature dim's (or sparse dim's) static size, as RETURNN's ``dim``."""
        d = self.sparse_dim or self.feature_dim
        return d.dimension if d is not None else None

    @property
    def sparse(self: Any) -> bool:
        """Whether the tensor has a sparse dim (its values index it)."""
        return self.sparse_dim is not None

    @property
    def feature_dim_axis(self: Any) -> int | None:
        """The raw axis of the feature dim, or None."""
        f = self.feature_dim
        return self.dims.index(f) if f is not None else None

    @property
    def batch_dim_axis(self: Any) -> int | None:
        """The raw axis of the batch dim, or None."""
        for i, d in enumerate(self.dims):
            if DimApi.is_batch_dim(d):
                return i
        return None

    @property
    def time_dim_axis(self: Any) -> int | None:
        """The raw axis of the first dynamic dim (RETURNN's default time axis), or None."""
        for i, d in enumerate(self.dims):
            if d.is_dynamic():
                return i
        return None

    @property
    def placeholder(self: Any) -> Any:
        """The raw values (RETURNN's old name for ``raw_tensor``)."""
        return self.raw_tensor

    def have_batch_axis(self: Any) -> bool:
        """Whether one of the dims is a batch dim."""
        return self.batch_dim_axis is not None

    def have_time_axis(self: Any) -> bool:
        """Whether one of the dims is dynamic."""
        return self.time_dim_axis is not None

    def get_batch_dim_tag(self: Any) -> Dim:
        """The batch dim; ValueError when there is none."""
        axis = self.batch_dim_axis
        if axis is None:
            raise ValueError(f"get_batch_dim_tag: {self!r} has no batch dim")
        return self.dims[axis]

    def get_time_dim_tag(self: Any) -> Dim:
        """The first dynamic dim; ValueError when there is none."""
        axis = self.time_dim_axis
        if axis is None:
            raise ValueError(f"get_time_dim_tag: {self!r} has no dynamic dim")
        return self.dims[axis]

    def get_dim_tag(self: Any, axis: int) -> Dim:
        """The dim of raw axis ``axis``."""
        return self.dims[axis]

    def get_axis_from_description(self: Any, axis: Any, allow_int: bool = True) -> int:
        """The raw axis of ``axis``: a Dim of the tensor, an int (if allowed), or
        RETURNN's ``"B"`` / ``"T"`` / ``"F"``."""
        axes = TensorApi.get_axes_from_description(self, axis, allow_int=allow_int)
        if len(axes) != 1:
            raise ValueError(f"get_axis_from_description: {axis!r} gives axes {axes} of {self!r}")
        return axes[0]

    def get_axes_from_description(self: Any, axes: Any, allow_int: bool = True) -> list[int]:
        """The raw axes of ``axes`` (a description or a list of them)."""
        if axes is None:
            return []
        if isinstance(axes, (list, tuple)):
            return [
                a for x in axes for a in TensorApi.get_axes_from_description(self, x, allow_int)
            ]
        if isinstance(axes, Dim):
            if axes not in self.dims:
                raise ValueError(f"get_axes_from_description: {axes!r} is not in {self.dims}")
            return [self.dims.index(axes)]
        if isinstance(axes, int) and allow_int:
            return [axes % len(self.dims)]
        named = {"B": self.batch_dim_axis, "T": self.time_dim_axis, "F": self.feature_dim_axis}
        key = str(axes).upper()
        if key in named and named[key] is not None:
            return [named[key]]
        raise ValueError(f"get_axes_from_description: cannot resolve {axes!r} in {self!r}")

    def get_dyn_size_tags(self: Any) -> list[Dim]:
        """The dynamic dims (those with per-sequence lengths)."""
        return [d for d in self.dims if d.is_dynamic()]

    def get_sequence_lengths(self: Any) -> Tensor:
        """The lengths of the first dynamic dim."""
        return TensorApi.get_time_dim_tag(self).dyn_size_ext

    def remaining_dims(self: Any, remove: Dim | Sequence[Dim] | None = None) -> list[Dim]:
        """The dims without ``remove``."""
        remove = [remove] if isinstance(remove, Dim) else list(remove or [])
        return [d for d in self.dims if d not in remove]

    def verify_out_shape(
        self: Any, out_shape: set[Dim] | Sequence[Dim], allow_missing_implicit_dims: bool = False
    ) -> None:
        """Checks that the dims are ``out_shape`` (as a set); ValueError naming both otherwise."""
        del allow_missing_implicit_dims  # verjus has no implicit dims
        if set(self.dims) != set(out_shape):
            raise ValueError(
                f"verify_out_shape: {self!r} has dims {self.dims}, expected {out_shape}"
            )

    # -- copies --------------------------------------------------------------------------

    def copy(self: Any, name: str | None = None) -> Tensor:
        """Another handle to the same values (a template's copy is a template)."""
        out = Tensor(self)
        if name is not None:
            out.name = name
        return out

    def copy_masked(
        self: Any, mask_value: float | int | bool, *, dims: Sequence[Dim] | None = None
    ) -> Tensor:
        """The values with ``mask_value`` at the padding of the dynamic dims (of ``dims``)."""
        rf = _rf()
        dims = [d for d in (dims or self.dims) if d.is_dynamic()]
        if not dims:
            return self
        mask = rf.sequence_mask(dims)
        return rf.where(mask, self, mask_value)

    def copy_compatible_to(
        self: Any,
        data: Any,
        add_dims: bool = True,
        unbroadcast: bool = False,
        except_feature: bool = False,
        except_axis: Any = None,
        check_sparse: bool = True,
        check_dtype: bool = True,
    ) -> Tensor:
        """The values over ``data``'s dims, in its order (RETURNN's): a dim this tensor
        lacks is added as a broadcast dim of size 1 (a new one, unless the dim has
        size 1), or the dim itself with the values repeated where ``unbroadcast``
        (but for ``data``'s feature dim with ``except_feature`` and for
        ``except_axis``). ``data``'s feature dim position is kept, and the sparse dim.

        :param data: the template, over a superset of this tensor's dims
        :param add_dims: else a missing dim is an error
        :param check_sparse: both sparse or both not
        :param check_dtype: the same dtype
        """
        if check_sparse and (self.sparse_dim is None) != (data.sparse_dim is None):
            raise ValueError(f"copy_compatible_to: {self!r} and {data!r} differ in sparsity")
        if check_dtype and self.dtype != data.dtype:
            raise ValueError(f"copy_compatible_to: {self!r} and {data!r} differ in dtype")
        keep = set()
        if except_feature and data.feature_dim is not None:
            keep.add(data.feature_dim)
        if except_axis is not None:
            keep.add(data.dims[TensorApi.get_axis_from_description(data, except_axis)])
        out = _compatible(self, data.dims, add_dims, lambda d: unbroadcast and d not in keep)
        if self.sparse_dim is None:
            axis = data.feature_dim_axis
            out.feature_dim = out.dims[axis] if axis is not None else None
        return out

    def copy_compatible_to_dims(
        self: Any, dims: Sequence[Dim], *, add_dims: bool = True, unbroadcast: bool = False
    ) -> Tensor:
        """The values over ``dims`` (a superset of the tensor's dims), in their order
        (RETURNN's): a missing dim is added as a new broadcast dim of size 1, or as
        itself, the values repeated, with ``unbroadcast``.

        :param add_dims: else a missing dim is an error
        """
        return _compatible(self, dims, add_dims, lambda _d: unbroadcast, True)

    def copy_compatible_to_dims_raw(self: Any, dims: Sequence[Dim]) -> np.ndarray:
        """The values as an array broadcastable to ``dims`` (size 1 where a dim is missing)."""
        present = [d for d in dims if d in self.dims]
        raw = self.copy_transpose(present).numpy()
        return raw.reshape([raw.shape[present.index(d)] if d in present else 1 for d in dims])

    def copy_squeeze_axes(self: Any, axes: Sequence[int]) -> Tensor:
        """Drops the given raw axes (of size 1)."""
        rf = _rf()
        out = self
        for d in [self.dims[a] for a in axes]:
            out = rf.squeeze(out, axis=d)
        return out

    # -- values ------------------------------------------------------------------------

    def item(self: Any) -> float | int | bool:
        """The one value of a one-element tensor, as a Python number (as PyTorch's)."""
        return _one_value(self, "item()")

    def __float__(self: Any) -> float:
        return float(_one_value(self, "float()"))

    def __int__(self: Any) -> int:
        return int(_one_value(self, "int()"))

    def __str__(self: Any) -> str:
        """The repr with the values, so that ``print(loss)`` shows the loss, as
        PyTorch's: a big tensor shows a few values at each end of each axis (numpy's
        summary), a template none. ``repr`` stays without values: error messages
        use it, and it must not copy a tensor from the device."""
        head = repr(self)
        if self.is_template():
            return head
        if self.device != "cpu":
            head = f"{head[:-1]}, device={self.device!r})"
        prefix = f"{head[:-1]}, "
        values = np.array2string(
            np.asarray(self.numpy()),
            separator=", ",
            prefix=prefix,
            threshold=_PRINT_THRESHOLD,
            edgeitems=3,
            precision=4,
        )
        return f"{prefix}{values})"

    # -- operators that need the functional forms (called from the native class) ------

    def __or__(self: Any, other: Any) -> Tensor:
        return _rf().logical_or(self, other)

    def __ror__(self: Any, other: Any) -> Tensor:
        return _rf().logical_or(other, self)

    def __and__(self: Any, other: Any) -> Tensor:
        return _rf().logical_and(self, other)

    def __rand__(self: Any, other: Any) -> Tensor:
        return _rf().logical_and(other, self)

    def __invert__(self: Any) -> Tensor:
        return _rf().logical_not(self)

    def __mod__(self: Any, other: Any) -> Tensor:
        return _rf().mod(self, other)

    def __rmod__(self: Any, other: Any) -> Tensor:
        return _rf().mod(other, self)

    def __floordiv__(self: Any, other: Any) -> Tensor:
        return _rf().floor_divide(self, other)

    def __rfloordiv__(self: Any, other: Any) -> Tensor:
        return _rf().floor_divide(other, self)

    def __abs__(self: Any) -> Tensor:
        return _rf().abs(self)


# ``str(tensor)`` shows all values up to this many, else a few at each end of each axis.
_PRINT_THRESHOLD = 100


def _one_value(x: Any, what: str) -> float | int | bool:
    """The one value of a one-element tensor; a ValueError naming ``what`` and the
    dims otherwise (reduce first, e.g. ``rf.reduce_mean``)."""
    count = int(np.prod(x.shape))  # before the values are copied from the device
    if count != 1:
        raise ValueError(
            f"{what}: {x!r} has {count} values, not one; reduce it first (e.g. "
            f"rf.reduce_mean(x, axis=x.dims))"
        )
    return np.asarray(x.numpy()).reshape(()).item()


def _compatible(
    x: Any,
    dims: Sequence[Dim],
    add_dims: bool,
    expand: Callable[[Dim], bool],
    new_size1: bool = False,
) -> Tensor:
    """``x`` transposed to ``dims``, each missing dim ``d`` added as itself if
    ``expand(d)``, else as a size-1 dim (``d`` itself if of size 1, unless
    ``new_size1``)."""
    rf = _rf()
    dims = list(dims)
    extra = [d for d in x.dims if d not in dims]
    if extra:
        raise ValueError(f"copy_compatible_to: {x!r} has dims {extra} not in {dims}")
    out = x
    for i, d in enumerate(dims):
        if d in x.dims:
            continue
        if not add_dims:
            raise ValueError(f"copy_compatible_to: {d!r} of {dims} is not in {x!r}")
        if not expand(d) and (new_size1 or d.dimension != 1):
            name = f"{d.name}_bc_dim1" if new_size1 else f"{d.name}_dummy_dim1"
            if DimApi.is_batch_dim(d) and not new_size1:
                name = "batch-broadcast"
            dims[i] = d = Dim(1, name=name)
        out = rf.expand_dim(out, dim=d)
    out = out.copy_transpose(dims)
    if x.sparse_dim is not None and out.sparse_dim != x.sparse_dim:
        out.sparse_dim = x.sparse_dim
    return out


class DimApi:
    """RETURNN's Dim methods beyond the native ones (see the module docs).
    ``self`` is the native ``Dim``."""

    def is_batch_dim(self: Any) -> bool:
        """Whether this is a batch dim (``rf.batch_dim``, or a dim named batch)."""
        return self == _rf().batch_dim or self.name == "batch" or self.name.startswith("batch:")

    def is_static(self: Any) -> bool:
        """Whether the size is static."""
        return self.dimension is not None

    def is_dynamic_seq_length(self: Any) -> bool:
        """Whether the dim has per-sequence lengths over other dims."""
        return self.is_dynamic()

    def is_dim_known(self: Any) -> bool:
        """Whether the size is known now (static, bound, or seen in data)."""
        return DimApi.get_dim_value_or_none(self) is not None

    def is_spatial_dim(self: Any) -> bool:
        """Whether the dim is dynamic and not the batch (RETURNN's spatial kind)."""
        return self.is_dynamic() and not DimApi.is_batch_dim(self)

    @property
    def description(self: Any) -> str:
        """The name (RETURNN's ``description``)."""
        return self.name

    @property
    def capacity(self: Any) -> int | None:
        """The axis size of tensors with this dim (static size or longest sequence)."""
        return DimApi.get_dim_value_or_none(self)

    @property
    def dyn_size(self: Any) -> np.ndarray | None:
        """The per-sequence lengths as a numpy array, or None."""
        ext = self.dyn_size_ext
        return ext.raw_tensor if ext is not None else None

    def get_dim_value_or_none(self: Any) -> int | None:
        """The axis size, or None when it is not known yet."""
        return self.axis_size

    def get_dim_value(self: Any) -> int:
        """The axis size: the static size, the longest sequence, or the batch's size."""
        value = DimApi.get_dim_value_or_none(self)
        if value is None:
            raise ValueError(f"get_dim_value: dim {self!r} has no known size yet")
        return value

    def get_dim_value_tensor(self: Any) -> Tensor:
        """The axis size as a scalar int32 Tensor."""
        return _rf().convert_to_tensor(np.int32(DimApi.get_dim_value(self)), dims=[], dtype="int32")

    def get_dyn_size_ext_for_device(self: Any, device: str | None) -> Tensor | None:
        """The lengths, on ``device`` (they are made where the data is)."""
        ext = self.dyn_size_ext
        return ext if ext is None or device is None else _rf().copy_to_device(ext, device)

    def get_size_tensor(self: Any, **_kwargs: Any) -> Tensor:
        """The lengths (dynamic dim) or the size as a scalar Tensor (otherwise)."""
        ext = self.dyn_size_ext
        if ext is not None and ext.raw_tensor is not None:
            return ext
        return DimApi.get_dim_value_tensor(self)

    def get_mask(
        self: Any, *, dim_order: Sequence[Dim] | None = None, device: str | None = None
    ) -> Tensor:
        """The bool mask ``range(self) < lengths`` over the lengths' dims and this dim."""
        del device  # made where the lengths are
        mask = _rf().sequence_mask([self])
        if dim_order is not None:
            mask = mask.copy_transpose([d for d in dim_order if d in mask.dims])
        return mask

    def declare_same_as(self: Any, other: Dim) -> None:
        """Gives this dim ``other``'s sizes. verjus dims keep their identity, so
        the two stay different dims of the same size (RETURNN merges them)."""
        if self == other:
            return
        if other.dimension is not None:
            if self.dimension != other.dimension:
                raise ValueError(f"declare_same_as: {self!r} and {other!r} have different sizes")
            return
        if other.dyn_size_ext is not None:
            self.dyn_size_ext = other.dyn_size_ext

    def reset_eager(self: Any) -> None:
        """Forgets the sizes of a dim that is not static (the template stays)."""
        if self.dimension is None:
            ext = self.dyn_size_ext
            self.dyn_size_ext = ext.copy_template() if ext is not None else None

    def reset_raw(self: Any, *, only_self: bool = False, include_yield_sizes: bool = False) -> None:
        """As ``reset_eager``."""
        del only_self, include_yield_sizes
        DimApi.reset_eager(self)

    def transform_tensors(self: Any, func: Callable[[Tensor], None]) -> None:
        """Calls ``func`` on the lengths tensor (which it may change in place)."""
        ext = self.dyn_size_ext
        if ext is not None:
            func(ext)
            self.dyn_size_ext = ext

    def copy(
        self: Any, *, same_as_self: bool = True, description: str | None = None, **_kwargs: Any
    ) -> Dim:
        """This dim (``same_as_self``), or a new dim of the same size named ``description``."""
        if same_as_self:
            return self
        if self.dimension is not None:
            return Dim(self.dimension, name=description or self.name)
        return Dim(self.dyn_size_ext, name=description or self.name)
