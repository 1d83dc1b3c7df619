#!/usr/bin/env bash
# Builds, on a machine with a Rust toolchain and no GPU, everything the GPU
# machine needs (which has CUDA 13, cuDNN 9, PyTorch and Python 3.12 but no Rust
# and no network), into the ignored folder .device/:
#
#   .device/tests/   the CUDA test executables (conformance, parity, unit tests)
#   .device/bin/     verjus-bench
#   .device/wheel/   the abi3 wheel of the Python package
#   .device/fashion-mnist/  the data set, where it is installed here
#   .device/run.sh   scripts/gpu_run.sh, the one command to run there
#
# Copy .device/ together with benches/run.py (or the whole checkout) to the GPU
# machine and run `bash .device/run.sh` from the checkout root. See docs/gpu.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/common.sh
source scripts/common.sh
trap on_exit EXIT

require cargo "Install Rust from https://rustup.rs."
setup_venv  # .venv with maturin, as scripts/test.sh makes it
OUT=.device
rm -rf "$OUT"
mkdir -p "$OUT/tests" "$OUT/bin" "$OUT/wheel"

step "build the CUDA test executables"
cargo test --release -p verjus-cuda --no-run --message-format=json \
    | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"], m["target"]["name"])
' | while read -r exe name; do
    cp "$exe" "$OUT/tests/$name"
    echo "  $OUT/tests/$name"
done

step "build verjus-bench"
cargo build --release -p verjus-benches
cp "${CARGO_TARGET_DIR:-target}/release/verjus-bench" "$OUT/bin/"

step "build the abi3 wheel"
maturin build --release --out "$OUT/wheel"

step "copy Fashion-MNIST (the GPU machine has no network)"
fashion=/usr/share/datasets/fashion-mnist
if [ -f "$fashion/train-images-idx3-ubyte.gz" ]; then
    cp -r "$fashion" "$OUT/fashion-mnist"
else
    echo "  $fashion is missing (apt-get install dataset-fashion-mnist): the GPU runs use generated data"
fi

cp scripts/gpu_run.sh "$OUT/run.sh"
step "done: copy the checkout (with $OUT/) to the GPU machine and run: bash $OUT/run.sh"
