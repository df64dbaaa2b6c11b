"""GL producers: hand the textures of an EGL context to vmafxd without a host copy.

Capture tools (OBS) and compositors hold frames as GL textures, one texture per
stored plane (``R8``, ``GR88``, ``R16``, ``GR1616``).  :class:`GlFrameExporter`
(or the one-shot :func:`export_texture_planes`) turns the textures of the EGL
context current on the calling thread into a :class:`~vmafx.frames.FrameBuffer`
the client registers, by one of two paths:

``dmabuf`` -- the decision of ADR-2132 and design rule R11, every point:
  each texture is exported through ``EGL_MESA_image_dma_buf_export`` (absent:
  ``E_NOTSUP`` naming the extension); the context's display is resolved to its
  DRM render node (``EGL_EXT_device_query``; a display without a DRM device is
  *refused*, the check is never skipped); the render node's PCI location
  (``/sys/dev/char/MAJ:MIN/device``) must be the daemon device's (the
  ``pci`` of ``hello_reply``'s lanes), else ``E_NOTSUP`` naming ``device``.
  A linear export is read in place; a tiled or ``DRM_FORMAT_MOD_INVALID``
  export (radeonsi exports its own tiling and says INVALID: 97 % of samples
  read wrong as linear rows, ADR-2132) is copied on the GPU by one
  ``glBlitFramebuffer`` per plane inside the producer's context into a linear
  dma-buf allocated with GBM on that render node and bound as a renderbuffer
  through an EGL image -- only with ``ALLOW_COPY`` (else ``E_NOTSUP`` naming
  ``flags``).  After the export each dma-buf's implicit fences (the GL
  driver's pending writes) are waited for, at most 1 s, by polling its fd.

``memory_object`` -- the measured NVIDIA alternative (R11's last sentence,
  PLATFORM.md): on the H200 the display advertises the dma-buf export but has
  no DRM device (the export fails ``EGL_BAD_MATCH``), and CUDA cannot import a
  dma-buf anyway.  So a CUDA VMM buffer (:class:`~vmafx.cuda_frames.VmmFrameBuffer`,
  the zero-copy kind the cuda lane imports) is exported as a POSIX fd and
  imported into GL (``GL_EXT_memory_object_fd``: ``glCreateMemoryObjectsEXT``,
  ``GL_DEDICATED_MEMORY_OBJECT_EXT``, ``glImportMemoryFdEXT`` of a ``dup``,
  ``glNamedBufferStorageMemEXT``); per plane ``glReadPixels`` of the texture
  writes its linear rows into that buffer bound as ``GL_PIXEL_PACK_BUFFER``
  at the plane's offset and pitch, and a GL fence is waited for (bounded) so
  the rows are written before the daemon reads.  It is a GPU copy, so it
  needs ``ALLOW_COPY`` too.  The same VMM buffer is reused frame after frame:
  :meth:`GlFrameExporter.export` refuses (``E_BUSY`` naming ``buffer``) to
  write it again before :meth:`GlFrameExporter.mark_released` says the
  daemon released the previous frame.

In both paths the GL sync acquire is checked on the host first
(:func:`check_sync_acquire`: ``glClientWaitSync(sync, 0, 0)``, or
``eglClientWaitSyncKHR`` for an :class:`EglSync`; unsignalled is ``E_BUSY`` and
the caller retries, :func:`wait_sync_acquire` is that retry loop with a
deadline), and **the producer's GL state is restored** -- framebuffer
bindings (draw, read), renderbuffer binding, scissor test, colour mask,
pixel-pack buffer binding and pack state, read buffer, the 2-D texture
binding -- after success and after every refusal (:func:`gl_state_snapshot`
returns that state so tests compare before and after).

Why gl.py resolves its own entry points (``eglGetProcAddress`` on
``libEGL.so.1``, GBM through ``libgbm.so.1``) instead of calling through
PyOpenGL's wrappers, as the ADR's C code does: PyOpenGL calls ``glGetError``
after every call (which would eat errors the *producer* has pending and hide
which of our calls failed), converts and allocates arrays (``glReadPixels``
into a pack buffer needs the raw offset form), and picks its GL library by
``PYOPENGL_PLATFORM`` -- which in a producer such as OBS need not be the
loader of the context that is actually current.  The GL entry points we get
from EGL are the ones of the current EGL context's dispatch (GLVND or Mesa).
Tests and ``scripts/gl_score.py`` *are* PyOpenGL producers (the ``gl``
extra); they render with it and hand their texture names here.

Every fd has one owner: exported dma-bufs and GBM buffers are
:class:`~vmafx.transport.OwnedFd` objects of the exporter (the
:class:`~vmafx.frames.FrameBuffer` it returns borrows them); the ``dup``
given to ``glImportMemoryFdEXT`` belongs to GL once the import succeeded
(EXT_external_objects_fd) and is closed by us when it failed.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import select
import stat
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Sequence

from .exceptions import LayoutError, VmafxError
from .formats import PixelFormat, PlaneShape, parse_pixel_format, storage_planes
from .frames import ALLOW_COPY, BorrowedFd, FrameBuffer, wrap_dmabuf
from .protocol.errors import ErrorCode
from .protocol.messages import Plane
from .transport import ClosedOnExit, OwnedFd

__all__ = [
    "GlExportError", "GlNotSupported", "GlBusy", "GlTimeout", "GlWrongState", "GlInvalid",
    "PlaneFormat", "PLANE_FORMATS", "plane_formats", "DaemonDevice",
    "EglSync", "check_sync_acquire", "wait_sync_acquire", "gl_state_snapshot",
    "current_egl", "EglDisplayInfo", "egl_display_info", "require_dma_buf_export", "display_render_node",
    "render_node_pci", "pci_location_of_char_device", "require_same_device", "same_pci",
    "GlFrame", "GlFrameExporter", "export_texture_planes", "EglOffscreenContext",
    "DRM_FORMAT_MOD_LINEAR", "DRM_FORMAT_MOD_INVALID", "IMPLICIT_FENCE_TIMEOUT_S",
]

log = logging.getLogger("vmafx.gl")

#: ADR-2132 item 5 / R11: after the export, each dma-buf's implicit fences are waited for at most 1 s
IMPLICIT_FENCE_TIMEOUT_S = 1.0
#: the bounded wait for our own GL fence after the blit / the readbacks
COPY_FENCE_TIMEOUT_S = 1.0


# ---------------------------------------------------------------------------------------------- errors

class GlExportError(VmafxError):
    """A GL export refused in the producer's process (never the daemon's doing): code, field, message."""

    CODE: ClassVar[ErrorCode] = ErrorCode.E_INTERNAL

    def __init__(self, field: str, message: str):
        VmafxError.__init__(self, self.CODE, field, message)


class GlNotSupported(GlExportError):
    """E_NOTSUP: valid, but this display, driver or flag set cannot do it; ``field`` names what is missing."""

    CODE = ErrorCode.E_NOTSUP


class GlBusy(GlExportError):
    """E_BUSY: the acquire sync has not signalled (or the buffer is not released yet): try again."""

    CODE = ErrorCode.E_BUSY


class GlTimeout(GlExportError):
    """E_TIMEOUT: a bounded wait (acquire sync, copy fence, implicit dma-buf fences) ran out."""

    CODE = ErrorCode.E_TIMEOUT


class GlWrongState(GlExportError):
    """E_STATE: no EGL context is current, or not the exporter's, or the exporter is closed."""

    CODE = ErrorCode.E_STATE


class GlInvalid(GlExportError, LayoutError):
    """E_INVAL: a texture (``planes[i]``), sync or layout the caller gave is wrong.  Also a LayoutError."""

    CODE = ErrorCode.E_INVAL


# ------------------------------------------------------------------------------------------- constants

# GL (values from the Khronos registry's gl.xml)
GL_NO_ERROR = 0
GL_INVALID_ENUM, GL_INVALID_VALUE, GL_INVALID_OPERATION = 0x0500, 0x0501, 0x0502
GL_OUT_OF_MEMORY, GL_INVALID_FRAMEBUFFER_OPERATION = 0x0505, 0x0506
GL_VENDOR, GL_RENDERER, GL_VERSION, GL_EXTENSIONS = 0x1F00, 0x1F01, 0x1F02, 0x1F03
GL_NUM_EXTENSIONS, GL_MAJOR_VERSION, GL_MINOR_VERSION = 0x821D, 0x821B, 0x821C
GL_TEXTURE_2D = 0x0DE1
GL_TEXTURE_WIDTH, GL_TEXTURE_HEIGHT, GL_TEXTURE_INTERNAL_FORMAT, GL_TEXTURE_TARGET = 0x1000, 0x1001, 0x1003, 0x1006
GL_TEXTURE_BINDING_2D, GL_ACTIVE_TEXTURE = 0x8069, 0x84E0
GL_R8, GL_R16, GL_RG8, GL_RG16 = 0x8229, 0x822A, 0x822B, 0x822C
GL_RED, GL_RG = 0x1903, 0x8227
GL_UNSIGNED_BYTE, GL_UNSIGNED_SHORT = 0x1401, 0x1403
GL_FRAMEBUFFER, GL_READ_FRAMEBUFFER, GL_DRAW_FRAMEBUFFER = 0x8D40, 0x8CA8, 0x8CA9
GL_READ_FRAMEBUFFER_BINDING, GL_DRAW_FRAMEBUFFER_BINDING = 0x8CAA, 0x8CA6
GL_RENDERBUFFER, GL_RENDERBUFFER_BINDING = 0x8D41, 0x8CA7
GL_COLOR_ATTACHMENT0, GL_FRAMEBUFFER_COMPLETE = 0x8CE0, 0x8CD5
GL_SCISSOR_TEST, GL_COLOR_WRITEMASK = 0x0C11, 0x0C23
GL_MAX_DRAW_BUFFERS, GL_MAX_VIEWPORTS = 0x8824, 0x825B
GL_READ_BUFFER = 0x0C02
GL_PIXEL_PACK_BUFFER, GL_PIXEL_PACK_BUFFER_BINDING = 0x88EB, 0x88ED
GL_PACK_SWAP_BYTES, GL_PACK_LSB_FIRST, GL_PACK_ROW_LENGTH = 0x0D00, 0x0D01, 0x0D02
GL_PACK_SKIP_ROWS, GL_PACK_SKIP_PIXELS, GL_PACK_ALIGNMENT = 0x0D03, 0x0D04, 0x0D05
GL_PACK_SKIP_IMAGES, GL_PACK_IMAGE_HEIGHT = 0x806B, 0x806C
GL_COLOR_BUFFER_BIT, GL_NEAREST = 0x4000, 0x2600
GL_SYNC_GPU_COMMANDS_COMPLETE, GL_SYNC_FLUSH_COMMANDS_BIT = 0x9117, 0x1
GL_ALREADY_SIGNALED, GL_TIMEOUT_EXPIRED, GL_CONDITION_SATISFIED, GL_WAIT_FAILED = 0x911A, 0x911B, 0x911C, 0x911D
GL_DEDICATED_MEMORY_OBJECT_EXT, GL_HANDLE_TYPE_OPAQUE_FD_EXT = 0x9581, 0x9586

