"""RETURNN's own frontend tests, run on verjus as RETURNN wrote them.

RETURNN's ``tests/test_rf_*.py`` are the best definition of what
"RETURNN-compatible" means. Its license restricts redistribution, so they are
not in this repository: this test fetches RETURNN's source distribution of
the installed ``returnn`` package's version from the package index (as CI
fetches any package; ``VERJUS_RETURNN_SDIST`` may name an unpacked copy
instead), copies the applicable test files next to verjus's
stand-ins for RETURNN's test helpers (``tests/returnn_suite``: they redirect
``returnn.frontend`` and ``returnn.tensor`` to verjus), runs them with pytest in
a subprocess and prints the counts and every failing test.

Applicable are the files not tied to RETURNN's TensorFlow, JAX or private
packed backends. Tests that need TensorFlow skip (a skip is never a pass).
The test fails when fewer pass than ``MIN_PASSED``, the count this
repository has reached, so a change that breaks compatibility shows here;
raise the number as more pass. docs/returnn.md lists what still fails and why.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from returnn_suite.sources import RETURNN_HELPERS, returnn_tests, returnn_version, rf_test_files

# Passing tests reached on this repository's CI environment (no torch): a floor.
MIN_PASSED = 160
STAND_INS = Path(__file__).resolve().parent / "returnn_suite"


def test_returnn_rf_suite(tmp_path: Path) -> None:
    pytest.importorskip(
        "returnn", reason="RETURNN's test files import returnn.util (pip install returnn)"
    )
    version = returnn_version()
    tests = returnn_tests(version)
    files = rf_test_files(tests)
    for f in [*files, *(tests / name for name in RETURNN_HELPERS)]:
        shutil.copy(f, tmp_path / f.name)
    for helper in STAND_INS.glob("*.py"):
        shutil.copy(helper, tmp_path / helper.name)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "-rfEs"]
    cmd += ["--continue-on-collection-errors", *[f.name for f in files]]
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    lines = run.stdout.splitlines()
    print("\n".join(line for line in lines if line.startswith(("FAILED", "ERROR", "SKIPPED"))))
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", lines[-1])}
    passed = counts.get("passed", 0)
    total = sum(counts.values())
    print(f"RETURNN {version} rf tests on verjus: {passed} of {total} passed ({lines[-1]})")
    assert passed >= MIN_PASSED, f"{passed} of RETURNN's rf tests passed, fewer than {MIN_PASSED}"
