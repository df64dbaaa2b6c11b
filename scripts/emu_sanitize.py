"""Run kernel tests on the CPU emulator with the kernels built under AddressSanitizer and
UndefinedBehaviorSanitizer: an out-of-bounds shared-memory index (the emulator's shared arrays
are the block call's stack), a read past a device buffer or a signed overflow in a kernel
stops the run with the sanitizer's report.  No GPU needed.

    python3 scripts/emu_sanitize.py tests/lanes/test_vif_motion_kernels.py tests/lanes/test_adm_kernel.py -k emu

The sanitizer runtimes must be loaded first, so this re-executes itself under LD_PRELOAD
(gcc's libasan and libubsan); pytest runs with -s, since a report printed while pytest
captures output would be lost with the aborted process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ("-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer")


def _runtimes() -> str:
    libs = []
    for name in ("libasan.so", "libubsan.so"):
        path = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
        if not os.path.isabs(path):
            sys.exit(f"emu_sanitize: gcc has no {name}")
        libs.append(path)
    return " ".join(libs)


def main() -> int:
    if os.environ.get("VMAFXD_EMU_SANITIZE") != "1":
        env = dict(os.environ, VMAFXD_EMU_SANITIZE="1", LD_PRELOAD=_runtimes(),
                   ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "detect_leaks=0"))
        return subprocess.run([sys.executable, __file__, *sys.argv[1:]], env=env).returncode
    sys.path[:0] = [str(ROOT), str(ROOT / "client")]
    from vmafxd.lanes import emulated

    # the flags are part of each library's cache key: sanitized builds never replace the others
    emulated.BUILD_FLAGS = tuple(f for f in emulated.BUILD_FLAGS if f != "-O3") + FLAGS
    import pytest

    return pytest.main(["-q", "-s", "-p", "no:cacheprovider", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
