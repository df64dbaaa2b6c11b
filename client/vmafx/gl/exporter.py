"""The exporter: a producer's plane textures to a FrameBuffer the client registers, frame after frame,
by the dma-buf path (:mod:`.dmabuf_path`) or the memory-object path (:mod:`.memory_object_path`)."""

from __future__ import annotations

import ctypes
import logging
import time
from typing import Any, Callable, Sequence

from ..formats import PixelFormat, parse_pixel_format
from ..frames import FrameBuffer
from ..transport import ClosedOnExit, OwnedFd
from .constants import (
    COPY_FENCE_TIMEOUT_S, GL_ALREADY_SIGNALED, GL_CONDITION_SATISFIED, _GL_FORMAT_NAMES, GL_FRAMEBUFFER_COMPLETE,
    GL_READ_FRAMEBUFFER, GL_SYNC_FLUSH_COMMANDS_BIT, GL_SYNC_GPU_COMMANDS_COMPLETE, GL_TEXTURE_2D,
    GL_TEXTURE_HEIGHT, GL_TEXTURE_INTERNAL_FORMAT, GL_TEXTURE_TARGET, GL_TEXTURE_WIDTH, GL_WAIT_FAILED,
    IMPLICIT_FENCE_TIMEOUT_S,
)
from .dmabuf_path import DmabufPath, _DmabufExport, _LinearPlane
from .egl_display import current_egl, DaemonDevice
from .entry_points import _gl, _gl_check, _gl_context_info, _gl_errors, _GlContextInfo, _i, _Library, _libs, _u
from .errors import GlBusy, GlInvalid, GlNotSupported, GlTimeout, GlWrongState
from .frame import GlFrame
from .memory_object_path import MemoryObjectPath
from .plane_formats import plane_formats
from .producer_state import _KeepProducerState
from .syncs import check_sync_acquire

log = logging.getLogger("vmafx.gl")