_GL_ERRORS = {GL_INVALID_ENUM: "GL_INVALID_ENUM", GL_INVALID_VALUE: "GL_INVALID_VALUE",
              GL_INVALID_OPERATION: "GL_INVALID_OPERATION", GL_OUT_OF_MEMORY: "GL_OUT_OF_MEMORY",
              GL_INVALID_FRAMEBUFFER_OPERATION: "GL_INVALID_FRAMEBUFFER_OPERATION"}
_GL_FORMAT_NAMES = {GL_R8: "GL_R8", GL_RG8: "GL_RG8", GL_R16: "GL_R16", GL_RG16: "GL_RG16"}

# EGL
EGL_SUCCESS, EGL_NONE = 0x3000, 0x3038
EGL_VENDOR, EGL_VERSION, EGL_EXTENSIONS, EGL_CLIENT_APIS = 0x3053, 0x3054, 0x3055, 0x308D
EGL_OPENGL_API, EGL_OPENGL_BIT = 0x30A2, 0x0008
EGL_RENDERABLE_TYPE, EGL_SURFACE_TYPE, EGL_PBUFFER_BIT = 0x3040, 0x3033, 0x0001
EGL_CONTEXT_MAJOR_VERSION, EGL_CONTEXT_MINOR_VERSION = 0x3098, 0x30FB
EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT = 0x30FD, 0x1
EGL_DEVICE_EXT, EGL_DRM_DEVICE_FILE_EXT, EGL_DRM_RENDER_NODE_FILE_EXT = 0x322C, 0x3233, 0x3377
EGL_CUDA_DEVICE_NV = 0x323A
EGL_PLATFORM_DEVICE_EXT, EGL_PLATFORM_SURFACELESS_MESA = 0x313F, 0x31DD
EGL_GL_TEXTURE_2D_KHR, EGL_GL_TEXTURE_LEVEL_KHR = 0x30B1, 0x30BC
EGL_LINUX_DMA_BUF_EXT, EGL_LINUX_DRM_FOURCC_EXT = 0x3270, 0x3271
EGL_WIDTH, EGL_HEIGHT = 0x3057, 0x3056
EGL_DMA_BUF_PLANE0_FD_EXT, EGL_DMA_BUF_PLANE0_OFFSET_EXT, EGL_DMA_BUF_PLANE0_PITCH_EXT = 0x3272, 0x3273, 0x3274
EGL_DMA_BUF_PLANE0_MODIFIER_LO_EXT, EGL_DMA_BUF_PLANE0_MODIFIER_HI_EXT = 0x3443, 0x3444
EGL_SYNC_FENCE_KHR, EGL_SYNC_REUSABLE_KHR = 0x30F9, 0x30FA
EGL_SIGNALED_KHR, EGL_UNSIGNALED_KHR, EGL_SYNC_STATUS_KHR = 0x30F2, 0x30F3, 0x30F1
EGL_TIMEOUT_EXPIRED_KHR, EGL_CONDITION_SATISFIED_KHR = 0x30F5, 0x30F6
_EGL_ERRORS = {0x3000: "EGL_SUCCESS", 0x3001: "EGL_NOT_INITIALIZED", 0x3002: "EGL_BAD_ACCESS",
               0x3003: "EGL_BAD_ALLOC", 0x3004: "EGL_BAD_ATTRIBUTE", 0x3005: "EGL_BAD_CONFIG",
               0x3006: "EGL_BAD_CONTEXT", 0x3007: "EGL_BAD_CURRENT_SURFACE", 0x3008: "EGL_BAD_DISPLAY",
               0x3009: "EGL_BAD_MATCH", 0x300A: "EGL_BAD_NATIVE_PIXMAP", 0x300B: "EGL_BAD_NATIVE_WINDOW",
               0x300C: "EGL_BAD_PARAMETER", 0x300D: "EGL_BAD_SURFACE", 0x300E: "EGL_CONTEXT_LOST",
               0x322B: "EGL_BAD_DEVICE_EXT"}


def _fourcc(code: str) -> int:
    a, b, c, d = (ord(ch) for ch in code)
    return a | b << 8 | c << 16 | d << 24


def _fourcc_name(v: int) -> str:
    s = "".join(chr((v >> s) & 0xFF) for s in (0, 8, 16, 24))
    return s if s.isprintable() else hex(v)


DRM_FORMAT_R8, DRM_FORMAT_GR88 = _fourcc("R8  "), _fourcc("GR88")
DRM_FORMAT_R16, DRM_FORMAT_GR1616 = _fourcc("R16 "), _fourcc("GR32")
DRM_FORMAT_MOD_LINEAR = 0
DRM_FORMAT_MOD_INVALID = 0x00FFFFFFFFFFFFFF
GBM_BO_USE_RENDERING, GBM_BO_USE_LINEAR = 1 << 2, 1 << 4


# ---------------------------------------------------------------------------------------- plane formats

@dataclass(frozen=True)
class PlaneFormat:
    """One stored plane's texture format, as GL, ``glReadPixels`` and DRM spell it."""

    name: str
    gl_internal: int
    gl_format: int
    gl_type: int
    drm_fourcc: int
    bytes_per_pixel: int
    bytes_per_sample: int


#: by (bytes per sample, components): 8-bit Y/Cb/Cr -> R8, NV12 CbCr -> GR88 (byte 0 is R = Cb),
#: 10..16-bit -> R16, P010 CbCr -> GR1616.  R11: the texture's format must be the plane's.
PLANE_FORMATS: dict[tuple[int, int], PlaneFormat] = {
    (1, 1): PlaneFormat("R8", GL_R8, GL_RED, GL_UNSIGNED_BYTE, DRM_FORMAT_R8, 1, 1),
    (1, 2): PlaneFormat("GR88", GL_RG8, GL_RG, GL_UNSIGNED_BYTE, DRM_FORMAT_GR88, 2, 1),
    (2, 1): PlaneFormat("R16", GL_R16, GL_RED, GL_UNSIGNED_SHORT, DRM_FORMAT_R16, 2, 2),
    (2, 2): PlaneFormat("GR1616", GL_RG16, GL_RG, GL_UNSIGNED_SHORT, DRM_FORMAT_GR1616, 4, 2),
}


def plane_formats(pixel_format: PixelFormat | str, width: int, height: int,
                  bitdepth: int | None = None) -> list[tuple[PlaneShape, PlaneFormat]]:
    """Each stored plane's shape and the texture format it must have."""
    fmt = pixel_format if isinstance(pixel_format, PixelFormat) else parse_pixel_format(pixel_format)
    depth = fmt.fixed_bitdepth() or bitdepth or 8
    return [(s, PLANE_FORMATS[(s.bytes_per_sample, s.components)]) for s in storage_planes(fmt, width, height, depth)]


# ------------------------------------------------------------------------------------- entry points

_vp, _u, _i, _u8, _u64, _sz = (ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_ubyte, ctypes.c_uint64,
                               ctypes.c_ssize_t)
_P = ctypes.POINTER
_cs = ctypes.c_char_p

#: EGL 1.4 core, looked up in libEGL.so.1 itself: (restype, *argtypes)
_EGL_CORE = {
    "eglGetError": (_i,),
    "eglGetProcAddress": (_vp, _cs),
    "eglQueryString": (_cs, _vp, _i),
    "eglGetCurrentDisplay": (_vp,),
    "eglGetCurrentContext": (_vp,),
    "eglGetDisplay": (_vp, _vp),
    "eglInitialize": (_u, _vp, _P(_i), _P(_i)),
    "eglBindAPI": (_u, _u),
    "eglChooseConfig": (_u, _vp, _P(_i), _P(_vp), _i, _P(_i)),
    "eglCreateContext": (_vp, _vp, _vp, _vp, _P(_i)),
    "eglDestroyContext": (_u, _vp, _vp),
    "eglMakeCurrent": (_u, _vp, _vp, _vp, _vp),
}
#: EGL extensions, resolved through eglGetProcAddress
_EGL_EXT = {
    "eglGetPlatformDisplayEXT": (_vp, _u, _vp, _P(_i)),
    "eglQueryDevicesEXT": (_u, _i, _P(_vp), _P(_i)),
    "eglQueryDeviceStringEXT": (_cs, _vp, _i),
    "eglQueryDeviceAttribEXT": (_u, _vp, _i, _P(_sz)),
    "eglQueryDisplayAttribEXT": (_u, _vp, _i, _P(_sz)),
    "eglCreateImageKHR": (_vp, _vp, _vp, _u, _vp, _P(_i)),
    "eglDestroyImageKHR": (_u, _vp, _vp),
    "eglExportDMABUFImageQueryMESA": (_u, _vp, _vp, _P(_i), _P(_i), _P(_u64)),
    "eglExportDMABUFImageMESA": (_u, _vp, _vp, _P(_i), _P(_i), _P(_i)),
    "eglCreateSyncKHR": (_vp, _vp, _u, _P(_i)),
    "eglDestroySyncKHR": (_u, _vp, _vp),
    "eglClientWaitSyncKHR": (_i, _vp, _vp, _i, _u64),
    "eglSignalSyncKHR": (_u, _vp, _vp, _u),
    "eglGetSyncAttribKHR": (_u, _vp, _vp, _i, _P(_i)),
}
#: GL (core 3.x/4.x and the extensions used), resolved through eglGetProcAddress
_GL_FUNCS = {
    "glGetError": (_u,),
    "glGetString": (_cs, _u),
    "glGetStringi": (_cs, _u, _u),
    "glGetIntegerv": (None, _u, _P(_i)),
    "glGetBooleanv": (None, _u, _P(_u8)),
    "glGetBooleani_v": (None, _u, _u, _P(_u8)),
    "glIsEnabled": (_u8, _u),
    "glIsEnabledi": (_u8, _u, _u),
    "glEnable": (None, _u),
    "glDisable": (None, _u),
    "glEnablei": (None, _u, _u),
    "glDisablei": (None, _u, _u),
    "glColorMask": (None, _u8, _u8, _u8, _u8),
    "glColorMaski": (None, _u, _u8, _u8, _u8, _u8),
    "glActiveTexture": (None, _u),
    "glBindTexture": (None, _u, _u),
    "glIsTexture": (_u8, _u),
    "glGetTexLevelParameteriv": (None, _u, _i, _u, _P(_i)),
    "glGetTextureLevelParameteriv": (None, _u, _i, _u, _P(_i)),
    "glGetTextureParameteriv": (None, _u, _u, _P(_i)),
    "glGenFramebuffers": (None, _i, _P(_u)),
    "glDeleteFramebuffers": (None, _i, _P(_u)),
    "glBindFramebuffer": (None, _u, _u),
    "glFramebufferTexture2D": (None, _u, _u, _u, _u, _i),
    "glFramebufferRenderbuffer": (None, _u, _u, _u, _u),
    "glCheckFramebufferStatus": (_u, _u),
    "glReadBuffer": (None, _u),
    "glDrawBuffers": (None, _i, _P(_u)),
    "glGenRenderbuffers": (None, _i, _P(_u)),
    "glDeleteRenderbuffers": (None, _i, _P(_u)),
    "glBindRenderbuffer": (None, _u, _u),
    "glBlitFramebuffer": (None, _i, _i, _i, _i, _i, _i, _i, _i, _u, _u),
    "glGenBuffers": (None, _i, _P(_u)),
    "glDeleteBuffers": (None, _i, _P(_u)),
    "glBindBuffer": (None, _u, _u),
    "glPixelStorei": (None, _u, _i),
    "glReadPixels": (None, _i, _i, _i, _i, _u, _u, _vp),
    "glFenceSync": (_vp, _u, _u),
    "glClientWaitSync": (_u, _vp, _u, _u64),
    "glDeleteSync": (None, _vp),
    "glIsSync": (_u8, _vp),
    "glFlush": (None,),
    # GL_EXT_memory_object / GL_EXT_memory_object_fd
    "glCreateMemoryObjectsEXT": (None, _i, _P(_u)),
    "glDeleteMemoryObjectsEXT": (None, _i, _P(_u)),
    "glIsMemoryObjectEXT": (_u8, _u),
    "glMemoryObjectParameterivEXT": (None, _u, _u, _P(_i)),
    "glImportMemoryFdEXT": (None, _u, _u64, _u, _i),
    "glNamedBufferStorageMemEXT": (None, _u, _sz, _u, _u64),
    # GL_OES_EGL_image
    "glEGLImageTargetRenderbufferStorageOES": (None, _u, _vp),
}
_GBM_FUNCS = {
    "gbm_create_device": (_vp, _i),
    "gbm_device_destroy": (None, _vp),
    "gbm_bo_create": (_vp, _vp, _u, _u, _u, _u),
    "gbm_bo_create_with_modifiers": (_vp, _vp, _u, _u, _u, _P(_u64), _u),
    "gbm_bo_get_fd": (_i, _vp),
    "gbm_bo_get_stride": (_u, _vp),
    "gbm_bo_get_offset": (_u, _vp, _i),
    "gbm_bo_get_modifier": (_u64, _vp),
    "gbm_bo_destroy": (None, _vp),
}


