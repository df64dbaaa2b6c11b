"""The exporter's dma-buf path (R11, ADR-2132): each texture exported as a dma-buf, read in place
when linear, else blitted into a linear GBM buffer on the display's render node (ALLOW_COPY)."""

from __future__ import annotations

import ctypes
import os
import select
import time
from dataclasses import dataclass
from typing import Sequence

from ..frames import ALLOW_COPY, wrap_dmabuf
from ..transport import OwnedFd
from .constants import (
    DRM_FORMAT_MOD_INVALID, DRM_FORMAT_MOD_LINEAR, EGL_DMA_BUF_PLANE0_FD_EXT, EGL_DMA_BUF_PLANE0_MODIFIER_HI_EXT,
    EGL_DMA_BUF_PLANE0_MODIFIER_LO_EXT, EGL_DMA_BUF_PLANE0_OFFSET_EXT, EGL_DMA_BUF_PLANE0_PITCH_EXT,
    EGL_GL_TEXTURE_2D_KHR, EGL_GL_TEXTURE_LEVEL_KHR, EGL_HEIGHT, EGL_LINUX_DMA_BUF_EXT, EGL_LINUX_DRM_FOURCC_EXT,
    EGL_NONE, EGL_WIDTH, _fourcc_name, GBM_BO_USE_LINEAR, GBM_BO_USE_RENDERING, GL_COLOR_ATTACHMENT0,
    GL_COLOR_BUFFER_BIT, GL_DRAW_FRAMEBUFFER, GL_FRAMEBUFFER_COMPLETE, GL_MAX_VIEWPORTS, GL_NEAREST,
    GL_READ_FRAMEBUFFER, GL_RENDERBUFFER, GL_SCISSOR_TEST, GL_TEXTURE_2D,
)
from .egl_display import (
    _display_extensions, display_render_node, render_node_pci, require_dma_buf_export, require_same_device,
)
from .entry_points import (
    _egl, _egl_error, _gbm, _get_int, _gl, _gl_check, _GlContextInfo, _i, _ints, _Library, _u, _u64, _vp,
)
from .errors import GlInvalid, GlNotSupported, GlTimeout
from .frame import GlFrame
from .plane_formats import PlaneFormat


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


class DmabufPath:
    """GlFrameExporter's dma-buf path (a mixin: the state it uses is the exporter's)."""

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