class GlFrameExporter(DmabufPath, MemoryObjectPath, ClosedOnExit):
    """Exports the plane textures of the current EGL context, frame after frame (see the package doc).

    ``device`` is the daemon device that will read the frames
    (:meth:`DaemonDevice.from_lanes` of ``hello_reply.lanes``).  ``path``:
    ``"auto"`` takes ``memory_object`` for a cuda-lane device (CUDA imports
    VMM fds, not dma-bufs; PLATFORM.md) and ``dmabuf`` otherwise (R11).
    ``producer`` (a :class:`~vmafx.cuda_frames.CudaProducer`) or ``memory``
    (a :class:`~vmafx.cuda_frames.VmmFrameBuffer` the caller owns) feed the
    memory-object path; by default the exporter makes its own on the CUDA
    device at the daemon device's PCI location.  ``trace`` receives a line per
    step (tests pass ``print``).

    Nothing touches GL in the constructor: the first :meth:`export` checks
    the capabilities (R11's refusals) and allocates, inside the producer's
    state guard, so every refusal leaves the producer's GL state as it was.
    """

    # The state before the first export: immutable starting values, so class-level defaults
    # serve every exporter until it sets its own (the mutable state is made in __init__).
    display: int | None = None
    context: int | None = None
    _info: _GlContextInfo | None = None
    _ready = False
    _closed = False
    _in_flight = False
    _read_fbo = 0
    # dma-buf path
    render_node: str | None = None
    render_node_pci: str | None = None
    _linear_buffer: FrameBuffer | None = None
    _gbm_device: int | None = None
    _node_fd: OwnedFd | None = None
    # memory-object path
    _own_producer: Any = None
    _own_memory: Any = None
    _memory: Any = None
    _memory_object = 0
    _pack_buffer = 0
    _vmm_buffer: FrameBuffer | None = None

    def __init__(self, width: int, height: int, pixel_format: PixelFormat | str = PixelFormat.YUV420P,
                 bitdepth: int | None = None, *, device: DaemonDevice, flags: int = 0, path: str = "auto",
                 producer: Any = None, memory: Any = None, trace: Callable[[str], None] | None = None,
                 implicit_fence_timeout_s: float = IMPLICIT_FENCE_TIMEOUT_S,
                 copy_fence_timeout_s: float = COPY_FENCE_TIMEOUT_S):
        self.pixel_format = pixel_format if isinstance(pixel_format, PixelFormat) else parse_pixel_format(pixel_format)
        self.bitdepth = self.pixel_format.fixed_bitdepth() or bitdepth or 8
        self.width, self.height = width, height
        self.planes = plane_formats(self.pixel_format, width, height, self.bitdepth)
        if not isinstance(device, DaemonDevice):
            raise GlInvalid("device", f"expected a DaemonDevice, got {type(device).__name__}")
        self.device = device
        self.flags = int(flags)
        if path == "auto":
            path = "memory_object" if device.lane == "cuda" else "dmabuf"
        if path not in ("dmabuf", "memory_object"):
            raise GlInvalid("path", f"{path!r} is not auto, dmabuf or memory_object")
        self.path = path
        self._producer_arg = producer
        self._memory_arg = memory
        self._trace_cb = trace
        self.implicit_fence_timeout_s = implicit_fence_timeout_s
        self.copy_fence_timeout_s = copy_fence_timeout_s
        # what is mutable is made per exporter (the rest of the state starts as the class says)
        self._in_place: dict[tuple[int, ...], tuple[FrameBuffer, list[_DmabufExport]]] = {}
        self._blit_textures: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._linear: list[_LinearPlane] = []
        self._handed_out: set[int] = set()

    # -- bookkeeping ------------------------------------------------------------------------

    def _trace(self, msg: str) -> None:
        log.debug("%s", msg)
        if self._trace_cb is not None:
            self._trace_cb(f"[vmafx.gl] {msg}")

    def _check_open(self) -> None:
        if self._closed:
            raise GlWrongState("exporter", "the exporter is closed")

    def _check_context(self) -> tuple[_Library, _GlContextInfo]:
        dpy, ctx = current_egl()
        if self.context is None:
            self.display, self.context = dpy, ctx
            gl = _gl()
            self._info = _gl_context_info(gl)
            self._trace(f"context 0x{ctx:x} on display 0x{dpy:x}: GL {self._info.version_string} "
                        f"({self._info.renderer}, {self._info.vendor})")
        elif ctx != self.context or dpy != self.display:
            raise GlWrongState("context", "another EGL context is current than the one this exporter was first "
                               "used with; make the producer's context current")
        assert self._info is not None
        return _gl(), self._info

    @property
    def memory(self) -> Any:
        """The memory-object path's device buffer (a VmmFrameBuffer), once set up."""
        return self._memory

    @property
    def in_flight(self) -> bool:
        """A copied frame was handed out and not yet marked released."""
        return self._in_flight

    def mark_released(self) -> None:
        """The daemon released every frame that references the buffer: it may be written again."""
        self._in_flight = False

    # -- per frame ---------------------------------------------------------------------------

    def export(self, textures: Sequence[int], *, sync: Any = None) -> GlFrame:
        """Export one frame's plane textures (``textures[i]`` holds stored plane ``i``).

        ``sync``: the producer's acquire (a GLsync or :class:`EglSync`), checked
        on the host first -- unsignalled raises :class:`GlBusy` and the caller
        retries (:func:`wait_sync_acquire`).
        """
        self._check_open()
        check_sync_acquire(sync)  # R11 / ADR-2132 item 5: the host check comes first, before any GL work
        gl, info = self._check_context()
        texs = self._texture_names(textures)
        if self._in_flight:
            raise GlBusy("buffer", f"the exporter's {self.path} buffer still holds a frame the daemon has not "
                         "released; wait for its release and call mark_released()")
        with _KeepProducerState(gl, info):
            self._check_textures(gl, info, texs)
            if not self._ready:
                self._setup(gl, info)
            if self.path == "memory_object":
                frame = self._export_memory_object(gl, texs)
            else:
                frame = self._export_dmabuf(gl, info, texs)
        if frame.copied:
            self._in_flight = True
        key = id(frame.buffer)
        frame.new_buffer = key not in self._handed_out
        self._handed_out.add(key)
        return frame

    def _texture_names(self, textures: Sequence[int]) -> tuple[int, ...]:
        textures = list(textures)
        if len(textures) != len(self.planes):
            raise GlInvalid("planes", f"{self.pixel_format.value} stores {len(self.planes)} planes, got "
                            f"{len(textures)} textures")
        out = []
        for i, t in enumerate(textures):
            try:
                t = int(t)
            except (TypeError, ValueError):
                raise GlInvalid(f"planes[{i}]", f"{t!r} is not a texture name") from None
            if t <= 0:
                raise GlInvalid(f"planes[{i}]", f"{t} is not a texture name")
            out.append(t)
        return tuple(out)

    def _check_textures(self, gl: _Library, info: _GlContextInfo, texs: tuple[int, ...]) -> None:
        """R11: each texture is a 2-D texture of the plane's size whose internal format is the plane's."""
        for i, (tex, (shape, pf)) in enumerate(zip(texs, self.planes)):
            where = f"planes[{i}]"
            if not gl.glIsTexture(tex):
                raise GlInvalid(where, f"{tex} is not a texture of the current context")
            v = _i(0)
            if info.dsa:
                gl.glGetTextureParameteriv(tex, GL_TEXTURE_TARGET, ctypes.byref(v))
                _gl_check(gl, "glGetTextureParameteriv(GL_TEXTURE_TARGET)", where, invalid=True)
                if v.value != GL_TEXTURE_2D:
                    raise GlInvalid(where, f"texture {tex} is not a GL_TEXTURE_2D (target 0x{v.value:x})")

                def level(pname: int) -> int:
                    gl.glGetTextureLevelParameteriv(tex, 0, pname, ctypes.byref(v))
                    return v.value
            else:
                # Without DSA the texture is bound on the active unit to be asked; the
                # state guard puts the producer's binding back.
                gl.glBindTexture(GL_TEXTURE_2D, tex)
                if _gl_errors(gl):
                    raise GlInvalid(where, f"texture {tex} is not a GL_TEXTURE_2D")

                def level(pname: int) -> int:
                    gl.glGetTexLevelParameteriv(GL_TEXTURE_2D, 0, pname, ctypes.byref(v))
                    return v.value
            internal, w, h = level(GL_TEXTURE_INTERNAL_FORMAT), level(GL_TEXTURE_WIDTH), level(GL_TEXTURE_HEIGHT)
            _gl_check(gl, "glGetTextureLevelParameteriv", where, invalid=True)
            if internal != pf.gl_internal:
                raise GlInvalid(where, f"texture {tex} has internal format "
                                f"{_GL_FORMAT_NAMES.get(internal, hex(internal))}, but plane {i} of "
                                f"{self.pixel_format.value} is {pf.name} ({_GL_FORMAT_NAMES[pf.gl_internal]})")
            if (w, h) != (shape.width, shape.height):
                raise GlInvalid(where, f"texture {tex} is {w}x{h}, but plane {i} of a {self.width}x{self.height} "
                                f"{self.pixel_format.value} frame is {shape.width}x{shape.height}")

    def _setup(self, gl: _Library, info: _GlContextInfo) -> None:
        try:
            if self.path == "dmabuf":
                self._setup_dmabuf()
            else:
                self._setup_memory_object(gl, info)
            fb = _u(0)
            gl.glGenFramebuffers(1, ctypes.byref(fb))
            self._read_fbo = fb.value
        except BaseException:
            # A refused setup leaves nothing behind: the next export starts from scratch.
            self._release(gl_current=True)
            raise
        self._ready = True

    # -- both paths ---------------------------------------------------------------------------------

    def _require_complete(self, gl: _Library, i: int, tex: int) -> None:
        status = gl.glCheckFramebufferStatus(GL_READ_FRAMEBUFFER)
        _gl_check(gl, f"attaching texture {tex}", f"planes[{i}]", invalid=True)
        if status != GL_FRAMEBUFFER_COMPLETE:
            raise GlInvalid(f"planes[{i}]", f"texture {tex} cannot be read through a framebuffer (status 0x{status:x})")

    def _wait_copy_fence(self, gl: _Library) -> None:
        """A GL fence after our copies, waited for on the host (bounded): the rows are written when it returns."""
        sync = gl.glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0)
        if not sync:
            _gl_check(gl, "glFenceSync", "fence")
            raise GlNotSupported("fence", "glFenceSync returned no sync")
        try:
            end = time.monotonic() + self.copy_fence_timeout_s
            flags = GL_SYNC_FLUSH_COMMANDS_BIT
            while True:
                left = end - time.monotonic()
                r = gl.glClientWaitSync(sync, flags, max(0, int(min(left, 0.1) * 1e9)))
                flags = 0
                if r in (GL_ALREADY_SIGNALED, GL_CONDITION_SATISFIED):
                    return
                if r == GL_WAIT_FAILED:
                    _gl_check(gl, "glClientWaitSync", "fence")
                    raise GlNotSupported("fence", "glClientWaitSync failed")
                if left <= 0:
                    raise GlTimeout("fence", f"the GPU copy did not finish within {self.copy_fence_timeout_s:g} s")
        finally:
            gl.glDeleteSync(sync)

    # -- teardown ------------------------------------------------------------------------------------

    def _close_held(self, *names: str) -> None:
        """Close and forget what each of these attributes holds (None: nothing)."""
        for name in names:
            held = getattr(self, name)
            if held is not None:
                held.close()
                setattr(self, name, None)

    def _release(self, *, gl_current: bool) -> None:
        """Everything the exporter made; GL objects only when its context is current."""
        if gl_current:
            gl = _gl()
            if self._read_fbo:
                gl.glDeleteFramebuffers(1, (_u * 1)(self._read_fbo))
            if self._pack_buffer:
                gl.glDeleteBuffers(1, (_u * 1)(self._pack_buffer))
            if self._memory_object:
                # Deleting the memory object closes the dup GL took at the import.
                gl.glDeleteMemoryObjectsEXT(1, (_u * 1)(self._memory_object))
        self._read_fbo = self._pack_buffer = self._memory_object = 0
        self._free_linear(gl_current=gl_current)
        for buf, exports in self._in_place.values():
            buf.close()
            for e in exports:
                e.fd.close()
        self._in_place.clear()
        self._blit_textures.clear()
        self._close_held("_vmm_buffer")
        self._memory = None
        self._close_held("_own_memory", "_own_producer")
        self._ready = False

    def close(self) -> None:
        """Free what the exporter made.  GL objects need the exporter's context current (else they are
        left to the context's destruction, logged); fds, GBM and CUDA memory are freed regardless.  Safe twice."""
        if self._closed:
            return
        self._closed = True
        lib = _libs.get("egl")
        current = bool(lib) and self.context is not None and lib.eglGetCurrentContext() == self.context
        if self.context is not None and not current:
            log.warning("GlFrameExporter.close() without its context current: its GL objects stay until the "
                        "context is destroyed")
        if current:
            assert self._info is not None
            with _KeepProducerState(_gl(), self._info):
                self._release(gl_current=True)
        else:
            self._release(gl_current=False)



def export_texture_planes(textures: Sequence[int], width: int, height: int,
                          pixel_format: PixelFormat | str = PixelFormat.YUV420P, bitdepth: int | None = None, *,
                          device: DaemonDevice, flags: int = 0, path: str = "auto", sync: Any = None,
                          producer: Any = None, memory: Any = None,
                          trace: Callable[[str], None] | None = None) -> GlFrame:
    """Export one frame's plane textures of the current EGL context (a one-shot :class:`GlFrameExporter`).

    The returned frame owns its exporter: ``frame.close()`` frees it (after the
    daemon has registered the buffer -- the daemon keeps its own duplicate).  A
    producer exporting frame after frame keeps one :class:`GlFrameExporter`.
    """
    exporter = GlFrameExporter(width, height, pixel_format, bitdepth, device=device, flags=flags, path=path,
                               producer=producer, memory=memory, trace=trace)
    try:
        frame = exporter.export(textures, sync=sync)
    except BaseException:
        exporter.close()
        raise
    frame.owner = exporter
    return frame