class _Library:
    """Entry points resolved once, at run time (ADR-2132 item 1); attribute access gives the function."""

    def __init__(self, what: str, table: dict, lookup: Callable[[str], int | None]):
        self._what = what
        self._table = table
        self._lookup = lookup
        self._cache: dict[str, Any] = {}

    def has(self, name: str) -> bool:
        try:
            getattr(self, name)
            return True
        except GlNotSupported:
            return False

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        fn = self._cache.get(name)
        if fn is None:
            proto = self._table.get(name)
            if proto is None:
                raise AttributeError(f"{self._what} has no prototype for {name}")
            addr = self._lookup(name)
            if not addr:
                raise GlNotSupported(name, f"{self._what} does not provide {name}")
            fn = ctypes.CFUNCTYPE(proto[0], *proto[1:])(addr)
            self._cache[name] = fn
        return fn


_libs: dict[str, Any] = {}


def _egl_lib() -> ctypes.CDLL:
    lib = _libs.get("egl")
    if lib is None:
        try:
            lib = ctypes.CDLL("libEGL.so.1", mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            raise GlNotSupported("libEGL.so.1", f"cannot load EGL ({e}); install libegl1 (GLVND) and a vendor "
                                 "EGL (Mesa's libegl-mesa0, or NVIDIA's libEGL_nvidia)") from None
        for name, proto in _EGL_CORE.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = proto[0], list(proto[1:])
        _libs["egl"] = lib
    return lib


def _egl() -> _Library:
    e = _libs.get("egl_ext")
    if e is None:
        lib = _egl_lib()

        def lookup(name: str) -> int | None:
            if name in _EGL_CORE:
                return ctypes.cast(getattr(lib, name), _vp).value
            return lib.eglGetProcAddress(name.encode())

        e = _libs["egl_ext"] = _Library("EGL", {**_EGL_CORE, **_EGL_EXT}, lookup)
    return e


def _gl() -> _Library:
    g = _libs.get("gl")
    if g is None:
        lib = _egl_lib()
        fallbacks: list[ctypes.CDLL] = []

        def lookup(name: str) -> int | None:
            # EGL 1.5 (and EGL_KHR_get_all_proc_addresses) returns core GL functions too; where an
            # implementation does not, the GL library's own symbol is the same dispatch stub.
            addr = lib.eglGetProcAddress(name.encode())
            if addr:
                return addr
            if not fallbacks:
                for soname in ("libOpenGL.so.0", "libGL.so.1"):
                    try:
                        fallbacks.append(ctypes.CDLL(soname, mode=ctypes.RTLD_GLOBAL))
                    except OSError:
                        pass
            for fb in fallbacks:
                try:
                    return ctypes.cast(getattr(fb, name), _vp).value
                except AttributeError:
                    continue
            return None

        g = _libs["gl"] = _Library("GL", _GL_FUNCS, lookup)
    return g


def _gbm() -> _Library:
    g = _libs.get("gbm")
    if g is None:
        try:
            lib = ctypes.CDLL("libgbm.so.1")
        except OSError as e:
            raise GlNotSupported("libgbm.so.1", f"cannot load GBM ({e}); a tiled export needs it to allocate the "
                                 "linear copy (ADR-2132 item 2): install libgbm1") from None

        def lookup(name: str) -> int | None:
            try:
                return ctypes.cast(getattr(lib, name), _vp).value
            except AttributeError:
                return None

        g = _libs["gbm"] = _Library("libgbm.so.1", _GBM_FUNCS, lookup)
    return g


def _egl_error() -> str:
    code = _egl().eglGetError()
    return _EGL_ERRORS.get(code, hex(code))


def _gl_errors(gl: _Library) -> list[str]:
    """Drain the GL error flags (there may be several)."""
    out = []
    for _ in range(16):
        e = gl.glGetError()
        if e == GL_NO_ERROR:
            break
        out.append(_GL_ERRORS.get(e, hex(e)))
    return out


def _gl_check(gl: _Library, step: str, field: str, *, invalid: bool = False) -> None:
    errs = _gl_errors(gl)
    if errs:
        cls = GlInvalid if invalid else GlNotSupported
        raise cls(field, f"{step} failed with {', '.join(errs)}")


def _ints(*values: int):
    return (_i * len(values))(*values)


def _get_int(gl: _Library, pname: int) -> int:
    v = _i(0)
    gl.glGetIntegerv(pname, ctypes.byref(v))
    return v.value


def _gl_extensions(gl: _Library) -> frozenset[str]:
    n = _get_int(gl, GL_NUM_EXTENSIONS)
    return frozenset((gl.glGetStringi(GL_EXTENSIONS, i) or b"").decode() for i in range(n))


@dataclass(frozen=True)
class _GlContextInfo:
    version: tuple[int, int]
    version_string: str
    renderer: str
    vendor: str
    extensions: frozenset[str]

    @property
    def dsa(self) -> bool:
        return self.version >= (4, 5) or "GL_ARB_direct_state_access" in self.extensions

    @property
    def viewport_array(self) -> bool:
        return self.version >= (4, 1) or "GL_ARB_viewport_array" in self.extensions


def _gl_context_info(gl: _Library) -> _GlContextInfo:
    version = (gl.glGetString(GL_VERSION) or b"").decode(errors="replace")
    if version.startswith("OpenGL ES"):
        raise GlNotSupported("context", f"an OpenGL ES context ({version}); the exporter needs desktop GL 3.3+")
    info = _GlContextInfo((_get_int(gl, GL_MAJOR_VERSION), _get_int(gl, GL_MINOR_VERSION)), version,
                          (gl.glGetString(GL_RENDERER) or b"").decode(errors="replace"),
                          (gl.glGetString(GL_VENDOR) or b"").decode(errors="replace"), _gl_extensions(gl))
    if info.version < (3, 3):
        raise GlNotSupported("context", f"GL {version}; the exporter needs desktop GL 3.3+")
    return info


# ------------------------------------------------------------------------------------------ EGL context

def current_egl() -> tuple[int, int]:
    """(display, context) current on this thread, or ``E_STATE`` naming ``context``.

    R11 reads the textures of the *EGL* context current on the calling thread: a
    GLX context (or none) has no EGL display to export through.
    """
    lib = _egl_lib()
    ctx = lib.eglGetCurrentContext()
    dpy = lib.eglGetCurrentDisplay()
    if not ctx or not dpy:
        raise GlWrongState("context", "no EGL context is current on this thread (make the producer's EGL context "
                           "current; GLX contexts cannot be exported)")
    return dpy, ctx


def _client_extensions() -> frozenset[str]:
    s = _egl_lib().eglQueryString(None, EGL_EXTENSIONS)
    if not s:
        _egl_error()  # EGL_BAD_DISPLAY when client extensions are not supported: clear it
        return frozenset()
    return frozenset(s.decode().split())


def _display_extensions(display: int) -> frozenset[str]:
    s = _egl_lib().eglQueryString(display, EGL_EXTENSIONS)
    return frozenset((s or b"").decode().split())


@dataclass(frozen=True)
class EglDisplayInfo:
    """What an EGL display is and offers (printed by the tests and the script to diagnose a run)."""

    display: int
    vendor: str
    version: str
    client_apis: str
    extensions: frozenset[str]
    client_extensions: frozenset[str]
    device: int | None
    device_extensions: frozenset[str]
    drm_device_file: str | None
    drm_render_node: str | None
    cuda_device: int | None

    def describe(self) -> str:
        lines = [f"EGL display 0x{self.display:x}: vendor {self.vendor!r}, version {self.version!r}, "
                 f"client APIs {self.client_apis!r}",
                 f"  client extensions: {' '.join(sorted(self.client_extensions)) or '-'}",
                 f"  display extensions: {' '.join(sorted(self.extensions)) or '-'}",
                 f"  EGL device: {hex(self.device) if self.device else None}; device extensions: "
                 f"{' '.join(sorted(self.device_extensions)) or '-'}",
                 f"  DRM device file: {self.drm_device_file}; DRM render node: {self.drm_render_node}; "
                 f"CUDA device: {self.cuda_device}",
                 f"  EGL_MESA_image_dma_buf_export: {'EGL_MESA_image_dma_buf_export' in self.extensions}; "
                 f"EGL_EXT_image_dma_buf_import: {'EGL_EXT_image_dma_buf_import' in self.extensions}; "
                 f"EGL_KHR_reusable_sync: {'EGL_KHR_reusable_sync' in self.extensions}"]
        return "\n".join(lines)


def _query_device_string(dev: int, name: int) -> str | None:
    s = _egl().eglQueryDeviceStringEXT(dev, name)
    if not s:
        _egl_error()  # EGL_BAD_PARAMETER where the device has no such string: clear it
        return None
    return s.decode(errors="replace")


def _display_device(display: int) -> tuple[int | None, frozenset[str]]:
    """The display's EGLDevice and its extensions (EGL_EXT_device_query), or (None, {})."""
    if not ({"EGL_EXT_device_query", "EGL_EXT_device_base"} & _client_extensions()):
        return None, frozenset()
    dev = _sz(0)
    if not _egl().eglQueryDisplayAttribEXT(display, EGL_DEVICE_EXT, ctypes.byref(dev)) or not dev.value:
        _egl_error()
        return None, frozenset()
    return dev.value, frozenset((_query_device_string(dev.value, EGL_EXTENSIONS) or "").split())


def _device_cuda_ordinal(dev: int, exts: frozenset[str]) -> int | None:
    if "EGL_NV_device_cuda" not in exts:
        return None
    v = _sz(-1)
    if not _egl().eglQueryDeviceAttribEXT(dev, EGL_CUDA_DEVICE_NV, ctypes.byref(v)):
        _egl_error()
        return None
    return int(v.value)


def egl_display_info(display: int | None = None) -> EglDisplayInfo:
    """What the display (default: the current one) is; never raises for a missing device."""
    lib = _egl_lib()
    if display is None:
        display = current_egl()[0]
    q = lambda n: (lib.eglQueryString(display, n) or b"").decode(errors="replace")  # noqa: E731
    dev, dexts = _display_device(display)
    drm = node = None
    cuda = None
    if dev:
        if "EGL_EXT_device_drm" in dexts:
            drm = _query_device_string(dev, EGL_DRM_DEVICE_FILE_EXT)
        if "EGL_EXT_device_drm_render_node" in dexts:
            node = _query_device_string(dev, EGL_DRM_RENDER_NODE_FILE_EXT)
        cuda = _device_cuda_ordinal(dev, dexts)
    return EglDisplayInfo(display, q(EGL_VENDOR), q(EGL_VERSION), q(EGL_CLIENT_APIS), _display_extensions(display),
                          _client_extensions(), dev, dexts, drm, node, cuda)


# ------------------------------------------------------------------------- R11's checks, one function each

def require_dma_buf_export(display: int) -> None:
    """``E_NOTSUP`` naming ``EGL_MESA_image_dma_buf_export`` when the display cannot export dma-bufs (R11)."""
    exts = _display_extensions(display)
    if "EGL_MESA_image_dma_buf_export" not in exts:
        raise GlNotSupported("EGL_MESA_image_dma_buf_export",
                             "the EGL display does not offer EGL_MESA_image_dma_buf_export, so its textures cannot "
                             "be exported as dma-bufs (R11, ADR-2132)")
    if "EGL_KHR_image_base" not in exts or "EGL_KHR_gl_texture_2D_image" not in exts:
        raise GlNotSupported("EGL_KHR_gl_texture_2D_image",
                             "the EGL display cannot make an EGLImage of a GL texture (EGL_KHR_image_base, "
                             "EGL_KHR_gl_texture_2D_image), which the dma-buf export starts from")


def _render_node_of_primary(primary: str, sysfs_root: str = "/sys") -> str | None:
    try:
        st = os.stat(primary)
    except OSError:
        return None
    d = os.path.join(sysfs_root, "dev", "char", f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}", "device", "drm")
    try:
        nodes = sorted(n for n in os.listdir(d) if n.startswith("renderD"))
    except OSError:
        return None
    return f"/dev/dri/{nodes[0]}" if nodes else None


def display_render_node(display: int) -> str:
    """The DRM render node of the display's device, or ``E_NOTSUP`` naming ``display`` (R11, ADR-2132 item 4).

    A display without a DRM device (Mesa's software device; NVIDIA's device
    platform where no /dev/dri exists) is refused, not waved through: the GPU
    check and the GBM allocation both need the node.
    """
    if not ({"EGL_EXT_device_query", "EGL_EXT_device_base"} & _client_extensions()):
        raise GlNotSupported("display", "EGL_EXT_device_query is missing, so the display's DRM device cannot be "
                             "found; R11 refuses rather than skip the device check")
    dev, dexts = _display_device(display)
    if not dev:
        raise GlNotSupported("display", "the EGL display reports no EGL device (eglQueryDisplayAttribEXT("
                             "EGL_DEVICE_EXT) failed); R11 refuses a display without a DRM device")
    node = None
    if "EGL_EXT_device_drm_render_node" in dexts:
        node = _query_device_string(dev, EGL_DRM_RENDER_NODE_FILE_EXT)
    primary = _query_device_string(dev, EGL_DRM_DEVICE_FILE_EXT) if "EGL_EXT_device_drm" in dexts else None
    if not node and primary:
        node = _render_node_of_primary(primary)
    if not node:
        raise GlNotSupported("display", "the EGL display has no DRM device (device extensions: "
                             f"{' '.join(sorted(dexts)) or 'none'}; render node: none; DRM device file: {primary}); "
                             "R11 refuses a display without a DRM device")
    return node


_PCI_RE = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


def _pci_key(text: str) -> tuple[int, int, int, int] | None:
    m = _PCI_RE.match(text.strip()) if text else None
    if not m:
        return None
    dom, bus, dev, fn = m.groups()
    return int(dom or "0", 16), int(bus, 16), int(dev, 16), int(fn)


def same_pci(a: str, b: str) -> bool:
    """Whether two PCI locations name the same function ("0000:3B:00.0" == "00000000:3b:00.0")."""
    ka, kb = _pci_key(a), _pci_key(b)
    return ka is not None and ka == kb


def pci_location_of_char_device(major: int, minor: int, sysfs_root: str = "/sys") -> str:
    """The PCI location of a character device from ``/sys/dev/char/MAJ:MIN/device``, or ``E_NOTSUP`` naming ``device``."""
    link = os.path.join(sysfs_root, "dev", "char", f"{major}:{minor}", "device")
    if not os.path.exists(link):
        raise GlNotSupported("device", f"{link} does not exist: the device {major}:{minor} has no bus device, "
                             "so its PCI location is unknown")
    real = os.path.realpath(link)
    name = os.path.basename(real)
    if _pci_key(name) is None:
        raise GlNotSupported("device", f"the device {major}:{minor} is not a PCI device ({real})")
    return name


def render_node_pci(node: str, sysfs_root: str = "/sys") -> str:
    """The PCI location (``0000:3b:00.0``) of a DRM render node."""
    try:
        st = os.stat(node)
    except OSError as e:
        raise GlNotSupported("display", f"the render node {node} cannot be opened ({e.strerror})") from None
    if not stat.S_ISCHR(st.st_mode):
        raise GlNotSupported("display", f"the render node {node} is not a character device")
    return pci_location_of_char_device(os.major(st.st_rdev), os.minor(st.st_rdev), sysfs_root)


# ------------------------------------------------------------------------------------- the daemon device

@dataclass(frozen=True)
class DaemonDevice:
    """The daemon device that will read the frames: its lane, ordinal and PCI location (``hello_reply``)."""

    lane: str
    index: int = 0
    pci: str | None = None
    name: str | None = None

    @classmethod
    def from_lanes(cls, lanes: Iterable[dict], lane: str | None = None, device: int = 0) -> "DaemonDevice":
        """Pick ``lane``'s ``device`` from ``hello_reply.lanes`` (default: the first GPU lane, else cpu)."""
        lanes = list(lanes)
        order = [e for e in lanes if (e.get("lane") == lane if lane else e.get("lane") != "cpu")]
        if lane is None:
            order += [e for e in lanes if e.get("lane") == "cpu"]
        for entry in order:
            for d in entry.get("devices", ()) or ():
                if d.get("device") == device:
                    return cls(str(entry.get("lane")), device, d.get("pci"), d.get("name"))
        have = [(e.get("lane"), [d.get("device") for d in e.get("devices", ()) or ()]) for e in lanes]
        raise GlInvalid("device", f"the daemon has no {lane or 'GPU'} lane device {device} (lanes: {have})")


def require_same_device(node_pci: str, device: DaemonDevice, what: str = "the EGL display's render node") -> None:
    """``E_NOTSUP`` naming ``device`` unless ``node_pci`` is the daemon device's PCI location (R11)."""
    if device.lane == "cpu":
        # The cpu lane reads a dma-buf through a host mapping: any GPU's buffer is as readable as
        # another's, so there is no device to match (and that read is a host copy, ALLOW_COPY).
        return
    if not device.pci:
        raise GlNotSupported("device", f"the daemon's {device.lane} device {device.index} reports no PCI location, "
                             f"so {what} ({node_pci}) cannot be shown to be on it")
    if not same_pci(node_pci, device.pci):
        raise GlNotSupported("device", f"{what} is the GPU at {node_pci}, but the daemon's {device.lane} device "
                             f"{device.index} ({device.name or '?'}) is at {device.pci}: another GPU's dma-bufs "
                             "are refused (R11)")


# ------------------------------------------------------------------------------------------------ syncs

class EglSync(ClosedOnExit):
    """An EGL sync object (``EGL_KHR_reusable_sync`` or ``EGL_KHR_fence_sync``), owned: ``close()`` destroys it."""

    def __init__(self, display: int, handle: int, kind: str):
        self.display = display
        self.handle: int | None = handle
        self.kind = kind

    @classmethod
    def reusable(cls, display: int | None = None) -> "EglSync":
        """A reusable sync, created unsignalled; :meth:`signal` it from any thread."""
        return cls._create(display, "reusable", EGL_SYNC_REUSABLE_KHR)

    @classmethod
    def fence(cls, display: int | None = None) -> "EglSync":
        """A fence sync after the commands issued so far in the current context."""
        return cls._create(display, "fence", EGL_SYNC_FENCE_KHR)

    @classmethod
    def _create(cls, display: int | None, kind: str, sync_type: int) -> "EglSync":
        """A sync of ``kind`` ("reusable", "fence"), refused where the display lacks EGL_KHR_<kind>_sync."""
        display = display or current_egl()[0]
        extension = f"EGL_KHR_{kind}_sync"
        if extension not in _display_extensions(display):
            raise GlNotSupported(extension, f"the EGL display has no {kind} syncs")
        h = _egl().eglCreateSyncKHR(display, sync_type, _ints(EGL_NONE))
        if not h:
            raise GlNotSupported(extension, f"eglCreateSyncKHR failed ({_egl_error()})")
        return cls(display, h, kind)

    def _mode(self, mode: int) -> None:
        if self.handle is None:
            raise GlWrongState("sync", "the sync is closed")
        if not _egl().eglSignalSyncKHR(self.display, self.handle, mode):
            raise GlInvalid("sync", f"eglSignalSyncKHR failed ({_egl_error()})")

    def signal(self) -> None:
        self._mode(EGL_SIGNALED_KHR)

    def unsignal(self) -> None:
        self._mode(EGL_UNSIGNALED_KHR)

    def close(self) -> None:
        h, self.handle = self.handle, None
        if h is not None:
            _egl().eglDestroySyncKHR(self.display, h)


def _sync_address(sync: Any) -> int:
    """A GLsync as an address: an int, a ctypes pointer (PyOpenGL's ``GLsync_pointer``) or ``c_void_p``."""
    if isinstance(sync, int):
        return sync
    v = getattr(sync, "value", None)
    if isinstance(v, int):
        return v
    try:
        return ctypes.cast(sync, _vp).value or 0
    except (TypeError, ctypes.ArgumentError):
        raise GlInvalid("sync", f"{type(sync).__name__} is neither a GLsync nor an EglSync") from None


def check_sync_acquire(sync: Any) -> None:
    """The acquire sync checked on the host, without waiting: return if signalled, else ``E_BUSY`` (R11).

    A GL sync is asked with ``glClientWaitSync(sync, 0, 0)`` (no flush, no wait:
    the caller retries, ADR-2132 item 5); an :class:`EglSync` with
    ``eglClientWaitSyncKHR(display, sync, 0, 0)``.
    """
    if sync is None:
        return
    if isinstance(sync, EglSync):
        if sync.handle is None:
            raise GlWrongState("sync", "the EGL sync is closed")
        r = _egl().eglClientWaitSyncKHR(sync.display, sync.handle, 0, 0)
        if r == EGL_CONDITION_SATISFIED_KHR:
            return
        if r == EGL_TIMEOUT_EXPIRED_KHR:
            raise GlBusy("sync", f"the EGL {sync.kind} sync has not signalled yet; retry")
        err = _egl_error()
        if err == "EGL_SUCCESS":
            # Mesa answers EGL_FALSE without an error when a reusable sync is signalled
            # from another thread during the (zero-length) wait: ask its status instead.
            status = ctypes.c_int(0)
            if _egl().eglGetSyncAttribKHR(sync.display, sync.handle, EGL_SYNC_STATUS_KHR, ctypes.byref(status)):
                if status.value == EGL_SIGNALED_KHR:
                    return
                if status.value == EGL_UNSIGNALED_KHR:
                    raise GlBusy("sync", f"the EGL {sync.kind} sync has not signalled yet; retry")
            err = _egl_error()
        raise GlInvalid("sync", f"eglClientWaitSyncKHR failed ({err})")
    gl = _gl()
    current_egl()
    addr = _sync_address(sync)
    if not addr or not gl.glIsSync(addr):
        _gl_errors(gl)
        raise GlInvalid("sync", "not a GL sync object of the current context's share group")
    r = gl.glClientWaitSync(addr, 0, 0)
    if r in (GL_ALREADY_SIGNALED, GL_CONDITION_SATISFIED):
        return
    if r == GL_TIMEOUT_EXPIRED:
        raise GlBusy("sync", "the GL sync has not signalled yet; retry")
    raise GlInvalid("sync", f"glClientWaitSync failed ({', '.join(_gl_errors(gl)) or hex(r)})")


def wait_sync_acquire(sync: Any, timeout_s: float = 1.0, *, poll_s: float = 0.0005, flush: bool = True) -> int:
    """Retry :func:`check_sync_acquire` until it passes or ``timeout_s`` ends (``E_TIMEOUT`` naming ``sync``).

    ``flush``: issue ``glFlush`` once first when a context is current -- a fence
    whose commands were never flushed need never signal (GL 4.5 §4.1.2), and the
    check itself deliberately does not flush.  Returns the number of E_BUSY retries.
    """
    if flush and _egl_lib().eglGetCurrentContext():
        _gl().glFlush()
    end = time.monotonic() + max(0.0, timeout_s)
    tries = 0
    while True:
        try:
            check_sync_acquire(sync)
            return tries
        except GlBusy:
            left = end - time.monotonic()
            if left <= 0:
                raise GlTimeout("sync", f"the acquire sync did not signal within {timeout_s:g} s "
                                f"({tries} checks)") from None
            tries += 1
            time.sleep(min(poll_s, left))


# --------------------------------------------------------------------------------- the producer's state

_PACK_STATE = (("alignment", GL_PACK_ALIGNMENT), ("row_length", GL_PACK_ROW_LENGTH),
               ("skip_rows", GL_PACK_SKIP_ROWS), ("skip_pixels", GL_PACK_SKIP_PIXELS),
               ("image_height", GL_PACK_IMAGE_HEIGHT), ("skip_images", GL_PACK_SKIP_IMAGES),
               ("swap_bytes", GL_PACK_SWAP_BYTES), ("lsb_first", GL_PACK_LSB_FIRST))


def _snapshot(gl: _Library, info: _GlContextInfo) -> dict:
    s: dict[str, Any] = {
        "draw_framebuffer": _get_int(gl, GL_DRAW_FRAMEBUFFER_BINDING),
        "read_framebuffer": _get_int(gl, GL_READ_FRAMEBUFFER_BINDING),
        "renderbuffer": _get_int(gl, GL_RENDERBUFFER_BINDING),
        "read_buffer": _get_int(gl, GL_READ_BUFFER),
        "pixel_pack_buffer": _get_int(gl, GL_PIXEL_PACK_BUFFER_BINDING),
        "pack": {name: _get_int(gl, p) for name, p in _PACK_STATE},
        "active_texture": _get_int(gl, GL_ACTIVE_TEXTURE),
        "texture_binding_2d": _get_int(gl, GL_TEXTURE_BINDING_2D),
    }
    if info.viewport_array:
        s["scissor_test"] = tuple(bool(gl.glIsEnabledi(GL_SCISSOR_TEST, i))
                                  for i in range(_get_int(gl, GL_MAX_VIEWPORTS)))
    else:
        s["scissor_test"] = (bool(gl.glIsEnabled(GL_SCISSOR_TEST)),)
    masks = []
    for i in range(_get_int(gl, GL_MAX_DRAW_BUFFERS)):
        m = (_u8 * 4)()
        gl.glGetBooleani_v(GL_COLOR_WRITEMASK, i, m)
        masks.append(tuple(bool(x) for x in m))
    s["color_writemask"] = tuple(masks)
    return s


def gl_state_snapshot() -> dict:
    """The producer's GL state the exporter touches and restores, from the current context.

    Framebuffer bindings (draw, read), renderbuffer binding, the read buffer of
    the bound read framebuffer, the pixel-pack buffer binding and every pack
    parameter, the scissor test (per viewport), the colour mask (per draw
    buffer), the active texture unit and its 2-D binding.  Tests compare it
    before and after each call.
    """
    current_egl()
    gl = _gl()
    return _snapshot(gl, _gl_context_info(gl))


def _restore(gl: _Library, info: _GlContextInfo, s: dict) -> None:
    gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, s["pixel_pack_buffer"])
    for name, p in _PACK_STATE:
        gl.glPixelStorei(p, s["pack"][name])
    gl.glBindRenderbuffer(GL_RENDERBUFFER, s["renderbuffer"])
    gl.glBindFramebuffer(GL_DRAW_FRAMEBUFFER, s["draw_framebuffer"])
    gl.glBindFramebuffer(GL_READ_FRAMEBUFFER, s["read_framebuffer"])
    # The read buffer belongs to the read framebuffer; we only ever set it on our own, so
    # with the producer's framebuffer bound again it is the producer's -- put back only if not.
    if _get_int(gl, GL_READ_BUFFER) != s["read_buffer"]:
        gl.glReadBuffer(s["read_buffer"])
    if info.viewport_array:
        for i, on in enumerate(s["scissor_test"]):
            (gl.glEnablei if on else gl.glDisablei)(GL_SCISSOR_TEST, i)
    else:
        (gl.glEnable if s["scissor_test"][0] else gl.glDisable)(GL_SCISSOR_TEST)
    for i, m in enumerate(s["color_writemask"]):
        gl.glColorMaski(i, *(1 if x else 0 for x in m))
    if _get_int(gl, GL_ACTIVE_TEXTURE) != s["active_texture"]:
        gl.glActiveTexture(s["active_texture"])
    if _get_int(gl, GL_TEXTURE_BINDING_2D) != s["texture_binding_2d"]:
        gl.glBindTexture(GL_TEXTURE_2D, s["texture_binding_2d"])


