"""Sums up the skipped tests of a pytest run in a few lines: how many, grouped by reason
(most first), and the command that installs what they need.

    python scripts/skip_summary.py REPORT.xml    # pytest's --junitxml=REPORT.xml

scripts/test.sh prints this last. Without it a skip is one ``s`` among the dots, and
``pytest -rs`` lists every skip (a wall of lines, e.g. each comparison with PyTorch or
with RETURNN on its torch backend where torch is not installed). A skip whose reason
names a Python package that this interpreter lacks is counted under that package, with
the command that installs it; other reasons are shown as they are.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter

# Packages the skipped tests may need: module, its pattern in a skip reason, what to install
# (torch from PyTorch's CPU index: the comparisons need no GPU, and it is a tenth the size).
PACKAGES = [
    ("torch", r"\btorch\b|PyTorch", "torch --index-url https://download.pytorch.org/whl/cpu"),
    ("returnn", r"RETURNN", "returnn dm-tree h5py"),
]
SHOWN = 8  # reasons listed; the others are counted in one line


def skip_reasons(report: str) -> list[str]:
    """One reason per skipped test of a pytest JUnit XML ``report`` (xfails are not skips)."""
    reasons = []
    for skipped in ET.parse(report).iter("skipped"):
        kind = skipped.get("type")
        if kind == "pytest.skip":
            reasons.append(skipped.get("message", ""))
        elif kind is None:  # a module skipped while collected: (path, line, "Skipped: why")
            try:
                why = ast.literal_eval(skipped.text or "")[2]
            except (ValueError, SyntaxError, TypeError, IndexError):
                why = skipped.text or skipped.get("message", "")
            reasons.append(str(why).removeprefix("Skipped: "))
    return reasons


def summary(reasons: list[str], python: str = sys.executable) -> list[str]:
    """The lines that say how many tests were skipped, why, and what to install."""
    if not reasons:
        return ["no test was skipped"]
    missing = [p for p in PACKAGES if importlib.util.find_spec(p[0]) is None]
    groups: Counter[str] = Counter()
    installs = []
    for reason in reasons:
        package = next((p for p in missing if re.search(p[1], reason)), None)
        if package is None:
            groups[reason] += 1
            continue
        groups[f"{package[0]} is not installed (pytest -rs gives each reason)"] += 1
        if package[2] not in installs:
            installs.append(package[2])
    lines = [f"{len(reasons)} tests skipped (a skip is not a pass), by reason:"]
    ranked = groups.most_common()
    lines += [f"  {n:5d}  {reason}" for reason, n in ranked[:SHOWN]]
    if len(ranked) > SHOWN:
        rest = sum(n for _, n in ranked[SHOWN:])
        lines.append(f"  {rest:5d}  for {len(ranked) - SHOWN} other reasons (pytest -rs)")
    lines += [f"to run them: {python} -m pip install {packages}" for packages in installs]
    return lines


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print("\n".join(summary(skip_reasons(sys.argv[1]))))
