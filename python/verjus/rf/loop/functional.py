"""RETURNN's functional loops (``returnn.frontend.loop``): ``while_loop`` and ``scan``.

Both run eagerly in Python, each step's ops on the autograd tape, so gradients
flow back through every step (backprop through time) with no extra machinery.
Loop variables are nested structures (tuples, lists, dicts, ``rf.State``) of
Tensors, ``None`` or other values; RETURNN walks them with dm-tree, here the
small ``_flatten`` / ``_unflatten`` pair below does (no dependency).

``scan`` over a given ``spatial_dim`` takes each step's ``xs`` frame with
``gather``, keeps the state of entries whose sequence has ended (``where`` on
``i < length``), and stacks the ``ys`` frames over ``spatial_dim`` (padding 0).
A ``cond``-ended scan (no ``spatial_dim``) counts each entry's steps while its
``cond`` holds (read on the host after each step) and returns a new dynamic Dim
with those lengths.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

from verjus._verjus import Dim, Tensor
from verjus._verjus import compare as _compare
from verjus._verjus import rf_cast as _cast
from verjus._verjus import rf_where as _where
from verjus.rf._dim_args import takes_dims
from verjus.rf.array_ import gather
from verjus.rf.tensor_array import TensorArray, masked_stack

__all__ = ["scan", "while_loop"]


def _flatten(structure: Any) -> list[Any]:
    """The leaves of ``structure`` (anything but a tuple, list or dict is a
    leaf, ``None`` included), dicts in sorted key order (as RETURNN's ``tree``:
    a state's entries may be set in any order)."""
    if isinstance(structure, (tuple, list)):
        return [leaf for item in structure for leaf in _flatten(item)]
    if isinstance(structure, dict):
        return [leaf for k in sorted(structure) for leaf in _flatten(structure[k])]
    return [structure]


def _unflatten(structure: Any, leaves: list[Any]) -> Any:
    """``structure`` with its leaves replaced, in ``_flatten`` order, by
    ``leaves`` (consumed from the front)."""
    if isinstance(structure, (tuple, list)):
        items = [_unflatten(item, leaves) for item in structure]
        return (
            type(structure)(items) if isinstance(structure, list) else _tuple_like(structure, items)
        )
    if isinstance(structure, dict):
        values = {k: _unflatten(structure[k], leaves) for k in sorted(structure)}
        return type(structure)([(k, values[k]) for k in structure])
    return leaves.pop(0)


def _tuple_like(template: tuple, items: list[Any]) -> tuple:
    if hasattr(template, "_fields"):  # a namedtuple
        return type(template)(*items)
    return type(template)(items)


def _assert_same_structure(what: str, a: Any, b: Any, path: str = "") -> None:
    """Raises a ValueError naming the first place where ``a`` and ``b`` differ
    in nesting (container kind, length or dict keys)."""
    for kinds in ((tuple, list), (dict,)):
        if isinstance(a, kinds) or isinstance(b, kinds):
            if not (isinstance(a, kinds) and isinstance(b, kinds)) or type(a) is not type(b):
                raise ValueError(
                    f"{what}: at {path or 'the top'}, expected a {type(a).__name__}, "
                    f"got a {type(b).__name__}"
                )
            if kinds == (dict,):
                if set(a) != set(b):
                    raise ValueError(
                        f"{what}: at {path or 'the top'}, expected keys {sorted(a)}, "
                        f"got {sorted(b)}"
                    )
                for k in sorted(a):
                    _assert_same_structure(what, a[k], b[k], f"{path}[{k!r}]")
            else:
                if len(a) != len(b):
                    raise ValueError(
                        f"{what}: at {path or 'the top'}, expected {len(a)} entries, got {len(b)}"
                    )
                for k, (x, y) in enumerate(zip(a, b, strict=True)):
                    _assert_same_structure(what, x, y, f"{path}[{k}]")
            return
    if isinstance(a, Tensor) != isinstance(b, Tensor):
        raise ValueError(
            f"{what}: at {path or 'the top'}, expected a {type(a).__name__}, "
            f"got a {type(b).__name__}"
        )


def check_max_seq_len(who: str, value: Any) -> int | Tensor | None:
    """``max_seq_len`` as given (None, or a scalar int Tensor, read when the loop
    runs: see ``read_max_seq_len``) or as an int. A negative int is a ValueError
    and anything else a TypeError, each naming ``who`` and the argument (RETURNN
    runs no step for a negative one: a count below 0 is always a mistake)."""
    if value is None:
        return None
    if isinstance(value, Tensor):
        if value.dims or not value.dtype.startswith(("int", "uint")):
            raise TypeError(
                f"{who}: max_seq_len must be an int >= 0 or a scalar int Tensor, got {value!r}"
            )
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{who}: max_seq_len must be an int >= 0 or a scalar int Tensor, "
            f"got {type(value).__name__} {value!r}"
        )
    if value < 0:
        raise ValueError(f"{who}: max_seq_len must be >= 0, got {value}")
    return int(value)


