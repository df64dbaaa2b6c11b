"""Sizes of the reliability suite: small in CI, scripts/soak.py runs the long versions.

``VMAFX_RELIABILITY_SCALE`` multiplies the trial counts (default 1).
"""

import os

SCALE = float(os.environ.get("VMAFX_RELIABILITY_SCALE", "1"))


def scaled(n: int) -> int:
    return max(1, int(n * SCALE))
