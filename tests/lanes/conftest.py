"""GPU fixtures: a device of each GPU runtime that exists here, or a clean skip saying why.

GPU tests are parameterised by runtime ("cuda", "hip"): the same test runs on
every GPU lane that has a device, and skips with the runtime's own reason
(no bindings, no driver library, no device) where none does.
"""

import pytest

#: the real GPU runtimes, and the CPU emulator of the kernels (vmafxd/lanes/emulated.py)
RUNTIMES = ("cuda", "hip", "emu")
_cache: dict[str, object] = {}


def load_runtime(name: str):
    """(runtime, device 0) or raise pytest.skip with the reason."""
    if name in _cache:
        got = _cache[name]
        if isinstance(got, str):
            pytest.skip(got)
        return got
    from vmafxd.lanes.runtime import RuntimeUnavailable

    try:
        if name == "cuda":
            from vmafxd.lanes import cuda as binding
        elif name == "hip":
            from vmafxd.lanes import hip as binding
        else:
            from vmafxd.lanes import emulated as binding
        rt = binding.load()
        if rt.device_count() < 1:
            raise RuntimeUnavailable(name, "no device")
        got = (rt, rt.device(0))
    except (RuntimeUnavailable, ImportError) as e:
        got = f"no {name} device: {e}"
    _cache[name] = got
    if isinstance(got, str):
        pytest.skip(got)
    return got


@pytest.fixture(params=RUNTIMES)
def gpu(request):
    """(runtime, device) for each GPU runtime with a device (and the emulator); skips otherwise."""
    return load_runtime(request.param)


class RecordingSink:
    """A lane session's FrameSink that keeps what it is told: ``scored`` (index, metrics) and
    ``failed`` (index, LaneError)."""

    def __init__(self):
        self.scored, self.failed = [], []

    def frames_scored(self, items):
        self.scored.extend(items)

    def frame_failed(self, index, error):
        self.failed.append((index, error))


def import_picture(lane, picture):
    """``picture`` written to a memfd (4:2:0) and imported into ``lane`` as a daemon would."""
    from vmafx.formats import PixelFormat
    from vmafx.protocol import Limits, RegisterBuffer
    from vmafx.transport import OwnedFd
    from vmafxd.buffers import validate_layout

    from ..daemon.rawclient import frame_memfd

    buf = frame_memfd(picture, PixelFormat.YUV420P)
    msg = RegisterBuffer(seq=1, kind="memfd", width=buf.width, height=buf.height, pixel_format=buf.pixel_format,
                         bitdepth=buf.bitdepth, size=buf.size, planes=buf.planes, fds=(buf.fd,))
    fd = OwnedFd(buf.fd)
    buf.fd = -1
    with fd:
        return lane.import_buffer(validate_layout(msg, Limits()), {0: fd})
