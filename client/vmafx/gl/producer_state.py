"""The producer's GL state the exporter touches: a snapshot, and its restoration on every exit."""

from __future__ import annotations

import logging
from typing import Any

from .constants import (
    GL_ACTIVE_TEXTURE, GL_COLOR_WRITEMASK, GL_DRAW_FRAMEBUFFER, GL_DRAW_FRAMEBUFFER_BINDING, GL_MAX_DRAW_BUFFERS,
    GL_MAX_VIEWPORTS, GL_PACK_ALIGNMENT, GL_PACK_IMAGE_HEIGHT, GL_PACK_LSB_FIRST, GL_PACK_ROW_LENGTH,
    GL_PACK_SKIP_IMAGES, GL_PACK_SKIP_PIXELS, GL_PACK_SKIP_ROWS, GL_PACK_SWAP_BYTES, GL_PIXEL_PACK_BUFFER,
    GL_PIXEL_PACK_BUFFER_BINDING, GL_READ_BUFFER, GL_READ_FRAMEBUFFER, GL_READ_FRAMEBUFFER_BINDING,
    GL_RENDERBUFFER, GL_RENDERBUFFER_BINDING, GL_SCISSOR_TEST, GL_TEXTURE_2D, GL_TEXTURE_BINDING_2D,
)
from .egl_display import current_egl
from .entry_points import _get_int, _gl, _gl_context_info, _gl_errors, _GlContextInfo, _Library, _u8

log = logging.getLogger("vmafx.gl")


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
