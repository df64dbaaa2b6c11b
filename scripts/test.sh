#!/usr/bin/env bash
# Set up (scripts/bootstrap.sh test) and run the whole test suite.
# Extra arguments go to pytest.  Exits non-zero if any test fails or none ran.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$("$root/scripts/bootstrap.sh" test | tail -n 1)"
cd "$root"
# HIPRTC from Debian's ROCm 5.2 lives inside libamdhip64; hip-python looks for libhiprtc.so.
if [ -e /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 ]; then
    mkdir -p "$venv/hiprtc"
    ln -sf /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 "$venv/hiprtc/libhiprtc.so"
    ln -sf /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 "$venv/hiprtc/libamdhip64.so"
    export LD_LIBRARY_PATH="$venv/hiprtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
exec "$venv/bin/python" -m pytest -ra "$@"
