#!/usr/bin/env bash
# Sets up everything from a fresh clone and runs all tests:
#   Rust: cargo fmt --check, clippy (warnings are errors), cargo test (release);
#   Python: builds the package into .venv, ruff check + format check, pytest.
# Exits non-zero on the first failure. Needs cargo and python3 (>= 3.11) with venv.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PY_TOOLS=(maturin==1.16.0 numpy==2.4.6 pytest==9.2.0 ruff==0.17.6)

require cargo "Install Rust (https://rustup.rs)."
require python3 "Install Python 3.11 or newer."
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "Python 3.11 or newer is needed; python3 is $(python3 --version 2>&1)"

step "cargo fmt --check"
cargo fmt --all --check

step "Python virtual environment .venv"
if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv || die "python3 -m venv failed; on Debian/Ubuntu: apt-get install python3-venv"
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check "${PY_TOOLS[@]}"
# Build the bindings against the venv's interpreter, in cargo and maturin alike.
export VIRTUAL_ENV="$PWD/.venv"
export PYO3_PYTHON="$VIRTUAL_ENV/bin/python"
export PATH="$VIRTUAL_ENV/bin:$PATH"

step "ruff"
py_dirs=()
for d in python tests benches examples; do
    if [[ -d $d ]]; then py_dirs+=("$d"); fi
done
ruff check "${py_dirs[@]}"
ruff format --check "${py_dirs[@]}"

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test (release)"
cargo test --workspace --release

step "build and install the Python package (maturin develop --release)"
maturin develop --release

step "pytest"
pytest tests -q

step "all tests passed"
