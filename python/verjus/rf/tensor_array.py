"""``rf.TensorArray``, after RETURNN's ``returnn.frontend.tensor_array``.

A list of tensors of one template (same dims, same sparse dim), built frame by
frame in a loop (``push_back``) and stacked into one tensor over a loop dim at
the end (``stack``), or made from a tensor by cutting it along a dim
(``unstack``). As in RETURNN's eager backends the array is a Python list:
``push_back`` appends to it and returns a new ``TensorArray`` over the same
list (the functional API of RETURNN, without copying per frame). The frames are
ordinary tensors on the tape, so gradients flow through ``stack`` and
``unstack``.
"""

from __future__ import annotations

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_concat as _concat
from verjus._verjus import rf_expand_dim as _expand_dim
from verjus._verjus import rf_full as _full
from verjus._verjus import rf_full_like as _full_like
from verjus._verjus import rf_range_over_dim as _range_over_dim
from verjus._verjus import rf_sequence_mask as _sequence_mask
from verjus._verjus import rf_where as _where
from verjus.rf.array_ import gather

__all__ = ["TensorArray", "masked_stack"]


def _dims_text(dims: tuple[Dim, ...] | list[Dim]) -> str:
    return "[" + ", ".join(d.name for d in dims) + "]"


class TensorArray:
    """A list of tensors shaped like ``tensor_template`` (RETURNN's
    ``rf.TensorArray``).

    :param tensor_template: a tensor with the dims (any order), dtype and
        sparse dim of one entry; only those are read
    :param capacity: the most entries, if known (RETURNN needs it for JAX; here
        it is only kept)
    """

    def __init__(
        self,
        tensor_template: Tensor,
        *,
        capacity: int | None = None,
        _entries: list[Tensor] | None = None,
    ) -> None:
        if not isinstance(tensor_template, Tensor):
            raise TypeError(
                f"TensorArray: tensor_template must be a Tensor, got "
                f"{type(tensor_template).__name__}"
            )
        self.tensor_template = tensor_template
        self.capacity = capacity
        self._entries: list[Tensor] = [] if _entries is None else _entries

    @classmethod
    def unstack(cls, tensor: Tensor, *, axis: Dim) -> TensorArray:
        """``tensor`` cut along ``axis`` into ``axis.size`` entries (a dynamic
        ``axis``: its longest sequence), each over the other dims.

        :param tensor: a tensor with ``axis``
        :param axis: the dim to cut along
        :return: the array of the frames, in order
        """
        if axis not in tensor.dims:
            raise ValueError(
                f"TensorArray.unstack: axis {axis.name} is not a dim of the tensor "
                f"{_dims_text(tensor.dims)}"
            )
        entries = [gather(tensor, indices=i, axis=axis) for i in range(axis.size)]
        if entries:
            template = entries[0]
        else:
            others = [d for d in tensor.dims if d != axis]
            template = _full(dims=others, fill_value=0.0, dtype=tensor.dtype)
        return cls(template, capacity=axis.size, _entries=entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, index: int | Tensor) -> Tensor:
        """The entry at ``index`` (an int or a scalar int Tensor)."""
        if isinstance(index, Tensor):
            if index.dims:
                raise ValueError(
                    f"TensorArray: a Tensor index must be a scalar, got dims "
                    f"{_dims_text(index.dims)}"
                )
            index = int(index.numpy())
        if not -len(self._entries) <= index < len(self._entries):
            raise IndexError(
                f"TensorArray: index {index} is out of range for {len(self._entries)} entries"
            )
        return self._entries[index]

    def push_back(self, tensor: Tensor) -> TensorArray:
        """Appends ``tensor`` (the template's dims, in any order, and sparse
        dim) and returns the array (a new ``TensorArray`` over the same list, as
        RETURNN's eager backends).

        :param tensor: the new entry
        :return: the array with ``tensor`` at its end
        """
        template = self.tensor_template
        if not isinstance(tensor, Tensor):
            raise TypeError(
                f"TensorArray.push_back: expected a Tensor, got {type(tensor).__name__}"
            )
        if set(tensor.dims) != set(template.dims):
            raise ValueError(
                f"TensorArray.push_back: the template has dims {_dims_text(template.dims)}, "
                f"the tensor {_dims_text(tensor.dims)}"
            )
        if tensor.sparse_dim != template.sparse_dim:
            raise ValueError(
                f"TensorArray.push_back: the template has sparse_dim {template.sparse_dim}, "
                f"the tensor {tensor.sparse_dim}"
            )
        self._entries.append(tensor)
        return TensorArray(template, capacity=self.capacity, _entries=self._entries)

    def stack(self, *, axis: Dim) -> Tensor:
        """The entries stacked over ``axis``, one entry per frame (as RETURNN,
        no masking: frames past a sequence's length hold whatever was pushed).

        :param axis: the new dim; its size (a dynamic dim: its longest
            sequence) must be the number of entries
        :return: a tensor over the template's dims and ``axis``
        """
        if axis.size != len(self._entries):
            raise ValueError(
                f"TensorArray.stack: axis {axis.name} has size {axis.size}, the array "
                f"{len(self._entries)} entries"
            )
        if not self._entries:
            return _expand_dim(_full_like(self.tensor_template, 0.0), axis)
        one = Dim(1, name="tensor_array_entry")
        stacked, entry_dim = _concat(*[(_expand_dim(y, one), one) for y in self._entries])
        return gather(stacked, indices=_range_over_dim(axis), axis=entry_dim)


def masked_stack(array: TensorArray, axis: Dim) -> Tensor:
    """``array`` stacked over ``axis``, 0 (of the entries' dtype) past each
    sequence's length of a dynamic ``axis``: what ``scan`` and ``Loop.stack``
    return."""
    stacked = array.stack(axis=axis)
    if axis.dyn_size_ext is None or not len(array):
        return stacked
    zero = _full(dims=[], fill_value=0.0, dtype=stacked.dtype)
    return _where(_sequence_mask(axis), stacked, zero, allow_broadcast_all_sources=True)
