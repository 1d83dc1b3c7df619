#!/usr/bin/env bash
# Runs on the GPU machine (no Rust, no network), from the checkout root, what
# scripts/gpu_tests.sh built into .device/: the CUDA conformance suite, the unit
# tests (NVRTC compiles every kernel), the CPU/GPU parity test, a smoke test of
# the wheel, then the GPU benchmarks against PyTorch. A missing GPU is a
# failure here (VERJUS_REQUIRE_CUDA=1), never a skip.
#
#   bash .device/run.sh [--no-bench]
set -euo pipefail
ROOT=$(pwd)
DEV="$ROOT/.device"
[ -d "$DEV/tests" ] || { echo "error: run from the checkout root that holds .device/" >&2; exit 1; }
PY=${PYTHON:-python3}
export VERJUS_REQUIRE_CUDA=1

# The CUDA libraries: the system's, and those PyTorch's wheels bring along.
extra=$("$PY" - <<'PYEOF'
import glob, os, site
dirs = []
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    dirs += glob.glob(os.path.join(sp, "nvidia", "*", "lib"))
    dirs += glob.glob(os.path.join(sp, "nvidia", "cu13", "lib"))
print(":".join(sorted(set(dirs))))
PYEOF
)
export LD_LIBRARY_PATH="${extra}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export VERJUS_CUDA_CACHE="$DEV/kernel-cache"

status=0
echo "==> test executables"
for t in "$DEV"/tests/*; do
    echo "--- $(basename "$t")"
    "$t" --include-ignored --test-threads=1 || status=1
done

echo "==> the wheel"
SITE=$(mktemp -d)
"$PY" -m pip install --no-index --no-deps --target "$SITE" "$DEV"/wheel/*.whl
PYTHONPATH="$SITE" "$PY" -c '
import verjus
assert verjus.cuda.is_available(), verjus.cuda.unavailable_reason()
print("verjus.cuda: devices", verjus.cuda.device_count(), verjus.devices())
' || status=1

if [ "${1:-}" != "--no-bench" ]; then
    echo "==> benchmarks (verjus vs PyTorch on the same GPU)"
    PYTHONPATH="$SITE" "$PY" benches/run.py --device cuda --bench-exe "$DEV/bin/verjus-bench" \
        --markdown "$DEV/gpu-bench.md" || status=1
fi
exit $status
