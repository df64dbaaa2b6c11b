"""A PyOpenGL producer for the GL tests and ``scripts/gl_score.py``.

It plays the part of OBS: frames live in GL textures, one per stored plane.
Reference frames are *uploaded* (``glTexSubImage2D``); distorted frames are
*rendered*: a fragment shader reads the uploaded distorted clip and writes it
plus a deterministic dither (±2 codes) into render-target textures, so the
exported textures hold pixels GL itself produced.  :func:`dither_expected` is
the same dither in numpy: a read-back that equals it proves the texture rows
are what we think (orientation, pitch, channel order) before anything is
exported.

Also here: a *busy* producer state (framebuffers, renderbuffer, scissor,
colour masks, pack buffer and pack state, read buffer, texture unit -- none
at its default) and an independent PyOpenGL query of that state, so tests
compare the exporter's "restored" against something it did not compute.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np  # noqa: E402
from OpenGL import GL  # noqa: E402

from vmafx.formats import PixelFormat  # noqa: E402
from vmafx.gl import PlaneFormat, plane_formats  # noqa: E402

VERTEX = """#version 330 core
void main() {
    // one triangle covering the viewport: (-1,-1) (3,-1) (-1,3)
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
"""

FRAGMENT = """#version 330 core
uniform sampler2D src;
uniform float scale;   // 255 or 65535: the texture's normalised range
uniform int step;      // 1, or 64 for P010 (its 6 low bits stay zero)
uniform int maxcode;   // 255, 1023, 65472 (P010) ...
uniform int frame;
out vec4 color;
void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    vec4 s = texelFetch(src, p, 0);
    int d = ((p.x * 7 + p.y * 13 + frame) % 5) - 2;
    ivec2 k = ivec2(round(s.rg * scale));
    k = clamp(k + d * step, 0, maxcode);
    color = vec4(vec2(k) / scale, 0.0, 1.0);
}
"""


@dataclass(frozen=True)
class Case:
    """One frame format to produce: a vendored pair stored as ``fmt``."""

    id: str
    pair_prefix: str
    fmt: str
    step: int
    maxcode: int


CASES = (
    Case("yuv420p-R8", "p01", "yuv420p", 1, 255),
    Case("yuv420p-odd-641x361", "p16", "yuv420p", 1, 255),
    Case("yuv420p10-R16", "p15", "yuv420p", 1, 1023),
    Case("nv12-R8+GR88", "p01", "nv12", 1, 255),
    Case("p010-R16+GR1616", "p15", "p010", 64, 65472),
)


def dither_expected(planes, frame: int, step: int, maxcode: int, formats) -> list[np.ndarray]:
    """What the shader writes: plane + ((x*7 + y*13 + frame) % 5 - 2) * step, clamped, per channel."""
    out = []
    for a, (shape, pf) in zip(planes, formats):
        a = np.asarray(a)
        comps = shape.components
        y = np.arange(a.shape[0])[:, None]
        x = (np.arange(a.shape[1]) // comps)[None, :]
        d = ((x * 7 + y * 13 + frame) % 5) - 2
        v = np.clip(a.astype(np.int64) + d * step, 0, maxcode)
        out.append(v.astype(a.dtype))
    return out


def _stored_frames(path, fmt: PixelFormat, bitdepth: int, n: int | None) -> list[list[np.ndarray]]:
    """A clip's frames as a buffer stores them (ceil-size chroma; NV12/P010 interleaved)."""
    from vmafx.frames import to_semi_planar
    from vmafx.io.video import open_video

    out = []
    with open_video(path) as r:
        for frame in r:
            planes = [np.ascontiguousarray(p) for p in frame]
            if fmt.semi_planar:
                planes, _ = to_semi_planar(planes, bitdepth)
            out.append([np.ascontiguousarray(p) for p in planes])
            if n is not None and len(out) == n:
                break
    return out


