#!/usr/bin/env bash
# Sets up from a fresh clone and runs the main job: the Fashion-MNIST CNN
# (examples/nets/fashion_cnn.json) trained for 3 epochs with Adam on the native
# CPU backend, printing per-epoch train loss and test accuracy.
#
# The data comes from Debian's dataset-fashion-mnist package; as root this script
# installs it when it is missing, otherwise it says what to run. Pass
# `--epochs N` to change the epoch count (e.g. `bash scripts/main.sh --epochs 1`).
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

step "cargo run --release --example fashion_cnn"
cargo run --release --example fashion_cnn -- "$@"

step "done"
