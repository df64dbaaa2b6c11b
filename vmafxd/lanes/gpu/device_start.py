"""A GPU lane's runtime and device started on a thread, ahead of the scoring that takes them.

Before ``vmafxctl score --lane cuda`` reads its first frame in this process it pays for the
driver (about 0.37 s of CUDA context on the H200) and for pinning (about 0.4 ms a MiB).
Neither holds the GIL, so :func:`start_device` runs both on a thread as soon as the command
knows it scores here, while the main thread imports the scoring core, loads the models,
opens the inputs and builds the plan; vmafxd/lanes/gpu/in_process.py takes the result
(:func:`take_device`).  This module imports only the standard library, so that the client
can start the device before it imports the core: the thread imports the binding (and numpy).
"""

from __future__ import annotations

import atexit
import importlib
import threading

__all__ = ["RUNTIMES", "SLOT_BYTES", "start_device", "take_device"]

#: the GPU runtimes the in-process path scores on ("emu": the CPU emulator of the kernels, for tests)
RUNTIMES = {"cuda": "vmafxd.lanes.cuda", "hip": "vmafxd.lanes.hip", "emu": "vmafxd.lanes.emulated"}

#: page-locked bytes a slot aims at.  Pinning costs (cuMemHostAlloc: about 0.4 ms a MiB on
#: the H200; the first slot before the first frame, the others while scoring), so 32 pairs of
#: 4K frames (800 MB a slot) cost more to pin than to score; measured there with every slot
#: pinned up front (docs/gpu-runs.md), 800 1080p frames: batches of 32 776 frames/s, 16 966,
#: 8 1,068, 4 1,002; 200 4K frames: 32 69, 8 186, 4 242.
SLOT_BYTES = 64 << 20


class _DeviceStart:
    """A lane's runtime, device ``ordinal`` and one page-locked slot, made on a thread of their own.

    The slot is ``SLOT_BYTES`` whatever the geometry: a batch is sized to fit it."""

    def __init__(self, lane: str, ordinal: int = 0):
        self.lane, self.ordinal = lane, ordinal
        self.runtime = self.device = self.host = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"vmafx-start-{lane}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            from ..runtime import RuntimeUnavailable  # (numpy: imported here, off the main thread)

            try:
                binding = importlib.import_module(RUNTIMES[self.lane])
            except ImportError as e:
                raise RuntimeUnavailable(self.lane, f"its binding cannot be imported ({e})") from None
            rt = binding.load()
            count = rt.device_count()
            if count < 1:
                raise RuntimeUnavailable(self.lane, "no device")
            if self.ordinal >= count:
                raise RuntimeUnavailable(self.lane, f"no device {self.ordinal} (it has {count})")
            dev = rt.device(self.ordinal)
            dev.make_current()  # (the context is current per thread: the scoring thread makes it so again)
            self.runtime, self.device = rt, dev
            self.host = dev.alloc_host(SLOT_BYTES)
        except BaseException as e:  # raised where the device is taken
            self.error = e

    def take(self):
        """(runtime, device, the pinned slot or None); the start's error raised here."""
        self._thread.join()
        if self.error is not None and self.device is None:
            raise self.error
        return self.runtime, self.device, self.host


#: devices being started for the scoring to come, by lane
_starting: dict[str, _DeviceStart] = {}
_starting_lock = threading.Lock()
_exit_hook = False


def start_device(lane: str) -> None:
    """Start ``lane``'s runtime and device 0 (and pin a first slot) on a thread now; the next
    in-process scoring on that lane (``in_process.score_readers``) takes them.  Errors wait for
    it (a lane that cannot run fails there, as it would have)."""
    global _exit_hook
    with _starting_lock:
        if not _exit_hook:
            atexit.register(_wait_for_starts)
            _exit_hook = True
        if lane not in _starting:
            _starting[lane] = _DeviceStart(lane)


def _wait_for_starts() -> None:
    """At exit, a start never taken (the command failed first) finishes before the interpreter
    does: a thread still inside the driver's initialisation while the process tears the driver
    down could crash the exit."""
    with _starting_lock:
        starts = list(_starting.values())
    for start in starts:
        start._thread.join(timeout=30)


def take_device(lane: str, ordinal: int = 0):
    """(runtime, device ``ordinal``, a pinned slot or None) of ``lane``: the start made ahead
    (device 0's), else one made now."""
    with _starting_lock:
        start = _starting.pop(lane, None) if ordinal == 0 else None
    return (start or _DeviceStart(lane, ordinal)).take()
