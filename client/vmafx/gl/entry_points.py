"""EGL, GL and GBM entry points resolved at run time (not through PyOpenGL: see the package doc),
the GL error flags, and the current context's version and extensions."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Callable

from .constants import (
    _EGL_ERRORS, _GL_ERRORS, GL_EXTENSIONS, GL_MAJOR_VERSION, GL_MINOR_VERSION, GL_NO_ERROR, GL_NUM_EXTENSIONS,
    GL_RENDERER, GL_VENDOR, GL_VERSION,
)
from .errors import GlInvalid, GlNotSupported

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
