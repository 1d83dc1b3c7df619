"""scripts/test.sh ends with the skipped tests summed up (scripts/skip_summary.py): how
many, grouped by reason, and the command that installs what they need (issue 39)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SKIPPING_TESTS = {
    "test_module.py": """
import pytest
pytest.importorskip("verjus_missing_a", reason="the reference needs verjus_missing_a")
def test_never(): pass
""",
    "test_some.py": """
import pytest
@pytest.mark.parametrize("i", [1, 2, 3])
def test_compared(i): pytest.importorskip("verjus_missing_a", reason=f"compare {i} with it")
def test_gpu(): pytest.skip("needs a CUDA GPU")
@pytest.mark.xfail(reason="an xfail is no skip")
def test_known(): assert False
def test_passes(): pass
""",
}


@pytest.fixture
def summary_module(monkeypatch):
    spec = importlib.util.spec_from_file_location("skip_summary", ROOT / "scripts/skip_summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    package = ("verjus_missing_a", r"verjus_missing_a|compare \d", "verjus-missing-a")
    monkeypatch.setattr(module, "PACKAGES", [package])
    return module


def test_the_skips_of_a_run_are_summed_up_by_reason(tmp_path, summary_module) -> None:
    for name, text in SKIPPING_TESTS.items():
        (tmp_path / name).write_text(text)
    report = tmp_path / "report.xml"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 5 skipped, 1 xfailed" in run.stdout

    reasons = summary_module.skip_reasons(str(report))
    assert sorted(reasons) == sorted(
        ["the reference needs verjus_missing_a", "needs a CUDA GPU"]
        + [f"compare {i} with it" for i in (1, 2, 3)]
    )
    assert summary_module.summary(reasons, python="py") == [
        "5 tests skipped (a skip is not a pass), by reason:",
        "      4  verjus_missing_a is not installed (pytest -rs gives each reason)",
        "      1  needs a CUDA GPU",
        "to run them: py -m pip install verjus-missing-a",
    ]


def test_many_reasons_are_cut_short(summary_module) -> None:
    reasons = [f"reason {i}" for i in range(12)] + ["reason 0"]
    lines = summary_module.summary(reasons, python="py")
    assert len(lines) == 1 + summary_module.SHOWN + 1
    assert lines[1] == "      2  reason 0"
    assert lines[-1] == "      4  for 4 other reasons (pytest -rs)"
    assert summary_module.summary([]) == ["no test was skipped"]


def test_the_test_script_ends_with_the_summary() -> None:
    script = (ROOT / "scripts/test.sh").read_text()
    assert 'pytest tests -q --junitxml="$report_dir/pytest.xml"' in script
    assert script.rstrip().endswith('python scripts/skip_summary.py "$report_dir/pytest.xml"')
