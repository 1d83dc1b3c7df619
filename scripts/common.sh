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

# Names the failed stage when the script exits with an error.
on_exit() {
    local status=$?
    if ((status != 0)); then
        printf '\nFAILED during: %s (exit status %d)\n' "$VERJUS_STEP" "$status" >&2
    fi
}
trap on_exit EXIT

# Run from the repository root, wherever the script was started.
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
