"""verjus's values against RETURNN's: RETURNN's rf tests run on both, compared value by value.

``tests/test_returnn_rf_suite.py`` runs RETURNN's rf tests on verjus, which
shows that they run and pass their own checks. This test also requires the
same numbers as RETURNN where RETURNN with its torch backend is installed:

1. RETURNN's ``test_rf_*.py`` run on verjus (as in the suite test) with
   ``VERJUS_RETURNN_COMPARE`` set, so that every ``run_model`` /
   ``run_model_torch_train`` call records its extern data, the model's
   parameters and the outputs (``returnn_suite/value_record.py``).
2. The tests that made records run again, one subprocess per test file, under
   RETURNN itself (its own ``returnn.frontend`` on the torch backend) with
   ``returnn_suite/replay/rf_utils.py`` as their ``rf_utils``: each call gets the
   recorded extern data and parameter values, and its outputs are compared
   with verjus's (``numpy.isclose``, atol and rtol 1e-4).

It prints a table of every call that did not agree (mismatching, with the
largest difference, or not comparable, with the reason) and the counts, and
fails on a mismatch that ``KNOWN_MISMATCHES`` does not list with its reason.
It skips without torch. Run it with an environment that has both::

    python -m pytest tests/test_returnn_rf_values.py -s -q
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from returnn_suite import value_record
from returnn_suite.sources import RETURNN_HELPERS, returnn_tests, returnn_version, rf_test_files

SUITE = Path(__file__).resolve().parent / "returnn_suite"
# verjus's stand-ins for the recording run (phase 1).
RECORD_FILES = ("rf_utils.py", "_setup_test_env.py", "conftest.py", "value_record.py")
# RETURNN's own test setup, used as it is for the replay (phase 2).
RETURNN_SETUP = ("_setup_test_env.py", "_setup_returnn_env.py")
# Tests whose values differ from RETURNN's for a known reason (node id -> reason).
_PADDING_IN_POOL = (
    "RETURNN's torch pool1d lets the padding frames of the shorter sequences into the"
    " windows at their ends; verjus pools each sequence over its own frames"
)
KNOWN_MISMATCHES: dict[str, str] = {
    "test_rf_array.py::test_copy_masked": _PADDING_IN_POOL,
    "test_rf_conv.py::test_avgpool1d_stride_padding_same": _PADDING_IN_POOL,
    "test_rf_array.py::test_masked_select": "RETURNN's masked_select also takes the padding"
    " frames where the (random) mask is True; verjus's only frames within the sequences",
}


def _pytest(args: list[str], cwd: Path, env: dict[str, str], timeout: int) -> str:
    """Runs pytest in ``cwd`` in a subprocess; its output."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "-rfE"]
    run = subprocess.run(
        cmd + args, cwd=cwd, env=os.environ | env, capture_output=True, text=True, timeout=timeout
    )
    return run.stdout + run.stderr


def _record(tests: Path, files: list[Path], folder: Path, records: Path) -> None:
    """Phase 1: RETURNN's tests on verjus, recording every call into ``records``."""
    folder.mkdir()
    for f in [*files, *(tests / name for name in RETURNN_HELPERS)]:
        shutil.copy(f, folder / f.name)
    for name in RECORD_FILES:
        shutil.copy(SUITE / name, folder / name)
    args = ["--continue-on-collection-errors", *[f.name for f in files]]
    _pytest(args, folder, {"VERJUS_RETURNN_COMPARE": str(records)}, timeout=1200)


def _replay(tests: Path, files: list[Path], folder: Path, records: Path) -> dict[str, str]:
    """Phase 2: the recorded tests under RETURNN, one subprocess per test file;
    pytest's summary (the error) of each test that failed there."""
    folder.mkdir()
    for f in [*files, *(tests / name for name in (*RETURNN_HELPERS, *RETURNN_SETUP))]:
        shutil.copy(f, folder / f.name)
    shutil.copy(SUITE / "replay" / "rf_utils.py", folder / "rf_utils.py")
    shutil.copy(SUITE / "value_record.py", folder / "value_record.py")
    by_file = defaultdict(set)
    for path in records.glob("*.npz"):
        nodeid = value_record.load_meta(path)["nodeid"]
        by_file[nodeid.split("::")[0]].add(nodeid)
    outcomes = {}
    env = {"VERJUS_RETURNN_REPLAY": str(records), "OMP_NUM_THREADS": "1"}
    for nodeids in by_file.values():
        output = _pytest(sorted(nodeids), folder, env, timeout=600)
        for line in output.splitlines():
            found = re.match(r"(FAILED|ERROR) (\S+) - (.*)", line)
            if found:
                outcomes[found[2]] = f"{found[1]}: {found[3]}"[:200]
    return outcomes


def _verdicts(records: Path, outcomes: dict[str, str]) -> list[dict]:
    """Each recorded call's verdict; a call the replay did not reach is not comparable."""
    verdicts = []
    for path in sorted(records.glob("*.npz")):
        result = path.with_suffix(".json")
        if result.exists():
            verdicts.append(json.loads(result.read_text()))
            continue
        meta = value_record.load_meta(path)
        why = outcomes.get(meta["nodeid"], "the test ended before it (skipped or failed)")
        verdicts.append(meta | {"status": "not comparable", "reason": f"not reached: {why}"})
    return verdicts


def _summary(verdicts: list[dict]) -> str:
    """The table of the calls that did not agree, and the counts."""
    rows = [v for v in verdicts if v["status"] != "agree"]
    lines = [f"{'status':<15} {'max diff':>9}  call and reason"]
    for v in sorted(rows, key=lambda v: (v["status"], v["nodeid"], v["index"])):
        diff = f"{v['max_diff']:.2e}" if v.get("max_diff") is not None else "-"
        lines.append(f"{v['status']:<15} {diff:>9}  {v['nodeid']} #{v['index']}: {v['reason']}")
    counts = Counter(v["status"] for v in verdicts)
    lines.append(
        f"{len(verdicts)} run_model calls recorded: {counts['agree']} agree within 1e-4,"
        f" {counts['mismatch']} mismatch, {counts['not comparable']} not comparable"
    )
    return "\n".join(lines)


def test_returnn_rf_values(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the comparison runs RETURNN on its torch backend")
    pytest.importorskip("returnn", reason="the comparison runs RETURNN (pip install returnn)")
    tests = returnn_tests(returnn_version())
    files = rf_test_files(tests)
    records = tmp_path / "records"
    _record(tests, files, tmp_path / "verjus", records)
    assert list(records.glob("*.npz")), "verjus's run of RETURNN's rf tests recorded no calls"
    outcomes = _replay(tests, files, tmp_path / "returnn", records)
    verdicts = _verdicts(records, outcomes)
    print(_summary(verdicts))
    for nodeid, reason in KNOWN_MISMATCHES.items():
        print(f"known mismatch {nodeid}: {reason}")
    unexplained = [
        f"{v['nodeid']} #{v['index']}: {v['reason']}"
        for v in verdicts
        if v["status"] == "mismatch" and v["nodeid"] not in KNOWN_MISMATCHES
    ]
    assert not unexplained, "verjus's values differ from RETURNN's:\n" + "\n".join(unexplained)
