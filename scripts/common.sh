# shellcheck shell=bash
# Helpers shared by scripts/*.sh; sourced, not run.
#
# Each script calls `step NAME` before a stage; when a command then fails and
# `set -e` ends the script, the EXIT trap names the stage that failed.

VERJUS_STEP="setup"
VERJUS_START=$SECONDS

# Announces a stage and remembers its name for the failure message.
step() {
    VERJUS_STEP="$*"
    printf '\n==> %s  (%ds elapsed)\n' "$VERJUS_STEP" $((SECONDS - VERJUS_START))
}

# Prints an error and exits.
die() {
    printf '\nerror: %s\n' "$*" >&2
    exit 1
}

# Fails unless command $1 exists; $2 says how to get it.
require() {
    command -v "$1" >/dev/null 2>&1 || die "'$1' was not found on PATH. $2"
}

# Names the failed stage when the script exits with an error: its exit status is $1
# (from a trap that ran other commands first) or $?.
on_exit() {
    local status=${1:-$?}
    if ((status != 0)); then
        printf '\nFAILED during: %s (exit status %d)\n' "$VERJUS_STEP" "$status" >&2
    fi
}
trap on_exit EXIT

# Run from the repository root, wherever the script was started.
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# Python packages the build, the tests and the main job use (pinned, from PyPI).
# RETURNN (pure Python; tests/test_returnn_rf_suite.py runs its rf tests on verjus,
# tests/test_returnn_engine.py its configs) and h5py for its HDF output files.
RETURNN_PACKAGE=returnn==1.20261022.211313
H5PY_PACKAGE=h5py==3.15.1
# dm-tree: RETURNN's config loading and some of its rf tests import `tree`.
DMTREE_PACKAGE=dm-tree==0.1.10
# mpi4py: data-parallel CPU ranks reach the system's MPI through it (verjus[mpi]).
MPI4PY_PACKAGE=mpi4py==4.1.2
# ml_dtypes: numpy's bfloat16, which bfloat16 tensors convert to where it is installed.
ML_DTYPES_PACKAGE=ml_dtypes==0.6.0
# NVRTC alone (no GPU needed), to compile the CUDA kernels in the tests.
NVRTC_WHEEL=nvidia-cuda-nvrtc==13.5.37
PY_TOOLS=(
    maturin==1.16.0 numpy==2.4.6 pytest==9.2.0 ruff==0.17.6
    tqdm==4.70.1 matplotlib==3.11.2 safetensors==0.8.0
)

# Creates .venv (if missing) with PY_TOOLS and makes it the active environment for
# cargo (pyo3's build script), maturin and the commands that follow.
setup_venv() {
    require python3 "Install Python 3.11 or newer."
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
        die "Python 3.11 or newer is needed; python3 is $(python3 --version 2>&1)"
    if [[ ! -x .venv/bin/python ]]; then
        python3 -m venv .venv || die "python3 -m venv failed; on Debian/Ubuntu: apt-get install python3-venv"
    fi
    .venv/bin/python -m pip install --quiet --disable-pip-version-check "${PY_TOOLS[@]}"
    export VIRTUAL_ENV="$PWD/.venv"
    export PYO3_PYTHON="$VIRTUAL_ENV/bin/python"
    export PATH="$VIRTUAL_ENV/bin:$PATH"
}

# Makes sure the fortunes texts (verjus.data.fortunes, the char-LM examples) are there:
# a folder named by VERJUS_FORTUNES must exist; otherwise Debian's `fortunes` package is
# installed into /usr/share/games/fortunes with apt-get as root. Where it cannot be, it
# says what to run and returns 1 (the tests that need the texts then skip, saying why).
ensure_fortunes() {
    if [[ -n ${VERJUS_FORTUNES:-} ]]; then
        [[ -d $VERJUS_FORTUNES ]] || die "VERJUS_FORTUNES=$VERJUS_FORTUNES is not a folder of fortune files."
        return 0
    fi
    [[ -f /usr/share/games/fortunes/fortunes ]] && return 0
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update
        apt-get install -y --no-install-recommends fortunes
    else
        echo "the fortunes texts are missing: run 'sudo apt-get install fortunes' (or set VERJUS_FORTUNES to a folder of fortune files)." >&2
        return 1
    fi
}

# Makes sure an MPI (mpirun and libmpi, for mpi4py and the data-parallel tests) is
# there: Debian's Open MPI is installed with apt-get as root. Where it cannot be,
# it says what to run and returns 1 (the data-parallel tests then skip, saying why).
ensure_mpi() {
    command -v mpirun >/dev/null 2>&1 && return 0
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update
        apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev
    else
        echo "MPI is missing: run 'sudo apt-get install openmpi-bin libopenmpi-dev' for the data-parallel tests." >&2
        return 1
    fi
}
