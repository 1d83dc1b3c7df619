"""The Python side of the benchmark drivers runs to the end.

``benches/run.py`` shares helpers with ``benches/rf_overhead.py``; a helper
removed from one broke the other unnoticed once. This runs the RF overhead
table in its quick form (with whichever of torch and RETURNN are installed;
the rest show as skipped) and checks that every op made it into the table.
The timings themselves are not checked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_rf_overhead_quick_writes_the_whole_table(tmp_path: Path) -> None:
    md = tmp_path / "rf.md"
    script = ROOT / "benches" / "rf_overhead.py"
    run = subprocess.run(
        [sys.executable, str(script), "--quick", "--markdown", str(md)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    table = md.read_text()
    for op in ["add", "add_permuted", "matmul", "reduce_sum", "softmax", "masked_mean"]:
        assert f"| {op} |" in table, table
