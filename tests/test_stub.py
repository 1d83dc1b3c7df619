"""The type stub ``python/verjus/_verjus.pyi`` is what ``scripts/gen_stub.py`` makes
from the built module's docstrings (crates/verjus-py), so it cannot drift from the
bindings: a binding changed without rerunning the script fails here, naming the
difference. A docstring that does not type every parameter stops the script."""

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gen_stub.py"


def gen_stub():
    spec = importlib.util.spec_from_file_location("gen_stub", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stub_is_generated_from_the_built_module():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_a_function_is_typed_from_its_docstring():
    g = gen_stub()
    op = SimpleNamespace(
        __text_signature__="(x, *, axis, eps=1e-7)",
        __doc__="Op.\n\n:param Tensor x: in\n:param Dim | Sequence[Dim] axis: dims\n"
        ":param float eps: tiny\n:return: out\n:rtype: Tensor",
    )
    stub = g.Stub()
    g.write_function(stub, "rf_op", "rf_op", op)
    assert stub.lines[0] == (
        "def rf_op(x: Tensor, *, axis: Dim | Sequence[Dim], eps: float = 1e-7) -> Tensor:"
    )
    assert stub.imports() == ["from collections.abc import Sequence"]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("", "has no docstring"),
        ("Op.\n\n:param Tensor x: in", "lacks a `:param TYPE axis:` line"),
        ("Op.\n\n:param Tensor x: in\n:param Dim axis: d\n:param int k: k", r"\['k'\]"),
    ],
)
def test_a_docstring_that_does_not_type_every_parameter_is_an_error(doc, message):
    g = gen_stub()
    op = SimpleNamespace(__text_signature__="(x, *, axis)", __doc__=doc)
    with pytest.raises(g.StubError, match=message):
        g.write_function(g.Stub(), "rf_op", "rf_op", op)
