"""Where RETURNN's own rf test files come from, for the tests that run them.

RETURNN's license restricts redistribution, so its test files are not in this
repository: they are taken from RETURNN's source distribution of the installed
``returnn`` package's version, fetched from the package index once and cached
(``VERJUS_RETURNN_SDIST`` may name an unpacked copy instead). Both
``tests/test_returnn_rf_suite.py`` (RETURNN's tests on verjus) and
``tests/test_returnn_rf_values.py`` (verjus's values against RETURNN's) use it.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

# RETURNN's rf test files for its TF, JAX and private packed backends.
NOT_APPLICABLE = {"test_rf_jax.py", "test_rf_tf_backend.py", "test_rf_packed.py"}
# RETURNN's own numpy references that its rf tests import (used as they are).
RETURNN_HELPERS = ("fsa_utils.py", "numpy_ref_edit_distance.py")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "verjus"


def returnn_version() -> str:
    """The installed ``returnn`` package's version (``scripts/common.sh`` pins it)."""
    return importlib.metadata.version("returnn")


def returnn_tests(version: str) -> Path:
    """The ``tests`` folder of RETURNN's source distribution of ``version`` (fetched
    once, then cached); skips the calling test when it cannot be fetched."""
    given = os.environ.get("VERJUS_RETURNN_SDIST")
    if given:
        tests = Path(given) / "tests"
        if not tests.is_dir():
            pytest.fail(f"VERJUS_RETURNN_SDIST={given} has no tests/ folder")
        return tests
    unpacked = CACHE / f"returnn-{version}"
    if not (unpacked / "tests").is_dir():
        download = CACHE / "download"
        download.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        cmd += ["--no-binary", "returnn", f"returnn=={version}", "-d", str(download)]
        try:
            subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
            output = getattr(err, "stderr", "") or ""
            pytest.skip(
                f"RETURNN's source distribution could not be fetched: {err} {output[-300:]}"
            )
        archive = download / f"returnn-{version}.tar.gz"
        with tarfile.open(archive) as tar:
            tar.extractall(CACHE, filter="data")
    return unpacked / "tests"


def rf_test_files(tests: Path) -> list[Path]:
    """RETURNN's applicable ``test_rf_*.py`` files in ``tests``, sorted."""
    files = sorted(p for p in tests.glob("test_rf_*.py") if p.name not in NOT_APPLICABLE)
    assert files, f"no test_rf_*.py in {tests}"
    return files
