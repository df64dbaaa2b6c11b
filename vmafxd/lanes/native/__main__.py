"""``python -m vmafxd.lanes.native``: build the CPU lane's native kernels into the kernel cache now."""

import sys

from . import available, build_all

if not available():
    print("vmafxd.lanes.native: no host C++ compiler (g++); the CPU lane scores with its numpy twins", file=sys.stderr)
    sys.exit(0)
print("vmafxd.lanes.native: built", ", ".join(build_all()))
