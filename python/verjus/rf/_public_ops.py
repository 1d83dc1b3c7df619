"""The native ops of ``verjus._verjus.rf_exports`` under their public names: each
builtin (``rf_softmax``) is wrapped once in a thin Python function (``rf.softmax``)
whose TypeError names ``rf.<name>`` and its signature, e.g.

    rf.softmax(x: Tensor, *, axis: Dim, use_mask: bool = True): got an unexpected
    keyword argument 'dim'. An axis is a Dim, not an int index or a name (RETURNN
    addresses axes by Dim): give axis=x.dims[-1] (x's dims: [b, f]), not dim=-1

instead of the builtin's ``rf_softmax() got an unexpected keyword argument 'dim'``
or ``'int' object is not an instance of 'Dim'`` (which names neither the function
nor the argument). The signature's types are those of the docstring's ``:param
TYPE name:`` lines; a number or a string given for a Dim argument, or ``dim=``
given to an op taking ``axis=``, adds the hint. Other exceptions pass unchanged.

The wrapper keeps the builtin's docstring and signature (``help``,
``inspect.signature``, via ``__wrapped__``), is named ``<name>`` in ``verjus.rf``
(so ``build_dict`` and pickle find it there), and costs a successful call one Python
frame: the signature text is worked out here, once; the arguments are looked at only
when the call has failed. Modules that bind a native op as a public default or alias
(``rf.swish``, ``FeedForward``'s ``activation``) take it from ``public_op`` so that it
is the same object as ``rf.<name>``.

Where RETURNN keeps the source's ``sparse_dim`` on an op's integer result (its backends
copy the source's template: ``cast`` between integer dtypes, ``expand_dim``,
``split_dims``, ``abs``, ``reduce_max`` / ``reduce_min`` / ``reduce_sum``) and the native
op drops it, the wrapper sets it again (``KEEPS_SPARSE_DIM``). A Python function that
stands for a native op with RETURNN's fuller rules (``rf.where``'s numbers, ``rf.full``'s
dtype) is decorated with ``replaces_native``, which explains its TypeErrors alike.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from types import BuiltinFunctionType
from typing import Any, TypeVar

from verjus import _verjus
from verjus._verjus import Dim, Tensor
from verjus.rf._dim_args import _slip

__all__ = ["KEEPS_SPARSE_DIM", "PUBLIC_OPS", "public_op", "replaces_native"]

F = TypeVar("F", bound=Callable[..., Any])

_PARAM_TYPE = re.compile(r":param ([^:\n]+?) (\w+):")
# A parameter taking Dims only (``Dim``, ``Dim | None``, ``Sequence[Dim]``, ``tuple[Tensor,
# Dim]``), not also sizes (``int | Dim``, ``slice``'s ``size``).
_TAKES_DIM = re.compile(r"\bDim\b")
_TAKES_SIZE = re.compile(r"\b(int|float|str|Any|object)\b")
# PyTorch's and numpy's names for an axis argument.
_AXIS_KEYWORDS = ("dim", "dims", "axis", "axes")
# Arguments that name a new dim (a size given there is one).
_NEW_DIMS = {"expand_dim": ("dim",), "split_dims": ("dims",)}
_AXES = "An axis is a Dim, not an int index or a name (RETURNN addresses axes by Dim)"


class _Annotation:
    """A type as the docstring writes it, shown as it is (not quoted) in a signature."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class _Op:
    """What an error of one native op is explained with, worked out once."""

    def __init__(
        self, name: str, op: Callable[..., Any], native: BuiltinFunctionType | None = None
    ) -> None:
        self.name = name
        # ``rf_softmax() got ...``; ``verjus._verjus.rf_get_default_device() takes no ...``;
        # for a Python function, also those of the native op it calls.
        self.native_prefixes = tuple(
            prefix
            for f in (op, native)
            if f is not None
            for prefix in (f"{f.__name__}() ", f"{f.__module__}.{f.__name__}() ")
        )
        types = {m.group(2): m.group(1).strip() for m in _PARAM_TYPE.finditer(op.__doc__ or "")}
        self.signature = inspect.signature(op)
        shown = [
            p.replace(annotation=_Annotation(types[p.name])) if p.name in types else p
            for p in self.signature.parameters.values()
        ]
        shown_signature = self.signature.replace(
            parameters=shown, return_annotation=inspect.Signature.empty
        )
        self.text = f"rf.{name}{shown_signature}"
        self.dim_params = [
            p
            for p, t in types.items()
            if p in self.signature.parameters and _TAKES_DIM.search(t) and not _TAKES_SIZE.search(t)
        ]
        self.tensor_params = [p for p, t in types.items() if t.startswith("Tensor")]

    def message(self, error: TypeError, args: tuple, kwargs: dict) -> str:
        """``error``'s message, prefixed with ``rf.<name>(signature)`` and the hint."""
        text = str(error)
        for prefix in self.native_prefixes:  # the call's own complaint names the builtin
            if text.startswith(prefix):
                text = text[len(prefix) :]
                break
        try:
            hint = self._hint(args, kwargs)
        except Exception:  # the hint is an extra; the error itself stands
            hint = ""
        return f"{self.text}: {text}{hint}"

    def _hint(self, args: tuple, kwargs: dict) -> str:
        """Where a number or string was given for a Dim (or ``dim=`` for ``axis=``):
        that axes are Dims, and which to give."""
        if not self.dim_params:
            return ""
        params = self.signature.parameters
        try:
            given = self.signature.bind_partial(*args, **kwargs).arguments
        except TypeError:  # e.g. PyTorch's dim=-1 for axis=
            wrong = next((k for k in kwargs if k in _AXIS_KEYWORDS and k not in params), None)
            if wrong is None:
                return ""
            name, value = self.dim_params[0], kwargs[wrong]
            known = {k: v for k, v in kwargs.items() if k in params}
            known.update(zip(params, args, strict=False))  # the positional ones come first
            example = self._example(name, value, known)
            give = f": give {name}={example}" if example else f": give {name}="
            return f". {_AXES}{give}, not {wrong}={value!r}"
        for name in self.dim_params:
            value = given.get(name)
            if _slip(value):
                example = self._example(name, value, given)
                give = f": give {name}={example}" if example else ""
                return f" ({name}={value!r}). {_AXES}{give}"
        return ""

    def _example(self, name: str, value: Any, given: dict[str, Any]) -> str | None:
        """The Dim(s) to give for ``value`` (positions or names in the dims of the
        tensor argument, which are shown, or new Dims of sizes); None where
        ``value`` is not a number, a string or a list of them."""
        several = isinstance(value, (list, tuple))
        values = list(value) if several else [value]
        if not all(isinstance(v, (int, str, Dim)) for v in values):
            return None
        tensor_name = next(
            (p for p in self.tensor_params if isinstance(given.get(p), Tensor)), None
        )
        names = [d.name for d in given[tensor_name].dims] if tensor_name else []
        new = name.startswith("out_") or name in _NEW_DIMS.get(self.name, ())

        def one(v: Any) -> str:
            if isinstance(v, Dim):
                return repr(v)
            if isinstance(v, str) and v in names and not new:
                v = names.index(v)
            if isinstance(v, int) and not isinstance(v, bool):
                if tensor_name and not new and -len(names) <= v < len(names):
                    return f"{tensor_name}.dims[{v}]"
                if v > 0 and (new or not tensor_name):  # a size
                    return f"rf.Dim({v}, name=...)" if several else f"rf.Dim({v}, name={name!r})"
            return "a Dim"

        shown = ", ".join(one(v) for v in values)
        shown = f"[{shown}]" if several else shown
        if tensor_name:
            shown += f" ({tensor_name}'s dims: [{', '.join(str(n) for n in names)}])"
        return shown