def load_case(case: Case, frames: int | None = None):
    """(width, height, PixelFormat, bitdepth, ref planes per frame, dist planes per frame) of a case."""
    from tests.reference import vendored_pairs

    pair = next(p for p in vendored_pairs() if p.id.startswith(case.pair_prefix))
    fmt = PixelFormat(case.fmt)
    bitdepth = pair.bitdepth
    refs = _stored_frames(pair.ref_file, fmt, bitdepth, frames)
    dists = _stored_frames(pair.dist_file, fmt, bitdepth, frames)
    n = min(len(refs), len(dists))
    return pair.width, pair.height, fmt, fmt.fixed_bitdepth() or bitdepth, refs[:n], dists[:n]


def _dtype(pf: PlaneFormat):
    return np.uint8 if pf.bytes_per_sample == 1 else np.uint16


class GlProducer:
    """Textures, uploads, the dither render pass and read-backs, in the current GL context."""

    def __init__(self):
        self.vao = GL.glGenVertexArrays(1)
        self.fbo = GL.glGenFramebuffers(1)
        self.program = self._program()
        self.textures: list[int] = []

    @staticmethod
    def _program() -> int:
        def compile_(kind, src):
            sh = GL.glCreateShader(kind)
            GL.glShaderSource(sh, src)
            GL.glCompileShader(sh)
            if not GL.glGetShaderiv(sh, GL.GL_COMPILE_STATUS):
                raise RuntimeError(f"shader compile failed: {GL.glGetShaderInfoLog(sh)}")
            return sh

        vs, fs = compile_(GL.GL_VERTEX_SHADER, VERTEX), compile_(GL.GL_FRAGMENT_SHADER, FRAGMENT)
        prog = GL.glCreateProgram()
        GL.glAttachShader(prog, vs)
        GL.glAttachShader(prog, fs)
        GL.glLinkProgram(prog)
        if not GL.glGetProgramiv(prog, GL.GL_LINK_STATUS):
            raise RuntimeError(f"program link failed: {GL.glGetProgramInfoLog(prog)}")
        GL.glDeleteShader(vs)
        GL.glDeleteShader(fs)
        return prog

    def make_textures(self, width: int, height: int, fmt, bitdepth: int) -> list[int]:
        """One immutable texture per stored plane, in the plane's format."""
        out = []
        for shape, pf in plane_formats(fmt, width, height, bitdepth):
            t = int(GL.glGenTextures(1))
            GL.glBindTexture(GL.GL_TEXTURE_2D, t)
            GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, pf.gl_internal, shape.width, shape.height)
            GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
            GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
            out.append(t)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        self.textures += out
        return out

    def make_texture(self, internal: int, width: int, height: int) -> int:
        t = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_2D, t)
        GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, internal, width, height)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        self.textures.append(t)
        return t

    def upload(self, textures, planes, formats) -> None:
        for p, v in ((GL.GL_UNPACK_ALIGNMENT, 1), (GL.GL_UNPACK_ROW_LENGTH, 0), (GL.GL_UNPACK_SKIP_ROWS, 0),
                     (GL.GL_UNPACK_SKIP_PIXELS, 0), (GL.GL_UNPACK_SWAP_BYTES, 0)):
            GL.glPixelStorei(p, v)
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
        for t, a, (shape, pf) in zip(textures, planes, formats):
            a = np.ascontiguousarray(a, dtype=_dtype(pf))
            assert a.shape == (shape.height, shape.width * shape.components), (a.shape, shape)
            GL.glBindTexture(GL.GL_TEXTURE_2D, t)
            GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, shape.width, shape.height, pf.gl_format, pf.gl_type, a)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)

    def render_dither(self, src, dst, formats, frame: int, step: int, maxcode: int) -> None:
        """dst[i] = src[i] + dither, rendered by the fragment shader into each render-target texture."""
        GL.glUseProgram(self.program)
        GL.glBindVertexArray(self.vao)
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, self.fbo)
        GL.glDisable(GL.GL_SCISSOR_TEST)
        GL.glDisable(GL.GL_BLEND)
        GL.glColorMask(True, True, True, True)
        GL.glActiveTexture(GL.GL_TEXTURE0)
        for s, d, (shape, pf) in zip(src, dst, formats):
            GL.glFramebufferTexture2D(GL.GL_DRAW_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, d, 0)
            GL.glDrawBuffers(1, [GL.GL_COLOR_ATTACHMENT0])
            status = GL.glCheckFramebufferStatus(GL.GL_DRAW_FRAMEBUFFER)
            assert status == GL.GL_FRAMEBUFFER_COMPLETE, hex(status)
            GL.glViewport(0, 0, shape.width, shape.height)
            GL.glBindTexture(GL.GL_TEXTURE_2D, s)
            GL.glUniform1i(GL.glGetUniformLocation(self.program, "src"), 0)
            GL.glUniform1f(GL.glGetUniformLocation(self.program, "scale"), 255.0 if pf.bytes_per_sample == 1 else 65535.0)
            GL.glUniform1i(GL.glGetUniformLocation(self.program, "step"), step)
            GL.glUniform1i(GL.glGetUniformLocation(self.program, "maxcode"), maxcode)
            GL.glUniform1i(GL.glGetUniformLocation(self.program, "frame"), frame)
            GL.glDrawArrays(GL.GL_TRIANGLES, 0, 3)
        GL.glFramebufferTexture2D(GL.GL_DRAW_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, 0, 0)
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, 0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)

    def read_back(self, textures, formats) -> list[np.ndarray]:
        """The textures' rows on the host (the host twin of an export)."""
        out = []
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
        # every pack parameter: a producer's skip rows/pixels would write past the array
        for p, v in ((GL.GL_PACK_ALIGNMENT, 1), (GL.GL_PACK_ROW_LENGTH, 0), (GL.GL_PACK_SKIP_ROWS, 0),
                     (GL.GL_PACK_SKIP_PIXELS, 0), (GL.GL_PACK_SWAP_BYTES, 0), (GL.GL_PACK_LSB_FIRST, 0)):
            GL.glPixelStorei(p, v)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self.fbo)
        for t, (shape, pf) in zip(textures, formats):
            GL.glFramebufferTexture2D(GL.GL_READ_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, t, 0)
            GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT0)
            a = np.zeros((shape.height, shape.width * shape.components), dtype=_dtype(pf))
            GL.glReadPixels(0, 0, shape.width, shape.height, pf.gl_format, pf.gl_type, a.ctypes.data_as(ctypes.c_void_p))
            out.append(a)
        GL.glFramebufferTexture2D(GL.GL_READ_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, 0, 0)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, 0)
        return out

    @staticmethod
    def fence():
        """The producer's acquire: a GL fence after its rendering, flushed."""
        s = GL.glFenceSync(GL.GL_SYNC_GPU_COMMANDS_COMPLETE, 0)
        GL.glFlush()
        return s

    def close(self) -> None:
        if self.textures:
            GL.glDeleteTextures(self.textures)
            self.textures = []
        GL.glDeleteFramebuffers(1, [self.fbo])
        GL.glDeleteVertexArrays(1, [self.vao])
        GL.glDeleteProgram(self.program)


