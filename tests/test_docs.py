"""Every public function and class of ``verjus``, ``verjus.rf`` and its
sub-modules named in ``MODULES`` (the names in their ``__all__``), and every
public method of those classes, has a docstring; the native RF ops show their
arguments and RETURNN's documentation in ``help()``."""

import inspect
import pydoc

import pytest

import verjus
import verjus.rf
import verjus.rf.decoder.transformer
import verjus.rf.search
from verjus import _verjus

MODULES = (verjus, verjus.rf, verjus.rf.decoder.transformer, verjus.rf.search)
PUBLIC = [(module, name) for module in MODULES for name in module.__all__]


def documented(obj: object) -> bool:
    return bool(inspect.cleandoc(getattr(obj, "__doc__", None) or ""))


def callables(module: object, name: str) -> list[tuple[str, object]]:
    """The object and, for a class of verjus, its own public methods and properties."""
    obj = getattr(module, name)
    found = [(name, obj)]
    if inspect.isclass(obj) and obj.__module__.startswith("verjus"):
        for key, member in vars(obj).items():
            if key.startswith("_") and key != "__call__":
                continue
            if isinstance(member, staticmethod | classmethod):
                member = member.__func__
            if isinstance(member, property) or callable(member) or inspect.isdatadescriptor(member):
                found.append((f"{name}.{key}", member))
    return found


@pytest.mark.parametrize(("module", "name"), PUBLIC, ids=[f"{m.__name__}.{n}" for m, n in PUBLIC])
def test_public_names_have_docstrings(module, name):
    obj = getattr(module, name)
    if not (inspect.isclass(obj) or inspect.ismodule(obj) or callable(obj)):
        return  # a value, such as __version__ or rf.batch_dim
    missing = [where for where, member in callables(module, name) if not documented(member)]
    assert not missing, f"no docstring: {missing}"


def test_rf_all_has_each_name_once_and_every_name_resolves():
    assert len(verjus.rf.__all__) == len(set(verjus.rf.__all__))
    for name in verjus.rf.__all__:
        assert hasattr(verjus.rf, name), name


def test_native_ops_are_reexported_as_they_are():
    for name, op in _verjus.rf_exports.items():
        ours = getattr(verjus.rf, name)
        # The op in the wrapper that names ``rf.<name>`` in its errors
        # (verjus.rf._public_ops), a Dim as it is, or a Python wrapper with RETURNN's
        # fuller signature, naming the op it extends.
        wrapped = getattr(ours, "__wrapped__", None)
        assert ours is op or wrapped is op or getattr(ours, "extends_native", None) is op, name
    assert verjus.rf.matmul.__wrapped__ is _verjus.rf_matmul
    assert verjus.rf.batch_dim is _verjus.rf_batch_dim
    assert verjus.rf.single_step_dim is _verjus.rf_single_step_dim


@pytest.mark.parametrize(
    "name", sorted(n for n, op in _verjus.rf_exports.items() if not isinstance(op, _verjus.Dim))
)
def test_native_ops_show_their_arguments(name):
    op = _verjus.rf_exports[name]
    assert op.__text_signature__ is not None, name
    for parameter in inspect.signature(op).parameters:
        assert f" {parameter}:" in op.__doc__, f"{name}: {parameter} is not documented"


def test_help_of_matmul_says_what_returnn_says():
    text = pydoc.render_doc(verjus.rf.matmul, renderer=pydoc.plaintext)
    assert "(a, b, *, reduce, use_mask=True)" in text
    assert "batched matrix multiplication" in text.lower()
    assert "common dims in ``a``'s order, then" in text
    assert ":param bool use_mask:" in text
