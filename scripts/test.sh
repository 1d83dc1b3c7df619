#!/usr/bin/env bash
# Sets up everything from a fresh clone and runs all tests:
#   Rust: cargo fmt --check, clippy (warnings are errors), cargo test (release);
#   Python: builds the package into .venv, ruff check + format check, pytest (its
#   skips summed up last by reason, scripts/skip_summary.py);
#   the wheel: `maturin build` makes the abi3 wheel, which is installed into a
#   clean virtual environment and run there (import, the `verjus` command).
# Exits non-zero on the first failure. Needs cargo and python3 (>= 3.11) with venv.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

require cargo "Install Rust (https://rustup.rs)."

step "cargo fmt --check"
cargo fmt --all --check

step "Python virtual environment .venv"
setup_venv

step "ruff"
py_dirs=()
for d in python tests benches examples; do
    if [[ -d $d ]]; then py_dirs+=("$d"); fi
done
ruff check "${py_dirs[@]}"
ruff format --check "${py_dirs[@]}"

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

# Every op output starts as NaN (crates/verjus-core/src/host_pool.rs), so an
# op that leaves part of its output unwritten fails here.
export VERJUS_POISON_OUTPUTS=1

step "cargo test (release)"
cargo test --workspace --release

step "NVRTC compiles every CUDA kernel (no GPU needed)"
pip install --quiet --disable-pip-version-check "$NVRTC_WHEEL"
nvrtc_lib=$(python -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))')
# The whole workspace's library tests, as built above (`-p verjus-cuda` alone
# unified other features and compiled the workspace a second time, 100 s);
# only verjus-cuda has an ignored test of this name.
LD_LIBRARY_PATH="$nvrtc_lib" cargo test --workspace --release --lib -- --ignored every_kernel

step "build and install the Python package (maturin develop --release)"
# PIP_QUIET: maturin's own pip step listed every dependency already installed.
PIP_QUIET=1 maturin develop --release

step "fortunes texts (for the text-data tests; they skip without them)"
ensure_fortunes || true

step "Open MPI and mpi4py (for the data-parallel tests; they skip without them)"
if ensure_mpi; then
    pip install --quiet --disable-pip-version-check "$MPI4PY_PACKAGE"
fi

step "RETURNN's pure-Python package (its rf tests and configs, run on verjus), dm-tree, h5py, ml_dtypes"
pip install --quiet --disable-pip-version-check "$RETURNN_PACKAGE" "$DMTREE_PACKAGE" "$H5PY_PACKAGE" \
    "$ML_DTYPES_PACKAGE"

step "pytest"
# Its JUnit report names each skip and why; they are summed up at the end.
report_dir=$(mktemp -d)
trap 'status=$?; rm -rf "$report_dir"; on_exit "$status"' EXIT
pytest tests -q --junitxml="$report_dir/pytest.xml"

step "the wheel in a clean virtual environment"
wheel_dir=$(mktemp -d)
clean_env=$(mktemp -d)
trap 'status=$?; rm -rf "$report_dir" "$wheel_dir" "$clean_env"; on_exit "$status"' EXIT
maturin build --release --out "$wheel_dir"
wheels=("$wheel_dir"/verjus-*-abi3-*.whl)
[[ -f ${wheels[0]} ]] || die "maturin built no abi3 wheel (found: $(ls "$wheel_dir"))"
python3 -m venv "$clean_env/venv"
"$clean_env/venv/bin/python" -m pip install --quiet --disable-pip-version-check "${wheels[0]}"
(cd "$clean_env" && "$clean_env/venv/bin/python" -c \
    'import verjus, numpy as np; n = verjus.Network.from_def({"inputs": [{"name": "x", "shape": [3]}], "layers": [{"name": "fc", "type": "Linear", "out_features": 2}]}); print("wheel", verjus.__version__, "forward", n(np.ones((1, 3), np.float32)).shape)')
"$clean_env/venv/bin/verjus" info examples/nets/fashion_cnn.json >/dev/null
echo "installed and ran $(basename "${wheels[0]}")"

step "all tests passed"
python scripts/skip_summary.py "$report_dir/pytest.xml"