def read_max_seq_len(who: str, value: int | Tensor | None) -> int | None:
    """The value of a ``check_max_seq_len`` result, a Tensor read on the host
    (ValueError naming ``who`` if negative)."""
    if not isinstance(value, Tensor):
        return value
    count = int(value.numpy())
    if count < 0:
        raise ValueError(f"{who}: max_seq_len must be >= 0, got {count} (a Tensor)")
    return count


def _bool_value(value: bool | Tensor) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, Tensor):
        if value.dims or value.dtype != "bool":
            raise ValueError(
                f"while_loop: cond must give a bool or a scalar bool Tensor, got {value!r}"
            )
        return bool(value.numpy())
    raise TypeError(f"while_loop: cond must give a bool or a Tensor, got {type(value).__name__}")


def while_loop(
    cond: Callable[[Any], bool | Tensor], body: Callable[[Any], Any], initial: Any
) -> Any:
    """Runs ``while cond(loop_vars): loop_vars = body(loop_vars)`` from
    ``initial`` and returns the final loop vars, as RETURNN's
    ``rf.while_loop``.

    :param cond: gives a bool or a scalar bool Tensor (read on the host)
    :param body: gives new loop vars of the same nested structure (tuples,
        lists, dicts, ``rf.State``, with Tensors, ``None`` or other leaves)
    :param initial: the initial loop vars
    :return: the loop vars after the last step; every step's ops are on the
        autograd tape, so gradients flow back through all of them
    """
    loop_vars = initial
    while _bool_value(cond(loop_vars)):
        new_vars = body(loop_vars)
        _assert_same_structure("while_loop: body", loop_vars, new_vars)
        loop_vars = new_vars
    return loop_vars


def _mask_state(new: Any, old: Any, mask: Tensor | None) -> Any:
    """``new`` where ``mask`` holds, else ``old``, for each Tensor leaf. A leaf
    whose dims changed in the step (e.g. a new beam dim) lacks some of ``old``'s
    dims and is taken as it is, as RETURNN (no per-entry merge of the dims)."""
    if mask is None:
        return new
    merged = [
        _where(mask, n, o, allow_broadcast_all_sources=True)
        if isinstance(n, Tensor) and set(o.dims) <= set(n.dims)
        else n
        for n, o in zip(_flatten(new), _flatten(old), strict=True)
    ]
    return _unflatten(new, merged)


def _follow_dims(arrays: list[TensorArray | None], old: Any, new: Any) -> None:
    """Dims in the state that the step replaced (``old`` -> ``new`` at the same
    place, e.g. a new beam dim each step) are replaced in the arrays' templates
    too, so that each step's frame matches its template (RETURNN's eager dim
    updates)."""
    renamed = {
        o: n
        for o, n in zip(_flatten(old), _flatten(new), strict=True)
        if isinstance(o, Dim) and isinstance(n, Dim) and o != n
    }
    if not renamed:
        return
    for array in arrays:
        template = array.tensor_template if array is not None else None
        if template is not None and any(d in renamed for d in template.dims):
            dims = [renamed.get(d, d) for d in template.dims]
            array.tensor_template = Tensor(
                "template", dims, template.dtype, sparse_dim=template.sparse_dim
            )


def _new_arrays(ys: Any) -> list[TensorArray | None]:
    """One empty ``TensorArray`` per leaf of ``ys`` (None for a None leaf)."""
    return [None if y is None else TensorArray(y) for y in _flatten(ys)]


def _push_back(arrays: list[TensorArray | None], ys: Any, y: Any) -> list[TensorArray | None]:
    _assert_same_structure("rf.scan: body's y", ys, y)
    return [
        None if array is None else array.push_back(frame)
        for array, frame in zip(arrays, _flatten(y), strict=True)
    ]


def _results(
    ys: Any, arrays: list[TensorArray | None], spatial_dim: Dim, return_tensor_arrays: bool
) -> Any:
    """The ``ys`` structure of the arrays, or of them stacked over
    ``spatial_dim`` (frames past a sequence's length set to 0)."""
    if return_tensor_arrays:
        return _unflatten(ys, list(arrays))
    return _unflatten(ys, [None if a is None else masked_stack(a, spatial_dim) for a in arrays])


