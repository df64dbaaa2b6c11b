"""The memory-object path's read-back, run here with a stand-in for the imported memory.

On the H200 the pack buffer is backed by a CUDA VMM allocation imported as a
GL memory object; no GL here can import one (llvmpipe answers
GL_OUT_OF_MEMORY, PLATFORM.md).  Everything after the import is the same code
and runs here for real: the exporter's ``_import_memory`` is replaced by a
plain GL buffer of the same size, and ``export()`` does its per-plane
``glReadPixels`` into it at each plane's offset and pitch, with the producer's
pack state off its defaults (``SWAP_BYTES`` on, skip rows/pixels, row length,
alignment 2, its own pack buffer bound) -- then the buffer's bytes are compared
with the planes, row padding included, and the state with before.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

try:
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    from OpenGL import GL
except Exception as e:  # noqa: BLE001
    pytest.skip(f"PyOpenGL or a GL library is missing ({type(e).__name__}: {e})", allow_module_level=True)

from vmafx import gl as vg  # noqa: E402
from vmafx.frames import ALLOW_COPY, BorrowedFd, FrameBuffer  # noqa: E402
from vmafx.protocol.messages import Plane  # noqa: E402
from vmafx.transport import OwnedFd  # noqa: E402

from .producer import BusyState, GlProducer, pyopengl_state  # noqa: E402

W, H = 70, 38  # chroma 35x19: odd widths, a pitch (256) far wider than the rows


class _Layout:
    """A VmmFrameBuffer's layout (256-byte pitches, planes one after another) over a memfd."""

    def __init__(self, fmt, bitdepth):
        self.planes = []
        off = 512  # not at 0: the offset is honoured
        for shape, _ in vg.plane_formats(fmt, W, H, bitdepth):
            pitch = (shape.row_bytes + 255) // 256 * 256
            self.planes.append(SimpleNamespace(offset=off, pitch=pitch))
            off += pitch * shape.height
        self.size = (off + 4095) // 4096 * 4096
        self.fd = OwnedFd(os.memfd_create("layout", os.MFD_CLOEXEC))
        os.ftruncate(self.fd.fileno(), self.size)

    def registration(self):
        return {"kind": "memfd", "device": None}


def _plain_buffer_import(self, g, memory):
    """Stand-in for the memory-object import: a GL buffer of the memory's size, zero-filled."""
    buf = int(GL.glGenBuffers(1))
    GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, buf)
    GL.glBufferData(GL.GL_PIXEL_PACK_BUFFER, memory.size, np.zeros(memory.size, np.uint8), GL.GL_STREAM_READ)
    self._pack_buffer = buf
    self._vmm_buffer = FrameBuffer("memfd", self.width, self.height, self.pixel_format, self.bitdepth,
                                   [Plane(0, p.offset, p.pitch) for p in memory.planes],
                                   [BorrowedFd(memory.fd.fileno())], size=memory.size, flags=self.flags)


@pytest.mark.parametrize("fmt,bitdepth", [("yuv420p", 8), ("nv12", 8), ("yuv420p", 10), ("p010", 10)],
                         ids=["R8", "R8+GR88", "R16", "R16+GR1616"])
def test_each_plane_lands_at_its_offset_and_pitch_and_the_state_is_kept(egl, monkeypatch, fmt, bitdepth):
    monkeypatch.setattr(vg.GlFrameExporter, "_import_memory", _plain_buffer_import)
    formats = vg.plane_formats(fmt, W, H, bitdepth)
    rng = np.random.default_rng(11)
    planes = []
    for shape, pf in formats:
        hi = 256 if pf.bytes_per_sample == 1 else 65536
        dtype = np.uint8 if pf.bytes_per_sample == 1 else np.uint16
        planes.append(rng.integers(0, hi, (shape.height, shape.width * shape.components)).astype(dtype))
    p = GlProducer()
    busy = BusyState()
    layout = _Layout(fmt, bitdepth)
    x = vg.GlFrameExporter(W, H, fmt, bitdepth, device=vg.DaemonDevice("cpu", 0), flags=ALLOW_COPY,
                           path="memory_object", memory=layout, trace=print)
    try:
        tex = p.make_textures(W, H, fmt, bitdepth)
        p.upload(tex, planes, formats)
        sync = p.fence()
        vg.wait_sync_acquire(sync)
        busy.apply()
        before, before_py = vg.gl_state_snapshot(), pyopengl_state()
        frame = x.export(tex, sync=sync)
        assert vg.gl_state_snapshot() == before and pyopengl_state() == before_py
        assert GL.glGetError() == GL.GL_NO_ERROR
        busy.reset()
        assert (frame.path, frame.copied, frame.new_buffer) == ("memory_object", True, True)
        with pytest.raises(vg.GlBusy):
            x.export(tex)  # not released yet
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, x._pack_buffer)
        raw = np.frombuffer(GL.glGetBufferSubData(GL.GL_PIXEL_PACK_BUFFER, 0, layout.size), np.uint8)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
        written = np.zeros(layout.size, bool)
        for k, (spec, (shape, pf), want) in enumerate(zip(layout.planes, formats, planes)):
            rows = np.lib.stride_tricks.as_strided(raw[spec.offset:], (shape.height, shape.row_bytes), (spec.pitch, 1))
            got = rows.copy().view(want.dtype)
            assert np.array_equal(got, want), f"plane {k}: {int(np.count_nonzero(got != want))} samples differ"
            for r in range(shape.height):
                written[spec.offset + r * spec.pitch: spec.offset + r * spec.pitch + shape.row_bytes] = True
        assert not raw[~written].any(), "bytes outside the planes' rows were written"
        print(f"{fmt} {bitdepth}-bit: {len(planes)} planes at {[(s.offset, s.pitch) for s in layout.planes]} exact")
        x.mark_released()
        frame2 = x.export(tex)
        assert frame2.buffer is frame.buffer and not frame2.new_buffer
    finally:
        egl.make_current()
        x.close()
        busy.close()
        p.close()
        layout.fd.close()