# ------------------------------------------------------------------------ a producer state off its defaults

class BusyState:
    """Puts every piece of state the exporter touches off its default, with objects of its own."""

    def __init__(self):
        self.read_fbo = int(GL.glGenFramebuffers(1))
        self.draw_fbo = int(GL.glGenFramebuffers(1))
        self.rb = int(GL.glGenRenderbuffers(1))
        self.tex = [int(t) for t in GL.glGenTextures(3)]
        self.pack = int(GL.glGenBuffers(1))
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, self.rb)
        GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, GL.GL_RGBA8, 8, 8)
        for t in self.tex:
            GL.glBindTexture(GL.GL_TEXTURE_2D, t)
            GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, 8, 8)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.read_fbo)
        GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, self.tex[0], 0)
        GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT1, GL.GL_TEXTURE_2D, self.tex[1], 0)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.draw_fbo)
        GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_RENDERBUFFER, self.rb)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, self.pack)
        GL.glBufferData(GL.GL_PIXEL_PACK_BUFFER, 4096, None, GL.GL_STREAM_READ)
        self.reset()

    def apply(self) -> None:
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self.read_fbo)
        GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT1)
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, self.draw_fbo)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, self.rb)
        GL.glEnablei(GL.GL_SCISSOR_TEST, 0)
        GL.glEnablei(GL.GL_SCISSOR_TEST, 3)
        GL.glColorMaski(0, True, False, True, False)
        GL.glColorMaski(2, False, True, False, True)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, self.pack)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 2)
        GL.glPixelStorei(GL.GL_PACK_ROW_LENGTH, 7)
        GL.glPixelStorei(GL.GL_PACK_SKIP_ROWS, 1)
        GL.glPixelStorei(GL.GL_PACK_SKIP_PIXELS, 2)
        GL.glPixelStorei(GL.GL_PACK_SWAP_BYTES, 1)
        GL.glActiveTexture(GL.GL_TEXTURE3)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.tex[2])

    @staticmethod
    def reset() -> None:
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
        for i in range(int(GL.glGetIntegerv(GL.GL_MAX_VIEWPORTS))):
            GL.glDisablei(GL.GL_SCISSOR_TEST, i)
        GL.glColorMask(True, True, True, True)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 4)
        GL.glPixelStorei(GL.GL_PACK_ROW_LENGTH, 0)
        GL.glPixelStorei(GL.GL_PACK_SKIP_ROWS, 0)
        GL.glPixelStorei(GL.GL_PACK_SKIP_PIXELS, 0)
        GL.glPixelStorei(GL.GL_PACK_SWAP_BYTES, 0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)

    def close(self) -> None:
        self.reset()
        GL.glDeleteFramebuffers(2, [self.read_fbo, self.draw_fbo])
        GL.glDeleteRenderbuffers(1, [self.rb])
        GL.glDeleteTextures(self.tex)
        GL.glDeleteBuffers(1, [self.pack])


