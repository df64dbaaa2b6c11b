"""An offscreen EGL desktop-GL context (tests and ``scripts/gl_score.py``): NVIDIA's device platform,
or Mesa's surfaceless one."""

from __future__ import annotations

import ctypes
import logging
from typing import Callable

from ..transport import ClosedOnExit
from .constants import (
    EGL_CONTEXT_MAJOR_VERSION, EGL_CONTEXT_MINOR_VERSION, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
    EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_DRM_DEVICE_FILE_EXT, EGL_EXTENSIONS, EGL_NONE, EGL_OPENGL_API,
    EGL_OPENGL_BIT, EGL_PBUFFER_BIT, EGL_PLATFORM_DEVICE_EXT, EGL_PLATFORM_SURFACELESS_MESA, EGL_RENDERABLE_TYPE,
    EGL_SURFACE_TYPE, GL_RENDERER, GL_VENDOR, GL_VERSION,
)
from .egl_display import (
    _client_extensions, _device_cuda_ordinal, _display_extensions, egl_display_info, EglDisplayInfo,
    _query_device_string,
)
from .entry_points import _egl, _egl_error, _egl_lib, _gl, _i, _ints, _vp
from .errors import GlInvalid, GlNotSupported, GlWrongState

log = logging.getLogger("vmafx.gl")


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
