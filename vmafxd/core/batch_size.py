"""How many frames a GPU lane's session scores in one batch (``gpu_batch``).

One rule, read by the configuration (which checks the setting), the GPU lanes (in the daemon
and in a lane worker process) and the benchmarks.
"""

from __future__ import annotations

__all__ = ["AUTO_BATCH_PIXELS", "AUTO_BATCH_RANGE", "batch_for", "check_batch_setting"]

#: ``gpu_batch = "auto"``: a batch holds about as many pixels as 32 frames of 1080p, within
#: AUTO_BATCH_RANGE.  Part of the daemon's host work goes with each batch whatever it holds
#: (about 380 µs of its CPU, docs/performance.md), so small pictures want more frames a batch:
#: on the H200, vmaf_v0.6.1 at 576x324 with 128 frames in flight scores 15,091-17,348 frames/s
#: at 128 against 12,642-12,700 at 32.  A batch takes only the frames that have come (the GPU
#: worker's launch rule), so a larger bound adds no wait when few frames are in flight.  The device memory a
#: session holds grows with its batch; the pixel bound keeps it at 1080p's.
AUTO_BATCH_PIXELS = 32 * 1920 * 1080
AUTO_BATCH_RANGE = (32, 128)


def check_batch_setting(value) -> int | str:
    """``gpu_batch`` as a lane takes it: "auto" or a number of frames (at least 1)."""
    if isinstance(value, str) and value.lower() == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'gpu_batch: expected a number of frames or "auto", got {value!r}')
    return value


def batch_for(setting: int | str, width: int, height: int) -> int:
    """The most frames a session of ``width`` x ``height`` pictures scores in one batch."""
    if setting != "auto":
        return int(setting)
    low, high = AUTO_BATCH_RANGE
    return max(low, min(high, AUTO_BATCH_PIXELS // max(1, width * height)))