def pyopengl_state() -> dict:
    """The same state as ``vmafx.gl.gl_state_snapshot``, asked through PyOpenGL (an independent reading)."""
    gi = lambda p: int(GL.glGetIntegerv(p))  # noqa: E731
    state = {
        "draw_framebuffer": gi(GL.GL_DRAW_FRAMEBUFFER_BINDING),
        "read_framebuffer": gi(GL.GL_READ_FRAMEBUFFER_BINDING),
        "renderbuffer": gi(GL.GL_RENDERBUFFER_BINDING),
        "read_buffer": gi(GL.GL_READ_BUFFER),
        "pixel_pack_buffer": gi(GL.GL_PIXEL_PACK_BUFFER_BINDING),
        "pack": {k: gi(p) for k, p in (
            ("alignment", GL.GL_PACK_ALIGNMENT), ("row_length", GL.GL_PACK_ROW_LENGTH),
            ("skip_rows", GL.GL_PACK_SKIP_ROWS), ("skip_pixels", GL.GL_PACK_SKIP_PIXELS),
            ("image_height", GL.GL_PACK_IMAGE_HEIGHT), ("skip_images", GL.GL_PACK_SKIP_IMAGES),
            ("swap_bytes", GL.GL_PACK_SWAP_BYTES), ("lsb_first", GL.GL_PACK_LSB_FIRST))},
        "active_texture": gi(GL.GL_ACTIVE_TEXTURE),
        "texture_binding_2d": gi(GL.GL_TEXTURE_BINDING_2D),
        "scissor_test": tuple(bool(GL.glIsEnabledi(GL.GL_SCISSOR_TEST, i))
                              for i in range(gi(GL.GL_MAX_VIEWPORTS))),
    }
    masks = []
    for i in range(gi(GL.GL_MAX_DRAW_BUFFERS)):
        m = (ctypes.c_ubyte * 4)()
        GL.glGetBooleani_v(GL.GL_COLOR_WRITEMASK, i, m)
        masks.append(tuple(bool(x) for x in m))
    state["color_writemask"] = tuple(masks)
    return state