class _KeepProducerState:
    """Snapshot the producer's GL state on entry, restore it on every exit (R11, ADR-2132 item 3).

    GL errors still pending on entry are drained (and logged) so that an error
    after one of our calls is ours; errors raised while restoring are drained
    too, so the producer never finds a flag we set.
    """

    def __init__(self, gl: _Library, info: _GlContextInfo):
        self.gl = gl
        self.info = info
        self.saved: dict | None = None

    def __enter__(self) -> "_KeepProducerState":
        pending = _gl_errors(self.gl)
        if pending:
            log.debug("GL errors pending before the export (the producer's): %s", pending)
        self.saved = _snapshot(self.gl, self.info)
        return self

    def __exit__(self, *exc) -> None:
        if self.saved is not None:
            _gl_errors(self.gl)  # ours, from a refused step: not the producer's to find
            _restore(self.gl, self.info, self.saved)
            errs = _gl_errors(self.gl)
            if errs:
                log.warning("restoring the producer's GL state raised %s", errs)


# ---------------------------------------------------------------------------------------- the exporter

@dataclass
class GlFrame:
    """One exported frame: the buffer to register (once: ``new_buffer``) and how it was made."""

    buffer: FrameBuffer
    #: "dmabuf" or "memory_object"
    path: str
    #: a GPU copy was made (a blit to linear, or glReadPixels into the VMM buffer)
    copied: bool
    #: the first time this buffer is returned: register it; later frames reuse the registration
    new_buffer: bool
    #: per plane, the modifier the driver exported (dma-buf path), else None
    exported_modifiers: tuple[int, ...] | None = None
    #: set by :func:`export_texture_planes`: the exporter this frame owns
    owner: "GlFrameExporter | None" = field(default=None, repr=False)

    def close(self) -> None:
        """Close the owning exporter (one-shot exports); a frame of a long-lived exporter leaves it open."""
        if self.owner is not None:
            self.owner.close()


