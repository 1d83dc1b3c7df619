#!/usr/bin/env bash
# Sets up from a fresh clone and runs the main job: the spiral example, a small
# MLP trained with autograd on the native CPU backend.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

require cargo "Install Rust (https://rustup.rs)."
[[ -f examples/spiral.rs ]] || die "examples/spiral.rs is missing; this checkout has no spiral example yet."

step "cargo run --release --example spiral"
cargo run --release --example spiral

step "done"
