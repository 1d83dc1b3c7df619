"""docs/architecture.md is the newcomer's map: every repository path it names exists.

A path counts where the page writes it in backticks, in a code block or as a
Markdown link, or bare in the prose when it starts with a top-level folder of
the repository. Paths from the root (`crates/verjus-core/src/ops/gemm.rs`) must
exist there; shorter ones (`autograd/checkpoint.rs`, `raw.rs`) must end some
path of the tree. Placeholders stand for any name (`G` in `ops/G.rs`, `TOPIC`,
`NAME`, `MODULE`, `*`, `{a,b}`): such a template must match at least one path.
"""

import fnmatch
import itertools
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"

# How a path may end when it has no slash (`raw.rs`, `__init__.py`).
EXTENSIONS = ("rs", "py", "pyi", "cu", "cuh", "md", "toml", "json", "sh", "yml", "yaml", "txt")
# Not the repository's source: build outputs and downloaded data at the root, caches.
SKIPPED_AT_ROOT = {"target", "data"}
TOKEN = re.compile(r"[\w./{},*+-]+")
PLACEHOLDER_WORD = re.compile(r"TOPIC|NAME|MODULE")
PLACEHOLDER_G = re.compile(r"(?:(?<=/)|^)G(?=[./]|$)")


def tree() -> tuple[set[str], set[str]]:
    """The repository's files and folders, as paths relative to its root."""
    files: set[str] = set()
    dirs: set[str] = set()
    for here, subdirs, names in os.walk(ROOT):
        base = Path(here).relative_to(ROOT).as_posix()
        subdirs[:] = [
            d
            for d in subdirs
            if not d.startswith(".")
            and d != "__pycache__"
            and not (base == "." and d in SKIPPED_AT_ROOT)
        ]
        prefix = "" if base == "." else f"{base}/"
        dirs.update(prefix + d for d in subdirs)
        files.update(prefix + n for n in names)
    return files, dirs


def expand_braces(path: str) -> list[str]:
    """`a/{b,c}/d` -> [`a/b/d`, `a/c/d`]."""
    parts = re.split(r"\{([^{}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(combo) for combo in itertools.product(*choices)]


def looks_like_path(token: str) -> bool:
    if "/" in token:
        return not token.startswith(("http", "//")) and "::" not in token
    return token.rsplit(".", 1)[-1] in EXTENSIONS and token.count(".") >= 1


def named_paths(text: str, top: set[str]) -> set[str]:
    """The paths `text` (Markdown) names; `top` holds the root's entries."""
    found: set[str] = set()
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    spans = re.findall(r"`([^`\n]+)`", prose)
    for chunk in [*fenced, *spans]:
        found.update(t for t in TOKEN.findall(chunk) if looks_like_path(t.rstrip(".,")))
    for link in re.findall(r"\]\(([^)\s]+)\)", prose):
        target = link.split("#", 1)[0]
        if target and "://" not in target:
            found.add(os.path.normpath(PAGE.parent.relative_to(ROOT) / target))
    bare = re.sub(r"`[^`\n]+`", "", prose)
    found.update(t for t in TOKEN.findall(bare) if "/" in t and t.split("/", 1)[0] in top)
    return {p.rstrip(".,") for p in found if p.rstrip(".,/")}


def exists(path: str, files: set[str], dirs: set[str], top: set[str]) -> bool:
    """Whether `path` (placeholders and braces resolved first) names something in the tree."""
    pattern = PLACEHOLDER_G.sub("*", PLACEHOLDER_WORD.sub("*", path.rstrip("/")))
    candidates = dirs if path.endswith("/") else files | dirs
    for alternative in expand_braces(pattern):
        if alternative.split("/", 1)[0] in top:
            accepted = [alternative]
        else:  # relative to some folder: `autograd/checkpoint.rs`, `raw.rs`
            accepted = [alternative, f"*/{alternative}"]
        if not any(fnmatch.fnmatchcase(c, a) for a in accepted for c in candidates):
            return False
    return True


def missing_paths(text: str) -> list[str]:
    """The paths `text` names that the repository lacks, sorted."""
    files, dirs = tree()
    top = {p for p in files | dirs if "/" not in p}
    return sorted(p for p in named_paths(text, top) if not exists(p, files, dirs, top))


def test_every_path_the_page_names_exists():
    text = PAGE.read_text()
    files, dirs = tree()
    top = {p for p in files | dirs if "/" not in p}
    assert len(named_paths(text, top)) >= 30, "the extraction found too few paths"
    missing = missing_paths(text)
    assert not missing, "docs/architecture.md names paths that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("see `crates/verjus-core/src/ops/no_op.rs`", ["crates/verjus-core/src/ops/no_op.rs"]),
        ("```\ncrates/verjus-nowhere/   a crate\n```", ["crates/verjus-nowhere/"]),
        ("in `autograd/no_such_node.rs`", ["autograd/no_such_node.rs"]),
        ("the file `no_such_module.py`", ["no_such_module.py"]),
        ("see docs/no-such-page.md.", ["docs/no-such-page.md"]),
        ("[the page](no-such-page.md)", ["docs/no-such-page.md"]),
        ("`crates/verjus-nn/src/{layers,nothing}/`", ["crates/verjus-nn/src/{layers,nothing}/"]),
        ("`crates/verjus-core/src/nothing/G.rs`", ["crates/verjus-core/src/nothing/G.rs"]),
        ("`crates/verjus-core/src/ops/G.rs` and `autograd/checkpoint.rs`", []),
        ("`crates/verjus-conformance/src/{checks,errors}/` `tests/test_rf_TOPIC.py`", []),
        ("`ops::G(...)`, `verjus.rf`, `x_t W_ih^T`, `1.5x`", []),
    ],
)
def test_made_up_paths_are_reported(text, missing):
    assert missing_paths(text) == missing