@dataclass
class _DmabufExport:
    fd: OwnedFd
    fourcc: int
    offset: int
    stride: int
    modifier: int


class _LinearPlane:
    """A linear dma-buf allocated with GBM and bound as a renderbuffer through an EGL image (ADR-2132 item 2)."""

    def __init__(self) -> None:
        self.bo: int | None = None
        self.fd: OwnedFd | None = None
        self.stride = 0
        self.offset = 0
        self.image: int | None = None
        self.renderbuffer = 0
        self.framebuffer = 0


class GlFrameExporter(ClosedOnExit):
    """Exports the plane textures of the current EGL context, frame after frame (see the module doc).

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

    # -- dma-buf path (R11, ADR-2132) -------------------------------------------------------------

    def _setup_dmabuf(self) -> None:
        assert self.display is not None
        require_dma_buf_export(self.display)
        self._trace("EGL_MESA_image_dma_buf_export: present")
        self.render_node = display_render_node(self.display)
        self.render_node_pci = render_node_pci(self.render_node)
        self._trace(f"display's render node {self.render_node} at PCI {self.render_node_pci}")
        require_same_device(self.render_node_pci, self.device)
        self._trace(f"daemon device {self.device.lane}:{self.device.index} at {self.device.pci}: same GPU")

    def _export_texture(self, i: int, tex: int, pf: PlaneFormat) -> _DmabufExport:
        egl = _egl()
        img = egl.eglCreateImageKHR(self.display, self.context, EGL_GL_TEXTURE_2D_KHR, _vp(tex),
                                    _ints(EGL_GL_TEXTURE_LEVEL_KHR, 0, EGL_NONE))
        if not img:
            raise GlNotSupported(f"planes[{i}]", f"eglCreateImageKHR of texture {tex} failed ({_egl_error()})")
        try:
            fourcc, nplanes, mods = _i(0), _i(0), (_u64 * 4)()
            if not egl.eglExportDMABUFImageQueryMESA(self.display, img, ctypes.byref(fourcc), ctypes.byref(nplanes),
                                                     mods):
                raise GlNotSupported(f"planes[{i}]", f"eglExportDMABUFImageQueryMESA failed ({_egl_error()})")
            if nplanes.value != 1:
                raise GlNotSupported(f"planes[{i}]", f"texture {tex} exports as {nplanes.value} dma-buf planes; "
                                     f"a {pf.name} plane is one")
            fds, strides, offsets = (_i * 4)(-1, -1, -1, -1), (_i * 4)(), (_i * 4)()
            if not egl.eglExportDMABUFImageMESA(self.display, img, fds, strides, offsets):
                err = _egl_error()
                for f in fds:
                    if f >= 0:
                        os.close(f)
                raise GlNotSupported(f"planes[{i}]", f"eglExportDMABUFImageMESA of texture {tex} failed ({err})")
            for f in list(fds)[1:]:
                if f >= 0:
                    os.close(f)
            exp = _DmabufExport(OwnedFd(fds[0]), fourcc.value & 0xFFFFFFFF, offsets[0], strides[0], int(mods[0]))
        finally:
            egl.eglDestroyImageKHR(self.display, img)
        if exp.fourcc != pf.drm_fourcc:
            exp.fd.close()
            # ADR-2132 item 2: the format is checked from the export too.
            raise GlInvalid(f"planes[{i}]", f"texture {tex} exported as {_fourcc_name(exp.fourcc)}, but the plane "
                            f"is {pf.name} ({_fourcc_name(pf.drm_fourcc)})")
        self._trace(f"planes[{i}]: texture {tex} exported: fourcc {_fourcc_name(exp.fourcc)} offset {exp.offset} "
                    f"stride {exp.stride} modifier 0x{exp.modifier:x}")
        return exp

    def _wait_implicit_fences(self, fds: Sequence[int]) -> None:
        """ADR-2132 item 5: wait (≤ 1 s) for each dma-buf's implicit write fences by polling it readable."""
        end = time.monotonic() + self.implicit_fence_timeout_s
        for i, fd in enumerate(fds):
            p = select.poll()
            p.register(fd, select.POLLIN)
            while True:
                left = end - time.monotonic()
                try:
                    ready = p.poll(max(0, int(left * 1000)))
                except InterruptedError:
                    continue
                if ready:
                    break
                raise GlTimeout(f"planes[{i}].fd", f"the dma-buf's implicit fences did not signal within "
                                f"{self.implicit_fence_timeout_s:g} s")

    def _export_dmabuf(self, gl: _Library, info: _GlContextInfo, texs: tuple[int, ...]) -> GlFrame:
        cached = self._in_place.get(texs)
        if cached is not None:
            # The dma-bufs alias the textures: flush the producer's rendering so the driver attaches
            # its fences, then wait for them (bounded) -- the rows are the texture's own.
            gl.glFlush()
            self._wait_implicit_fences([e.fd.fileno() for e in cached[1]])
            return GlFrame(cached[0], "dmabuf", False, False, tuple(e.modifier for e in cached[1]))
        if texs not in self._blit_textures:
            gl.glFlush()
            exports: list[_DmabufExport] = []
            try:
                for i, (tex, (_, pf)) in enumerate(zip(texs, self.planes)):
                    exports.append(self._export_texture(i, tex, pf))
            except BaseException:
                for e in exports:
                    e.fd.close()
                raise
            mods = tuple(e.modifier for e in exports)
            if all(m == DRM_FORMAT_MOD_LINEAR for m in mods):
                try:
                    self._wait_implicit_fences([e.fd.fileno() for e in exports])
                    buf = wrap_dmabuf([e.fd.fileno() for e in exports], self.width, self.height, self.pixel_format,
                                      self.bitdepth, planes=[(i, e.offset, e.stride) for i, e in enumerate(exports)],
                                      modifier=DRM_FORMAT_MOD_LINEAR, flags=self.flags)
                except BaseException:
                    for e in exports:
                        e.fd.close()
                    raise
                self._in_place[texs] = (buf, exports)
                self._trace("linear export: read in place, no copy")
                return GlFrame(buf, "dmabuf", False, False, mods)
            for e in exports:
                e.fd.close()  # only its modifier was needed: the daemon gets the linear copy
            tiled = [i for i, m in enumerate(mods) if m != DRM_FORMAT_MOD_LINEAR]
            if not self.flags & ALLOW_COPY:
                raise GlNotSupported("flags", f"planes {tiled} export with modifier(s) "
                                     f"{', '.join(hex(mods[i]) for i in tiled)} (tiled or DRM_FORMAT_MOD_INVALID); "
                                     "a GPU blit into a linear dma-buf needs ALLOW_COPY (R11, ADR-2132 item 2)")
            self._blit_textures[texs] = mods
            # A frame with any tiled plane is copied whole, so that its buffer is one kind of thing
            # (every plane in a GBM buffer the exporter owns).
        if self._linear_buffer is None:
            try:
                self._make_linear_planes(gl)
            except BaseException:
                self._free_linear(gl_current=True)
                raise
        self._blit(gl, info, texs)
        assert self._linear_buffer is not None
        return GlFrame(self._linear_buffer, "dmabuf", True, False, self._blit_textures[texs])

    def _make_linear_planes(self, gl: _Library) -> None:
        """GBM linear buffers on the display's render node, each an EGL image bound as a renderbuffer."""
        exts = _display_extensions(self.display)
        if "EGL_EXT_image_dma_buf_import" not in exts:
            raise GlNotSupported("EGL_EXT_image_dma_buf_import", "the display cannot import the linear GBM buffer "
                                 "back as an EGL image")
        if "GL_OES_EGL_image" not in (self._info.extensions if self._info else ()):
            raise GlNotSupported("GL_OES_EGL_image", "the context cannot bind an EGL image as a renderbuffer")
        gbm, egl = _gbm(), _egl()
        with_modifiers = "EGL_EXT_image_dma_buf_import_modifiers" in exts
        try:
            self._node_fd = OwnedFd(os.open(self.render_node, os.O_RDWR | os.O_CLOEXEC))
        except OSError as e:
            raise GlNotSupported("display", f"cannot open the render node {self.render_node} ({e.strerror})") from None
        dev = gbm.gbm_create_device(self._node_fd.fileno())
        if not dev:
            raise GlNotSupported("libgbm.so.1", f"gbm_create_device({self.render_node}) failed")
        self._gbm_device = dev
        for i, (shape, pf) in enumerate(self.planes):
            lp = _LinearPlane()
            self._linear.append(lp)
            bo = None
            if gbm.has("gbm_bo_create_with_modifiers"):
                bo = gbm.gbm_bo_create_with_modifiers(dev, shape.width, shape.height, pf.drm_fourcc,
                                                      (_u64 * 1)(DRM_FORMAT_MOD_LINEAR), 1)
            if not bo:
                bo = gbm.gbm_bo_create(dev, shape.width, shape.height, pf.drm_fourcc,
                                       GBM_BO_USE_RENDERING | GBM_BO_USE_LINEAR)
            if not bo:
                raise GlNotSupported(f"planes[{i}]", f"GBM cannot allocate a linear {pf.name} "
                                     f"{shape.width}x{shape.height} buffer on {self.render_node}")
            lp.bo = bo
            if gbm.has("gbm_bo_get_modifier"):
                mod = gbm.gbm_bo_get_modifier(bo)
                if mod not in (DRM_FORMAT_MOD_LINEAR, DRM_FORMAT_MOD_INVALID):
                    raise GlNotSupported(f"planes[{i}]", f"GBM gave modifier 0x{mod:x}, not linear")
            fd = gbm.gbm_bo_get_fd(bo)
            if fd < 0:
                raise GlNotSupported(f"planes[{i}]", "gbm_bo_get_fd failed")
            lp.fd = OwnedFd(fd)
            lp.stride = gbm.gbm_bo_get_stride(bo)
            lp.offset = gbm.gbm_bo_get_offset(bo, 0) if gbm.has("gbm_bo_get_offset") else 0
            attrs = [EGL_WIDTH, shape.width, EGL_HEIGHT, shape.height, EGL_LINUX_DRM_FOURCC_EXT, pf.drm_fourcc,
                     EGL_DMA_BUF_PLANE0_FD_EXT, lp.fd.fileno(), EGL_DMA_BUF_PLANE0_OFFSET_EXT, lp.offset,
                     EGL_DMA_BUF_PLANE0_PITCH_EXT, lp.stride]
            if with_modifiers:
                attrs += [EGL_DMA_BUF_PLANE0_MODIFIER_LO_EXT, 0, EGL_DMA_BUF_PLANE0_MODIFIER_HI_EXT, 0]
            img = egl.eglCreateImageKHR(self.display, None, EGL_LINUX_DMA_BUF_EXT, None, _ints(*attrs, EGL_NONE))
            if not img:
                raise GlNotSupported(f"planes[{i}]", f"importing the linear GBM buffer as an EGL image failed "
                                     f"({_egl_error()})")
            lp.image = img
            rb, fb = _u(0), _u(0)
            gl.glGenRenderbuffers(1, ctypes.byref(rb))
            lp.renderbuffer = rb.value
            gl.glBindRenderbuffer(GL_RENDERBUFFER, rb.value)
            gl.glEGLImageTargetRenderbufferStorageOES(GL_RENDERBUFFER, img)
            _gl_check(gl, "glEGLImageTargetRenderbufferStorageOES", f"planes[{i}]")
            gl.glGenFramebuffers(1, ctypes.byref(fb))
            lp.framebuffer = fb.value
            gl.glBindFramebuffer(GL_DRAW_FRAMEBUFFER, fb.value)
            gl.glFramebufferRenderbuffer(GL_DRAW_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, rb.value)
            gl.glDrawBuffers(1, (_u * 1)(GL_COLOR_ATTACHMENT0))
            status = gl.glCheckFramebufferStatus(GL_DRAW_FRAMEBUFFER)
            _gl_check(gl, "binding the linear renderbuffer", f"planes[{i}]")
            if status != GL_FRAMEBUFFER_COMPLETE:
                raise GlNotSupported(f"planes[{i}]", f"the linear renderbuffer's framebuffer is incomplete "
                                     f"(0x{status:x})")
            self._trace(f"planes[{i}]: linear GBM {pf.name} buffer stride {lp.stride} offset {lp.offset}")
        self._linear_buffer = wrap_dmabuf([lp.fd.fileno() for lp in self._linear if lp.fd], self.width, self.height,
                                          self.pixel_format, self.bitdepth,
                                          planes=[(i, lp.offset, lp.stride) for i, lp in enumerate(self._linear)],
                                          modifier=DRM_FORMAT_MOD_LINEAR, flags=self.flags)

    def _blit(self, gl: _Library, info: _GlContextInfo, texs: tuple[int, ...]) -> None:
        """One glBlitFramebuffer per plane, texture -> linear renderbuffer, in the producer's context."""
        # The blit is cut by the scissor test and the colour mask: both off/open for it, and
        # put back by the state guard (ADR-2132 item 3).
        if info.viewport_array:
            for v in range(_get_int(gl, GL_MAX_VIEWPORTS)):
                gl.glDisablei(GL_SCISSOR_TEST, v)
        else:
            gl.glDisable(GL_SCISSOR_TEST)
        gl.glColorMaski(0, 1, 1, 1, 1)
        for i, (tex, (shape, _), lp) in enumerate(zip(texs, self.planes, self._linear)):
            gl.glBindFramebuffer(GL_READ_FRAMEBUFFER, self._read_fbo)
            gl.glFramebufferTexture2D(GL_READ_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, tex, 0)
            gl.glReadBuffer(GL_COLOR_ATTACHMENT0)
            self._require_complete(gl, i, tex)
            gl.glBindFramebuffer(GL_DRAW_FRAMEBUFFER, lp.framebuffer)
            gl.glBlitFramebuffer(0, 0, shape.width, shape.height, 0, 0, shape.width, shape.height,
                                 GL_COLOR_BUFFER_BIT, GL_NEAREST)
            _gl_check(gl, "glBlitFramebuffer", f"planes[{i}]")
        gl.glFramebufferTexture2D(GL_READ_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, 0, 0)
        self._wait_copy_fence(gl)
        self._wait_implicit_fences([lp.fd.fileno() for lp in self._linear if lp.fd])
        self._trace(f"blitted {len(texs)} planes into linear dma-bufs")

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

    # -- memory-object path (NVIDIA, PLATFORM.md) -----------------------------------------------------

    def _setup_memory_object(self, gl: _Library, info: _GlContextInfo) -> None:
        if not self.flags & ALLOW_COPY:
            raise GlNotSupported("flags", "the memory-object path copies each texture on the GPU (glReadPixels into "
                                 "the VMM buffer): it needs ALLOW_COPY (R11)")
        for ext in ("GL_EXT_memory_object", "GL_EXT_memory_object_fd"):
            if ext not in info.extensions:
                raise GlNotSupported(ext, f"the context ({info.renderer}) does not offer {ext}, so it cannot import "
                                     "a CUDA VMM fd")
        self._trace("GL_EXT_memory_object_fd: present")
        memory = self._memory_arg
        if memory is None:
            memory = self._make_vmm_buffer()
        self._check_memory(memory)
        self._memory = memory
        self._import_memory(gl, memory)

    def _make_vmm_buffer(self):
        try:
            from .cuda_frames import CudaProducer, CudaUnavailable, VmmFrameBuffer
        except ImportError as e:  # numpy or the module itself missing
            raise GlNotSupported("producer", f"the CUDA producer side cannot be imported ({e})") from None
        producer = self._producer_arg
        try:
            if producer is None:
                producer = self._own_producer = CudaProducer(self._cuda_ordinal())
            mem = self._own_memory = VmmFrameBuffer(producer, self.width, self.height, self.pixel_format,
                                                    self.bitdepth, pitch_align=256)
        except CudaUnavailable as e:
            raise GlNotSupported("producer", f"no CUDA here ({e}): the memory-object path writes into a CUDA VMM "
                                 "buffer") from None
        except RuntimeError as e:
            raise GlNotSupported("producer", f"allocating the VMM buffer failed ({e})") from None
        self._trace(f"VMM buffer: {mem.size} bytes on CUDA device {producer.device}, fd {mem.fd.fileno()}, planes "
                    f"{[(p.offset, p.pitch) for p in mem.planes]}")
        return mem

    def _cuda_ordinal(self) -> int:
        """The CUDA ordinal at the daemon device's PCI location (ordinals can differ between processes,
        e.g. under another CUDA_VISIBLE_DEVICES)."""
        from .cuda_frames import _ck, _driver

        d = _driver()
        if not self.device.pci:
            return self.device.index
        found = []
        for k in range(int(_ck(d, "cuDeviceGetCount", d.cuDeviceGetCount()))):
            bus = _ck(d, "cuDeviceGetPCIBusId", d.cuDeviceGetPCIBusId(32, _ck(d, "cuDeviceGet", d.cuDeviceGet(k))))
            bus = bus.split(b"\0")[0].decode() if isinstance(bus, (bytes, bytearray)) else str(bus)
            found.append(bus)
            if same_pci(bus, self.device.pci):
                self._trace(f"CUDA device {k} is at {bus}, the daemon device's PCI location")
                return k
        raise GlNotSupported("device", f"no CUDA device of this process is at the daemon device's PCI location "
                             f"{self.device.pci} (this process sees {found})")

    def _check_memory(self, memory) -> None:
        reg = memory.registration() if hasattr(memory, "registration") else {}
        for what in ("fd", "size", "planes"):
            if not hasattr(memory, what):
                raise GlInvalid("memory", f"{type(memory).__name__} has no {what}")
        if len(memory.planes) != len(self.planes):
            raise GlInvalid("memory.planes", f"the buffer has {len(memory.planes)} planes, the format "
                            f"{len(self.planes)}")
        for i, (spec, (shape, pf)) in enumerate(zip(memory.planes, self.planes)):
            # GL_PACK_ROW_LENGTH counts pixels and a pack-buffer offset must be a multiple of the
            # sample size: the layout has to fit glReadPixels' arithmetic exactly.
            if spec.pitch % pf.bytes_per_pixel or spec.pitch < shape.row_bytes:
                raise GlInvalid(f"memory.planes[{i}].pitch", f"{spec.pitch} must be a multiple of {pf.name}'s "
                                f"{pf.bytes_per_pixel}-byte pixels and at least the row's {shape.row_bytes} bytes")
            if spec.offset % pf.bytes_per_sample:
                raise GlInvalid(f"memory.planes[{i}].offset", f"{spec.offset} is not {pf.bytes_per_sample}-aligned")
            if spec.offset + spec.pitch * (shape.height - 1) + shape.row_bytes > memory.size:
                raise GlInvalid(f"memory.planes[{i}].offset", "the plane ends beyond the buffer")
        producer = getattr(memory, "producer", None)
        dev_pci = self._producer_pci(producer) if producer is not None else None
        if dev_pci is not None:
            require_same_device(dev_pci, self.device, what="the VMM buffer's CUDA device")
            self._trace(f"VMM buffer on PCI {dev_pci} = daemon device {self.device.lane}:{self.device.index}")
        info = egl_display_info(self.display)
        if info.cuda_device is not None and producer is not None and info.cuda_device != producer.device:
            raise GlNotSupported("display", f"the EGL display is CUDA device {info.cuda_device}, the VMM buffer is on "
                                 f"CUDA device {producer.device}: GL cannot import another GPU's memory")
        if reg:
            self._trace(f"memory registers as {reg.get('kind')} on device {reg.get('device')}")

    @staticmethod
    def _producer_pci(producer) -> str | None:
        d = getattr(producer, "d", None)
        dev = getattr(producer, "_dev", None)
        if d is None or dev is None:
            return None
        try:
            bus = d.cuDeviceGetPCIBusId(32, dev)[1]
        except Exception:  # noqa: BLE001 -- a binding without it: no check possible, said in the trace
            return None
        return bus.split(b"\0")[0].decode() if isinstance(bus, (bytes, bytearray)) else str(bus)

    def _import_memory(self, gl: _Library, memory) -> None:
        mo = _u(0)
        gl.glCreateMemoryObjectsEXT(1, ctypes.byref(mo))
        _gl_check(gl, "glCreateMemoryObjectsEXT", "GL_EXT_memory_object")
        self._memory_object = mo.value
        # A dedicated allocation: the VMM handle is a whole cuMemCreate allocation (NVIDIA
        # requires the flag to match how the memory was made).
        gl.glMemoryObjectParameterivEXT(mo.value, GL_DEDICATED_MEMORY_OBJECT_EXT, ctypes.byref(_i(1)))
        _gl_check(gl, "glMemoryObjectParameterivEXT(GL_DEDICATED_MEMORY_OBJECT_EXT)", "GL_EXT_memory_object")
        dup = os.dup(memory.fd.fileno())
        gl.glImportMemoryFdEXT(mo.value, memory.size, GL_HANDLE_TYPE_OPAQUE_FD_EXT, dup)
        errs = _gl_errors(gl)
        if errs or not gl.glIsMemoryObjectEXT(mo.value):
            os.close(dup)  # a failed import leaves the fd ours (EXT_external_objects_fd)
            raise GlNotSupported("GL_EXT_memory_object_fd", f"glImportMemoryFdEXT of the {memory.size}-byte buffer "
                                 f"failed ({', '.join(errs) or 'no memory object'})")
        # From here the dup belongs to GL: deleting the memory object closes it.
        self._trace(f"GL memory object {mo.value} imported the fd (size {memory.size})")
        buf = _u(0)
        gl.glGenBuffers(1, ctypes.byref(buf))
        self._pack_buffer = buf.value
        gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, buf.value)  # creates the object; the guard restores the binding
        gl.glNamedBufferStorageMemEXT(buf.value, memory.size, mo.value, 0)
        _gl_check(gl, "glNamedBufferStorageMemEXT", "GL_EXT_memory_object")
        self._trace(f"GL buffer {buf.value} backed by the memory object")
        reg = memory.registration() if hasattr(memory, "registration") else {}
        self._vmm_buffer = FrameBuffer(
            reg.get("kind", "cuda_vmm"), self.width, self.height, self.pixel_format, self.bitdepth,
            [Plane(0, p.offset, p.pitch) for p in memory.planes], [BorrowedFd(memory.fd.fileno())],
            size=memory.size, modifier=0, flags=self.flags, device=reg.get("device"))

    def _export_memory_object(self, gl: _Library, texs: tuple[int, ...]) -> GlFrame:
        memory = self._memory
        gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, self._pack_buffer)
        gl.glPixelStorei(GL_PACK_ALIGNMENT, 1)
        for p in (GL_PACK_SKIP_ROWS, GL_PACK_SKIP_PIXELS, GL_PACK_SKIP_IMAGES, GL_PACK_IMAGE_HEIGHT,
                  GL_PACK_SWAP_BYTES, GL_PACK_LSB_FIRST):
            gl.glPixelStorei(p, 0)  # a producer's SWAP_BYTES would byte-swap 16-bit planes
        gl.glBindFramebuffer(GL_READ_FRAMEBUFFER, self._read_fbo)
        for i, (tex, (shape, pf), spec) in enumerate(zip(texs, self.planes, memory.planes)):
            gl.glFramebufferTexture2D(GL_READ_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, tex, 0)
            gl.glReadBuffer(GL_COLOR_ATTACHMENT0)
            self._require_complete(gl, i, tex)
            gl.glPixelStorei(GL_PACK_ROW_LENGTH, spec.pitch // pf.bytes_per_pixel)
            gl.glReadPixels(0, 0, shape.width, shape.height, pf.gl_format, pf.gl_type, _vp(spec.offset))
            _gl_check(gl, f"glReadPixels of texture {tex} into the VMM buffer at offset {spec.offset}", f"planes[{i}]")
        gl.glFramebufferTexture2D(GL_READ_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, 0, 0)
        self._wait_copy_fence(gl)
        self._trace(f"read {len(texs)} planes into the VMM buffer")
        assert self._vmm_buffer is not None
        return GlFrame(self._vmm_buffer, "memory_object", True, False, None)

    # -- teardown ------------------------------------------------------------------------------------

    def _free_linear(self, *, gl_current: bool) -> None:
        """The GBM buffers, their EGL images, renderbuffers and framebuffers (blit path)."""
        if gl_current and self._linear:
            gl = _gl()
            fbs = [lp.framebuffer for lp in self._linear if lp.framebuffer]
            if fbs:
                gl.glDeleteFramebuffers(len(fbs), (_u * len(fbs))(*fbs))
            rbs = [lp.renderbuffer for lp in self._linear if lp.renderbuffer]
            if rbs:
                gl.glDeleteRenderbuffers(len(rbs), (_u * len(rbs))(*rbs))
        for lp in self._linear:
            if lp.image and self.display:
                _egl().eglDestroyImageKHR(self.display, lp.image)
            if lp.fd is not None:
                lp.fd.close()
            if lp.bo:
                _gbm().gbm_bo_destroy(lp.bo)
        self._linear.clear()
        self._close_held("_linear_buffer")
        if self._gbm_device:
            _gbm().gbm_device_destroy(self._gbm_device)
            self._gbm_device = None
        self._close_held("_node_fd")

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


# ------------------------------------------------------------------------------ an offscreen context

class EglOffscreenContext(ClosedOnExit):
    """An EGL desktop-GL context without a surface, for headless producers, tests and scripts.

    ``platform``: ``"device"`` (EGL_EXT_platform_device: ``eglQueryDevicesEXT``,
    the first hardware device, or the one whose CUDA ordinal is ``cuda_device``
    -- NVIDIA's headless path), ``"surfaceless"`` (EGL_MESA_platform_surfaceless),
    ``"default"`` (``eglGetDisplay(EGL_DEFAULT_DISPLAY)``, honours
    ``EGL_PLATFORM``) or ``"auto"`` (device if a hardware device exists, else
    surfaceless, else default).  The context is made current on this thread.
    """

    def __init__(self, platform: str = "auto", version: tuple[int, int] = (4, 5), *, cuda_device: int | None = None,
                 trace: Callable[[str], None] | None = None):
        self._trace_cb = trace
        lib = _egl_lib()
        self.notes: list[str] = []
        cext = _client_extensions()
        self._note(f"EGL client extensions: {' '.join(sorted(cext)) or '-'}")
        dpy, self.platform = self._display(platform, cext, cuda_device)
        maj, mn = _i(0), _i(0)
        if not lib.eglInitialize(dpy, ctypes.byref(maj), ctypes.byref(mn)):
            raise GlNotSupported("display", f"eglInitialize failed on the {self.platform} display ({_egl_error()})")
        self.display = dpy
        self.egl_version = (maj.value, mn.value)
        if not lib.eglBindAPI(EGL_OPENGL_API):
            raise GlNotSupported("display", f"eglBindAPI(EGL_OPENGL_API) failed ({_egl_error()})")
        exts = _display_extensions(dpy)
        config = None
        if not ({"EGL_KHR_no_config_context", "EGL_MESA_configless_context"} & exts):
            cfg, n = _vp(), _i(0)
            if not lib.eglChooseConfig(dpy, _ints(EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_SURFACE_TYPE,
                                                  EGL_PBUFFER_BIT, EGL_NONE), ctypes.byref(cfg), 1, ctypes.byref(n)) \
                    or n.value < 1:
                raise GlNotSupported("display", f"no EGL config for desktop GL ({_egl_error()})")
            config = cfg.value
        ctx = None
        for want in (version, (4, 6), (4, 5), (3, 3)):
            ctx = lib.eglCreateContext(dpy, config, None, _ints(
                EGL_CONTEXT_MAJOR_VERSION, want[0], EGL_CONTEXT_MINOR_VERSION, want[1],
                EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE))
            if ctx:
                break
            self._note(f"GL {want[0]}.{want[1]} core context refused ({_egl_error()})")
        if not ctx:
            raise GlNotSupported("context", "no desktop GL 3.3+ core context could be created")
        self.context = ctx
        if not lib.eglMakeCurrent(dpy, None, None, ctx):
            err = _egl_error()
            lib.eglDestroyContext(dpy, ctx)
            self.context = None
            raise GlNotSupported("context", f"eglMakeCurrent without a surface failed ({err}); the display needs "
                                 "EGL_KHR_surfaceless_context")
        gl = _gl()
        self.gl_version = (gl.glGetString(GL_VERSION) or b"").decode(errors="replace")
        self.gl_renderer = (gl.glGetString(GL_RENDERER) or b"").decode(errors="replace")
        self.gl_vendor = (gl.glGetString(GL_VENDOR) or b"").decode(errors="replace")
        self._note(f"{self.platform} display 0x{dpy:x}, EGL {maj.value}.{mn.value}; GL {self.gl_version} "
                   f"({self.gl_renderer}, {self.gl_vendor})")

    def _note(self, msg: str) -> None:
        self.notes.append(msg)
        log.debug("%s", msg)
        if self._trace_cb is not None:
            self._trace_cb(f"[vmafx.gl] {msg}")

    def _display(self, platform: str, cext: frozenset[str], cuda_device: int | None) -> tuple[int, str]:
        lib = _egl_lib()
        egl = _egl()
        if platform not in ("auto", "device", "surfaceless", "default"):
            raise GlInvalid("platform", f"{platform!r} is not auto, device, surfaceless or default")
        if platform in ("auto", "device") and "EGL_EXT_platform_device" in cext:
            devs, n = (_vp * 16)(), _i(0)
            if egl.eglQueryDevicesEXT(16, devs, ctypes.byref(n)):
                chosen = None
                for k in range(n.value):
                    dev = devs[k]
                    dexts = frozenset((_query_device_string(dev, EGL_EXTENSIONS) or "").split())
                    cuda = _device_cuda_ordinal(dev, dexts)
                    drm = _query_device_string(dev, EGL_DRM_DEVICE_FILE_EXT) if "EGL_EXT_device_drm" in dexts else None
                    self._note(f"EGL device {k}: 0x{dev:x} extensions [{' '.join(sorted(dexts))}] CUDA {cuda} "
                               f"DRM {drm}")
                    if "EGL_MESA_device_software" in dexts:
                        continue
                    if chosen is None and (cuda_device is None or cuda == cuda_device):
                        chosen = dev
                if chosen is not None:
                    dpy = egl.eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, chosen, _ints(EGL_NONE))
                    if dpy:
                        return dpy, "device"
                    self._note(f"eglGetPlatformDisplayEXT(device) failed ({_egl_error()})")
            else:
                self._note(f"eglQueryDevicesEXT failed ({_egl_error()})")
            if platform == "device":
                raise GlNotSupported("EGL_EXT_platform_device", "no hardware EGL device to make a display on")
        elif platform == "device":
            raise GlNotSupported("EGL_EXT_platform_device", "the EGL client does not offer EGL_EXT_platform_device")
        if platform in ("auto", "surfaceless") and "EGL_MESA_platform_surfaceless" in cext:
            dpy = egl.eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA, None, _ints(EGL_NONE))
            if dpy:
                return dpy, "surfaceless"
            self._note(f"eglGetPlatformDisplayEXT(surfaceless) failed ({_egl_error()})")
        if platform == "surfaceless":
            raise GlNotSupported("EGL_MESA_platform_surfaceless", "no surfaceless EGL display")
        dpy = lib.eglGetDisplay(None)
        if not dpy:
            raise GlNotSupported("display", f"eglGetDisplay(EGL_DEFAULT_DISPLAY) failed ({_egl_error()})")
        return dpy, "default"

    def info(self) -> EglDisplayInfo:
        return egl_display_info(self.display)

    def make_current(self) -> None:
        if not self.context or not _egl_lib().eglMakeCurrent(self.display, None, None, self.context):
            raise GlWrongState("context", f"eglMakeCurrent failed ({_egl_error()})")

    def close(self) -> None:
        """Release and destroy the context (the display stays initialised: others may share it).  Safe twice."""
        ctx, self.context = self.context, None
        if ctx:
            lib = _egl_lib()
            if lib.eglGetCurrentContext() == ctx:
                lib.eglMakeCurrent(self.display, None, None, None)
            lib.eglDestroyContext(self.display, ctx)