def _wrap(name: str, op: BuiltinFunctionType) -> Callable[..., Any]:
    explain = _Op(name, op)
    if name in KEEPS_SPARSE_DIM:
        return _wrap_keeping_sparse_dim(name, op, explain)

    @functools.wraps(op)
    def public(*args: Any, **kwargs: Any) -> Any:
        try:
            return op(*args, **kwargs)
        except TypeError as error:
            raise TypeError(explain.message(error, args, kwargs)) from error

    return _publish(public, name)


def _publish(public: Callable[..., Any], name: str) -> Callable[..., Any]:
    public.__name__ = public.__qualname__ = name
    public.__module__ = "verjus.rf"
    return public


# Native ops whose integer result RETURNN gives the source's ``sparse_dim`` (its
# backends copy the source's template; ``cast`` to another integer dtype keeps it, to
# float or bool drops it), and the native ops do not.
KEEPS_SPARSE_DIM = frozenset(
    {"abs", "cast", "expand_dim", "reduce_max", "reduce_min", "reduce_sum", "split_dims"}
)
_INT_DTYPES = ("int32", "int64")


def _wrap_keeping_sparse_dim(
    name: str, op: BuiltinFunctionType, explain: _Op
) -> Callable[..., Any]:
    """``_wrap``'s wrapper, which also gives an integer result the source's (the first
    argument's) ``sparse_dim`` where the native op dropped it."""
    source_name = next(iter(explain.signature.parameters))

    @functools.wraps(op)
    def public(*args: Any, **kwargs: Any) -> Any:
        try:
            out = op(*args, **kwargs)
        except TypeError as error:
            raise TypeError(explain.message(error, args, kwargs)) from error
        sparse_dim = (args[0] if args else kwargs[source_name]).sparse_dim
        if sparse_dim is not None and out.sparse_dim is None and out.dtype in _INT_DTYPES:
            out.sparse_dim = sparse_dim  # the result is a new handle: set in place
        return out

    return _publish(public, name)


def replaces_native(name: str, native: BuiltinFunctionType) -> Callable[[F], F]:
    """Decorates the Python function that is ``rf.<name>`` in place of the native op
    ``native`` (which it calls, unwrapped), with RETURNN's fuller rules: its TypeErrors
    (a call that does not fit its signature, or the native op's own) name ``rf.<name>``
    and its signature (the types from its docstring's ``:param TYPE name:`` lines) with
    the hint for a Dim, as the wrappers of the native ops do. It is named ``<name>`` in
    ``verjus.rf`` and ``extends_native`` is ``native`` (see tests/test_docs.py)."""

    def decorate(func: F) -> F:
        explain = _Op(name, func, native)

        @functools.wraps(func)
        def public(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except TypeError as error:
                raise TypeError(explain.message(error, args, kwargs)) from error

        public.extends_native = native  # type: ignore[attr-defined]
        return _publish(public, name)  # type: ignore[return-value]

    return decorate


# Native ops RETURNN's own code requires to be builtins (its test_rf_base asserts
# ``isinstance(rf.combine, BuiltinFunctionType)``, as its torch backend makes them):
# kept as they are, named ``combine`` and ``compare`` natively.
_KEPT_BUILTIN = frozenset({"combine", "compare"})

# Each native op once, by its public name (``batch_dim`` and the other Dims as they are).
PUBLIC_OPS: dict[str, Any] = {
    name: _wrap(name, op)
    if isinstance(op, BuiltinFunctionType) and name not in _KEPT_BUILTIN
    else op
    for name, op in _verjus.rf_exports.items()
}


def public_op(name: str) -> Callable[..., Any]:
    """``rf.<name>``, the wrapped native op (the same object each time)."""
    return PUBLIC_OPS[name]
