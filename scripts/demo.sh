#!/usr/bin/env bash
# Set up (scripts/bootstrap.sh core) and score the bundled sample pair on the CPU lane,
# printing its VMAF.  Extra arguments go to `vmafxctl score`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$("$root/scripts/bootstrap.sh" core | tail -n 1)"
exec "$venv/bin/vmafxctl" score --lane cpu \
    --reference "$root/tests/data/clips/src_testsrc2_576x324.y4m.xz" \
    --distorted "$root/tests/data/clips/dst_testsrc2_576x324_x264crf35.y4m.xz" "$@"
