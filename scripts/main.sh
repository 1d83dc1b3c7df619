#!/usr/bin/env bash
# Sets up from a fresh clone and runs the main job: the `verjus` command trains
# the Fashion-MNIST CNN (examples/nets/fashion_cnn.json) for 3 epochs with Adam on
# the CPU, printing per-epoch train loss and test accuracy, and writes the run
# folder runs/cnn (network.json, weights.safetensors, metrics.jsonl, curves.png).
#
# Setup: a virtual environment .venv with the Python package built in release
# mode; the data comes from Debian's dataset-fashion-mnist package, which this
# script installs as root when it is missing (otherwise it says what to run).
# Extra arguments go to `verjus train` (e.g. `bash scripts/main.sh --epochs 1`).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

DATA_DIR="${VERJUS_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}"

require cargo "Install Rust (https://rustup.rs)."

step "Fashion-MNIST data in $DATA_DIR"
if [[ ! -f $DATA_DIR/t10k-labels-idx1-ubyte.gz ]]; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update
        apt-get install -y --no-install-recommends dataset-fashion-mnist
    else
        die "Fashion-MNIST is missing: run 'sudo apt-get install dataset-fashion-mnist' (or set VERJUS_FASHION_MNIST to a folder with the IDX .gz files)."
    fi
fi

step "Python virtual environment .venv"
setup_venv

step "build and install the Python package (maturin develop --release)"
PIP_QUIET=1 maturin develop --release # its pip step quiet: no list of what is installed

step "verjus train examples/nets/fashion_cnn.json"
verjus train examples/nets/fashion_cnn.json --data fashion-mnist --epochs 3 \
    --optimizer adam --lr 1e-3 --batch-size 128 --device cpu --out runs/cnn --overwrite "$@"

step "done"