@takes_dims
def scan(
    *,
    spatial_dim: Dim | None = None,
    cond_dims: Any = None,
    cond_before_body: bool = True,
    initial: Any = None,
    xs: Any = None,
    ys: Any = None,
    cond: Callable[[Any, Any], Tensor] | None = None,
    body: Callable[[Any, Any], tuple[Any, Any]],
    max_seq_len: int | Tensor | None = None,
    return_tensor_arrays: bool = False,
) -> tuple[Any, Any, Dim]:
    """Iterates ``body`` over ``spatial_dim``, as RETURNN's ``rf.scan``.

    Each step calls ``y, state = body(x, state)``, ``x`` being ``xs`` (a nested
    structure of Tensors over ``spatial_dim``, or None) at the step's frame. An
    entry whose sequence has ended (frame ``>=`` its length in a dynamic
    ``spatial_dim``) keeps its state.

    :param spatial_dim: the dim to iterate over (static or dynamic)
    :param initial: the initial state (nested structure)
    :param xs: inputs over ``spatial_dim`` (nested structure), or None
    :param ys: the structure of ``body``'s outputs, with a Tensor (a template:
        only its dims, for a ``spatial_dim`` of length 0) or None per output
    :param body: ``(x, state) -> (y, new_state)``
    :param cond: without ``spatial_dim``: ``(None, state) -> bool Tensor`` (e.g.
        over ``[batch]``); an entry runs while it holds, the loop until it
        holds for none (or ``max_seq_len`` steps)
    :param cond_dims: the dims of ``cond``'s result (read from it here)
    :param cond_before_body: True: ``while cond: body``; False: ``body`` first
        (each entry gets at least one frame)
    :param max_seq_len: with ``cond``: at most this many steps (an int >= 0 or
        a scalar int Tensor; a negative one is a ValueError, where RETURNN runs
        no step)
    :param return_tensor_arrays: True: each y as the ``rf.TensorArray`` of its
        frames (not stacked, so not masked), as RETURNN
    :return: ``(ys, final_state, spatial_dim)``: each y stacked over
        ``spatial_dim`` (0 past each sequence's length), the state after each
        entry's last frame; with ``cond``, ``spatial_dim`` is a new dynamic
        Dim with each entry's number of steps (as RETURNN, the state of the
        step at which ``cond`` turned False is not kept)
    """
    max_seq_len = check_max_seq_len("rf.scan", max_seq_len)
    if spatial_dim is None:
        if cond is None or xs is not None:
            raise ValueError("rf.scan: without spatial_dim, give cond (and no xs)")
        return _scan_until(
            cond, cond_before_body, initial, ys, body, max_seq_len, return_tensor_arrays
        )
    if cond is not None or max_seq_len is not None:
        raise ValueError(
            f"rf.scan: spatial_dim {spatial_dim.name} is given, cond and max_seq_len must not be"
        )
    del cond_dims  # the dims of cond's result, needed by graph backends only
    lengths = spatial_dim.dyn_size_ext
    shortest = (
        spatial_dim.size
        if lengths is None
        else int(lengths.numpy().min(initial=spatial_dim.size))  # one host read
    )
    state = initial
    arrays = _new_arrays(ys)
    for i in range(spatial_dim.size):
        x = (
            None
            if xs is None
            else _unflatten(xs, [gather(v, indices=i, axis=spatial_dim) for v in _flatten(xs)])
        )
        y, new_state = body(x, state)
        _assert_same_structure("rf.scan: body's state", state, new_state)
        _follow_dims(arrays, state, new_state)
        arrays = _push_back(arrays, ys, y)
        # No mask while every entry still runs (steps below the shortest length).
        mask = None if i < shortest else _compare(lengths, ">", i)
        state = _mask_state(new_state, state, mask)
    return _results(ys, arrays, spatial_dim, return_tensor_arrays), state, spatial_dim


def _logical_and(a: Tensor, b: Tensor) -> Tensor:
    return _compare(_cast(a, "int32") * _cast(b, "int32"), ">", 0)


def _scan_until(
    cond: Callable[[Any, Any], Tensor],
    cond_before_body: bool,
    initial: Any,
    ys: Any,
    body: Callable[[Any, Any], tuple[Any, Any]],
    max_seq_len: int | Tensor | None,
    return_tensor_arrays: bool,
) -> tuple[Any, Any, Dim]:
    """``scan`` without ``spatial_dim``: RETURNN's loop over ``(i, seq_len,
    prev_cond, state, ys)``, eagerly."""
    max_seq_len = read_max_seq_len("rf.scan", max_seq_len)
    first = cond(None, initial)
    running = first if cond_before_body else _compare(_cast(first, "int32") * 0, "==", 0)
    seq_len = _cast(running, "int32") * 0
    state = initial
    arrays = _new_arrays(ys)
    step = 0
    while bool(running.numpy().any()) and (max_seq_len is None or step < max_seq_len):
        seq_len = seq_len + _cast(running, "int32")
        y, new_state = body(None, state)
        _assert_same_structure("rf.scan: body's state", state, new_state)
        _follow_dims(arrays, state, new_state)
        arrays = _push_back(arrays, ys, y)
        running = _logical_and(cond(None, new_state), running)
        state = _mask_state(new_state, state, running)
        step += 1
    spatial_dim = Dim(seq_len, name="scan_dim")
    return _results(ys, arrays, spatial_dim, return_tensor_arrays), state, spatial_dim
