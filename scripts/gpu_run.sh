#!/usr/bin/env bash
# Runs on the GPU machine (no Rust, no network), from the checkout root, what
# scripts/gpu_tests.sh built into .device/: the CUDA conformance suite, the unit
# tests (NVRTC compiles every kernel), the CPU/GPU parity test, a smoke test of
# the wheel, the Python package on the GPU (tests/test_gpu.py, the RF test
# files with the RF frontend's default device on the GPU, Fashion-MNIST's CNN
# trained 3 epochs by `verjus train --device cuda`), then the GPU benchmarks
# against PyTorch. A missing GPU is a failure here (VERJUS_REQUIRE_CUDA=1),
# never a skip. Each part has a time limit so that the whole fits one call of a
# lent machine; with $OUT set, each part's log is also written there.
#
#   bash .device/run.sh [--no-bench] [--only-bench]
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

LOGS=${OUT:-$DEV/logs}
mkdir -p "$LOGS"
status=0
# part NAME SECONDS CMD...: runs CMD with a time limit, its output also in $LOGS/NAME.log.
part() {
    local name=$1 limit=$2
    shift 2
    echo "--- $name"
    if ! timeout "$limit" "$@" 2>&1 | tee "$LOGS/$name.log"; then
        echo "FAILED: $name (exit status ${PIPESTATUS[0]})"
        status=1
    fi
}

# Fashion-MNIST: the machine has no network; gpu_tests.sh copies the files into
# .device/fashion-mnist, linked here into the place the loaders look first.
if [ -d "$DEV/fashion-mnist" ] && [ ! -e /usr/share/datasets/fashion-mnist ]; then
    mkdir -p /usr/share/datasets && ln -s "$DEV/fashion-mnist" /usr/share/datasets/fashion-mnist
fi

SITE=$(mktemp -d)
"$PY" -m pip install -q --no-index --no-deps --target "$SITE" "$DEV"/wheel/*.whl

if [ "${1:-}" != "--only-bench" ]; then
    # The CPU's accuracy to compare the GPU run with, trained meanwhile.
    CPU_RUN=$(mktemp -d)
    PYTHONPATH="$SITE" nice "$PY" -m verjus train examples/nets/fashion_cnn.json --device cpu \
        --epochs 3 --out "$CPU_RUN/run" >"$LOGS/train-cnn-cpu.log" 2>&1 &
    cpu_train=$!

    echo "==> test executables"
    for t in "$DEV"/tests/*; do
        part "$(basename "$t")" 300 "$t" --include-ignored --test-threads=1
    done

    echo "==> the wheel"
    part wheel 60 env PYTHONPATH="$SITE" "$PY" -c '
import verjus
assert verjus.cuda.is_available(), verjus.cuda.unavailable_reason()
print("verjus.cuda: devices", verjus.cuda.device_count(), verjus.devices())
'
    echo "==> the Python package on the GPU"
    part pytest-gpu 300 env PYTHONPATH="$SITE" VERJUS_TEST_DEVICE=cuda "$PY" -m pytest -q \
        -p no:cacheprovider -rs tests/test_gpu.py tests/test_device.py tests/test_rf_*.py
    part train-cnn-cuda 300 env PYTHONPATH="$SITE" "$PY" -m verjus train examples/nets/fashion_cnn.json \
        --device cuda --epochs 3 --out "$(mktemp -d)/run"
    echo "--- train-cnn-cpu (the same run on the CPU)"
    wait "$cpu_train" || { echo "FAILED: train-cnn-cpu"; status=1; }
    cat "$LOGS/train-cnn-cpu.log"
fi

if [ "${1:-}" != "--no-bench" ]; then
    echo "==> benchmarks (verjus vs PyTorch on the same GPU)"
    part bench 420 env PYTHONPATH="$SITE" "$PY" benches/run.py --device cuda \
        --bench-exe "$DEV/bin/verjus-bench" --markdown "$LOGS/gpu-bench.md"
fi
exit $status
