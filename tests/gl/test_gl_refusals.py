"""R11's refusals, run for real against a real EGL context (llvmpipe here, NVIDIA's on the H200).

Each refusal is checked three ways: the typed error (code and the field it
names), the producer's GL state before and after -- put off its defaults
first (:class:`~tests.gl.producer.BusyState`), read by ``vmafx.gl`` *and*
independently through PyOpenGL -- and the process's open fds (nothing left
behind).  The two device checks of the dma-buf path (export extension, DRM
device) are separate functions, each exercised on its own, so both run for
real on a display that fails the first.

A few tests drive the dma-buf export's decisions (linear in place, tiled
needs ALLOW_COPY, the exported fourcc, the bounded implicit-fence wait) with a
*stand-in* EGL driver, because no driver on any machine here exports a
dma-buf (PLATFORM.md); they say so in their names.
"""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest

try:
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    from OpenGL import GL
except Exception as e:  # noqa: BLE001 -- any failure to load PyOpenGL/GL is a skip with its reason
    pytest.skip(f"PyOpenGL or a GL library is missing ({type(e).__name__}: {e}); install vmafxd[gl] and Debian's "
                "libegl1 libgl1 libegl-mesa0 (scripts/bootstrap.sh test)", allow_module_level=True)

from vmafx import gl as vg  # noqa: E402
from vmafx.gl import constants as glc  # noqa: E402
from vmafx.gl import dmabuf_path as gldma  # noqa: E402
from vmafx.gl import entry_points as gle  # noqa: E402
from vmafx.gl.producer_state import _KeepProducerState  # noqa: E402
from vmafx.exceptions import LayoutError  # noqa: E402
from vmafx.frames import ALLOW_COPY  # noqa: E402
from vmafx.protocol.errors import ErrorCode  # noqa: E402
from vmafx.transport import OwnedFd  # noqa: E402

from .producer import BusyState, GlProducer, pyopengl_state  # noqa: E402

W, H = 64, 32
CPU = vg.DaemonDevice("cpu", 0)
CUDA = vg.DaemonDevice("cuda", 0, pci="0000:00:06.0", name="NVIDIA H200")
HIP = vg.DaemonDevice("hip", 0, pci="0000:03:00.0", name="gfx1036")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture(scope="module")
def gl(egl_session):
    egl_session.make_current()
    p = GlProducer()
    busy = BusyState()
    tex = SimpleNamespace(
        yuv420p=p.make_textures(W, H, "yuv420p", 8),
        nv12=p.make_textures(W, H, "nv12", 8),
        p010=p.make_textures(W, H, "p010", 10),
        rg8_chroma=p.make_texture(GL.GL_RG8, W // 2, H // 2),
        r8_chroma=p.make_texture(GL.GL_R8, W // 2, H // 2),
        r8_luma=p.make_texture(GL.GL_R8, W, H),
        r8_wrong_size=p.make_texture(GL.GL_R8, W // 2 + 1, H // 2),
    )
    GL.glFinish()
    yield SimpleNamespace(ctx=egl_session, producer=p, busy=busy, tex=tex)
    egl_session.make_current()
    busy.close()
    p.close()


def refused(gl, call, code: ErrorCode, field: str | tuple[str, ...]):
    """Run ``call`` with the producer's state off its defaults: it must raise ``code`` naming ``field``,
    leave the state exactly as it was (two independent readings) and leave no fd behind."""
    gl.ctx.make_current()
    gl.busy.apply()
    ours, theirs = vg.gl_state_snapshot(), pyopengl_state()
    assert ours == theirs, f"the two readings of the state differ:\n{ours}\n{theirs}"
    assert ours["draw_framebuffer"] and ours["read_framebuffer"] and ours["pixel_pack_buffer"], ours
    fds = _fds()
    with pytest.raises(vg.GlExportError) as ei:
        call()
    err = ei.value
    print(f"refused: {type(err).__name__} {err}")
    assert err.code == code, err
    fields = (field,) if isinstance(field, str) else field
    assert err.field in fields, err
    after_ours, after_theirs = vg.gl_state_snapshot(), pyopengl_state()
    assert after_ours == ours, f"the producer's GL state changed:\nbefore {ours}\nafter  {after_ours}"
    assert after_theirs == theirs, f"PyOpenGL reads a changed state:\nbefore {theirs}\nafter  {after_theirs}"
    assert GL.glGetError() == GL.GL_NO_ERROR, "a GL error flag was left for the producer"
    assert _fds() == fds, f"fds before {fds}, after {_fds()}"
    gl.busy.reset()
    return err


def _export(gl, textures, fmt="yuv420p", bitdepth=8, **kw):
    kw.setdefault("device", CPU)
    return lambda: vg.export_texture_planes(textures, W, H, fmt, bitdepth, trace=print, **kw)


def _display_has(ext: str) -> bool:
    """Independent of vmafx.gl: PyOpenGL's EGL binding asks the current display."""
    from OpenGL import EGL

    s = EGL.eglQueryString(EGL.eglGetCurrentDisplay(), EGL.EGL_EXTENSIONS) or b""
    return ext in s.decode().split()


def _has_drm_node(info) -> bool:
    """The display's device names a DRM node that exists (a driver may name one where /dev/dri is empty)."""
    return any(p and os.path.exists(p) for p in (info.drm_render_node, info.drm_device_file))


# ----------------------------------------------------------------------------- the producer's state


def test_the_two_readings_of_the_state_agree_and_the_busy_state_is_off_default(gl):
    gl.ctx.make_current()
    default = vg.gl_state_snapshot()
    gl.busy.apply()
    busy = vg.gl_state_snapshot()
    assert busy == pyopengl_state()
    changed = {k for k in busy if busy[k] != default[k]}
    assert changed >= {"draw_framebuffer", "read_framebuffer", "renderbuffer", "read_buffer", "pixel_pack_buffer",
                       "pack", "active_texture", "texture_binding_2d", "scissor_test", "color_writemask"}, changed
    gl.busy.reset()


def test_the_state_guard_puts_back_everything_it_changed(gl):
    """The restore itself, with every piece of state really changed inside the guard."""
    gl.ctx.make_current()
    gl.busy.apply()
    before = vg.gl_state_snapshot()
    g = gle._gl()
    with _KeepProducerState(g, gle._gl_context_info(g)):
        BusyState.reset()
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, gl.producer.fbo)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 8)
        GL.glPixelStorei(GL.GL_PACK_LSB_FIRST, 1)
        GL.glColorMaski(5, False, False, False, False)
        GL.glEnablei(GL.GL_SCISSOR_TEST, 7)
        GL.glActiveTexture(GL.GL_TEXTURE1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, gl.tex.r8_luma)
        assert vg.gl_state_snapshot() != before
    assert vg.gl_state_snapshot() == before == pyopengl_state()
    gl.busy.reset()


# ------------------------------------------------------------------------------------- texture formats

WRONG = [
    # (pixel format, bitdepth, which plane to replace, with what, field)
    ("yuv420p", 8, 1, "rg8_chroma", "planes[1]"),
    ("nv12", 8, 1, "r8_chroma", "planes[1]"),
    ("p010", 10, 0, "r8_luma", "planes[0]"),
    ("yuv420p", 8, 2, "r8_wrong_size", "planes[2]"),
    ("yuv420p", 8, 0, 987654, "planes[0]"),
]


@pytest.mark.parametrize("dsa", [True, False], ids=["dsa", "bind"])
@pytest.mark.parametrize("path,flags", [("dmabuf", 0), ("memory_object", ALLOW_COPY)])
@pytest.mark.parametrize("fmt,bitdepth,plane,wrong,field", WRONG)
def test_a_texture_of_the_wrong_format_is_einval_naming_the_plane(gl, monkeypatch, dsa, path, flags, fmt, bitdepth,
                                                                    plane, wrong, field):
    """R11: the texture's internal format (and size) must be the plane's; checked before any path work,
    with DSA queries or (``bind``) by binding on the producer's active unit and putting it back."""
    if not dsa:
        monkeypatch.setattr(gle._GlContextInfo, "dsa", property(lambda self: False))
    textures = list(getattr(gl.tex, fmt))
    textures[plane] = wrong if isinstance(wrong, int) else getattr(gl.tex, wrong)
    err = refused(gl, _export(gl, textures, fmt, bitdepth, path=path, flags=flags, device=CUDA if path ==
                              "memory_object" else CPU), ErrorCode.E_INVAL, field)
    assert isinstance(err, LayoutError) and isinstance(err, vg.GlInvalid)
    if wrong == "rg8_chroma":
        assert "GL_RG8" in err.message and "R8" in err.message
    if wrong == "r8_chroma":
        assert "GR88" in err.message


def test_a_texture_count_that_is_not_the_formats_is_einval(gl):
    refused(gl, _export(gl, gl.tex.yuv420p[:2]), ErrorCode.E_INVAL, "planes")


# ------------------------------------------------------------------- the dma-buf path's device checks

def test_export_extension_absent_is_enotsup_naming_it(gl):
    """R11: no EGL_MESA_image_dma_buf_export on the display -> E_NOTSUP naming the extension; directly and
    through the exporter."""
    gl.ctx.make_current()
    display = vg.current_egl()[0]
    if _display_has("EGL_MESA_image_dma_buf_export"):
        vg.require_dma_buf_export(display)  # present: the check passes
        pytest.skip("this display offers EGL_MESA_image_dma_buf_export (NVIDIA's does): its absence cannot be "
                    "shown here; the DRM-device check refuses instead (next test)")
    refused(gl, lambda: vg.require_dma_buf_export(display), ErrorCode.E_NOTSUP, "EGL_MESA_image_dma_buf_export")
    refused(gl, _export(gl, gl.tex.yuv420p, path="dmabuf"), ErrorCode.E_NOTSUP, "EGL_MESA_image_dma_buf_export")
    refused(gl, _export(gl, gl.tex.nv12, "nv12", path="auto", device=HIP), ErrorCode.E_NOTSUP,
            "EGL_MESA_image_dma_buf_export")


def test_a_display_without_a_drm_device_is_refused(gl):
    """R11 / ADR-2132 item 4: the display's EGL device has no DRM render node -> E_NOTSUP naming ``display``
    (llvmpipe's software device here; NVIDIA's device without /dev/dri on the H200)."""
    gl.ctx.make_current()
    display = vg.current_egl()[0]
    info = vg.egl_display_info(display)
    print(info.describe())
    if _has_drm_node(info):
        node = vg.display_render_node(display)
        assert os.path.exists(node), node
        pytest.skip(f"this display has a DRM device ({node}): the refusal cannot be shown here")
    err = refused(gl, lambda: vg.display_render_node(display), ErrorCode.E_NOTSUP, "display")
    assert "DRM device" in err.message
    for ext in info.device_extensions:  # the refusal comes from the real device query
        assert ext in err.message


def test_the_dmabuf_path_refuses_where_it_cannot_run(gl):
    """The whole dma-buf path on this display: the first of R11's device checks that fails is the refusal."""
    gl.ctx.make_current()
    info = vg.egl_display_info()
    if "EGL_MESA_image_dma_buf_export" not in info.extensions:
        want = "EGL_MESA_image_dma_buf_export"
    elif not _has_drm_node(info):
        want = "display"
    else:
        pytest.skip("this display has the export and a DRM device: the dma-buf path may run here")
    for fmt, bitdepth in (("yuv420p", 8), ("nv12", 8), ("p010", 10)):
        refused(gl, _export(gl, getattr(gl.tex, fmt), fmt, bitdepth, path="dmabuf", flags=ALLOW_COPY, device=HIP),
                ErrorCode.E_NOTSUP, want)


def test_pci_location_from_sysfs(tmp_path):
    """/sys/dev/char/MAJ:MIN/device resolved to its PCI function (a sysfs tree of the test's)."""
    sysfs = tmp_path / "sys"
    pci = sysfs / "devices" / "pci0000:00" / "0000:00:01.0" / "0000:03:00.0"
    plat = sysfs / "devices" / "platform" / "vgem"
    pci.mkdir(parents=True)
    plat.mkdir(parents=True)
    (sysfs / "dev" / "char" / "226:128").mkdir(parents=True)
    (sysfs / "dev" / "char" / "226:129").mkdir(parents=True)
    (sysfs / "dev" / "char" / "226:128" / "device").symlink_to(pci)
    (sysfs / "dev" / "char" / "226:129" / "device").symlink_to(plat)
    assert vg.pci_location_of_char_device(226, 128, str(sysfs)) == "0000:03:00.0"
    with pytest.raises(vg.GlNotSupported) as ei:
        vg.pci_location_of_char_device(226, 129, str(sysfs))
    assert ei.value.field == "device" and "not a PCI device" in ei.value.message
    with pytest.raises(vg.GlNotSupported) as ei:
        vg.pci_location_of_char_device(226, 130, str(sysfs))
    assert ei.value.field == "device"


def test_render_node_pci_of_real_files_without_a_pci_device(tmp_path):
    """The real /sys: /dev/null (1:3) has no bus device; a regular file is no render node."""
    with pytest.raises(vg.GlNotSupported) as ei:
        vg.render_node_pci("/dev/null")
    assert ei.value.field == "device" and "1:3" in ei.value.message
    f = tmp_path / "renderD128"
    f.write_bytes(b"")
    with pytest.raises(vg.GlNotSupported) as ei:
        vg.render_node_pci(str(f))
    assert ei.value.field == "display" and "not a character device" in ei.value.message


def test_another_gpus_render_node_is_refused_naming_the_device():
    """R11: the render node's PCI location must be the daemon device's."""
    with pytest.raises(vg.GlNotSupported) as ei:
        vg.require_same_device("0000:0a:00.0", HIP)
    assert ei.value.code == ErrorCode.E_NOTSUP and ei.value.field == "device"
    assert "0000:0a:00.0" in ei.value.message and "0000:03:00.0" in ei.value.message and "gfx1036" in ei.value.message
    vg.require_same_device("00000000:03:00.0", HIP)  # the same function spelled with an 8-digit domain
    vg.require_same_device("0000:00:06.0", vg.DaemonDevice("cuda", 0, pci="0000:00:06.0"))
    assert vg.same_pci("0000:3B:00.0", "0000:3b:00.0") and not vg.same_pci("0000:3b:00.0", "0000:3b:00.1")
    with pytest.raises(vg.GlNotSupported) as ei:
        vg.require_same_device("0000:03:00.0", vg.DaemonDevice("hip", 0))
    assert ei.value.field == "device" and "no PCI location" in ei.value.message
    vg.require_same_device("0000:03:00.0", CPU)  # the cpu lane reads through a host mapping: no GPU to match


def test_the_daemon_device_comes_from_hello_lanes():
    lanes = [{"lane": "cpu", "devices": [{"device": 0, "name": "cpu", "sessions": 0}]},
             {"lane": "cuda", "runtime": "cuda", "devices": [{"device": 0, "name": "NVIDIA H200",
                                                              "pci": "0000:00:06.0", "arch": "sm_90"}]}]
    assert vg.DaemonDevice.from_lanes(lanes) == vg.DaemonDevice("cuda", 0, "0000:00:06.0", "NVIDIA H200")
    assert vg.DaemonDevice.from_lanes(lanes, lane="cpu").lane == "cpu"
    assert vg.DaemonDevice.from_lanes(lanes[:1]).lane == "cpu"
    with pytest.raises(vg.GlInvalid) as ei:
        vg.DaemonDevice.from_lanes(lanes, lane="cuda", device=1)
    assert ei.value.field == "device"


# ----------------------------------------------------------------------------------------------- syncs

def test_an_unsignalled_egl_reusable_sync_is_busy_and_then_ok(gl):
    """R11 / ADR-2132 item 5: the acquire is checked on the host first -- before the textures are even looked
    at (wrong ones here): unsignalled -> E_BUSY; signalled -> the export goes on to its next check."""
    gl.ctx.make_current()
    if not _display_has("EGL_KHR_reusable_sync"):
        pytest.skip("the display has no EGL_KHR_reusable_sync")
    wrong = [gl.tex.yuv420p[0], gl.tex.rg8_chroma, gl.tex.yuv420p[2]]
    with vg.EglSync.reusable() as sync:
        refused(gl, lambda: vg.check_sync_acquire(sync), ErrorCode.E_BUSY, "sync")
        refused(gl, _export(gl, wrong, sync=sync), ErrorCode.E_BUSY, "sync")
        sync.signal()
        vg.check_sync_acquire(sync)
        refused(gl, _export(gl, wrong, sync=sync), ErrorCode.E_INVAL, "planes[1]")
        sync.unsignal()
        refused(gl, lambda: vg.check_sync_acquire(sync), ErrorCode.E_BUSY, "sync")


def test_an_unflushed_gl_fence_is_busy_until_flushed(gl):
    """A GL fence right after a lot of unflushed rendering: glClientWaitSync(sync, 0, 0) usually says not yet
    (E_BUSY; whether it does is the driver's timing, so the deterministic busy case is the EGL reusable sync
    above); the retry helper flushes once and then sees it signal."""
    gl.ctx.make_current()
    p = gl.producer
    big = p.make_texture(GL.GL_R8, 2048, 2048)
    out = p.make_texture(GL.GL_R8, 2048, 2048)
    fmts = vg.plane_formats("yuv400p", 2048, 2048, 8)
    outcomes = []
    for k in range(3):
        for j in range(4):
            p.render_dither([big], [out], fmts, j, 1, 255)
        sync = GL.glFenceSync(GL.GL_SYNC_GPU_COMMANDS_COMPLETE, 0)
        try:
            try:
                vg.check_sync_acquire(sync)
                outcomes.append("signalled")
            except vg.GlBusy as e:
                assert e.field == "sync" and e.code == ErrorCode.E_BUSY
                outcomes.append("E_BUSY")
            tries = vg.wait_sync_acquire(sync, timeout_s=10.0)
            vg.check_sync_acquire(sync)
            outcomes[-1] += f" -> ok after {tries} retries"
        finally:
            GL.glDeleteSync(sync)
    print(f"unflushed fences on {gl.ctx.gl_renderer}: {outcomes}")


def test_the_retry_helper_waits_until_signalled_and_times_out_naming_the_sync(gl):
    gl.ctx.make_current()
    if not _display_has("EGL_KHR_reusable_sync"):
        pytest.skip("the display has no EGL_KHR_reusable_sync")
    with vg.EglSync.reusable() as sync:
        t = threading.Timer(0.05, sync.signal)
        start = time.monotonic()
        t.start()
        tries = vg.wait_sync_acquire(sync, timeout_s=5.0)
        t.join()
        assert tries > 0 and time.monotonic() - start >= 0.04
    with vg.EglSync.reusable() as sync:
        start = time.monotonic()
        with pytest.raises(vg.GlTimeout) as ei:
            vg.wait_sync_acquire(sync, timeout_s=0.05)
        assert ei.value.field == "sync" and ei.value.code == ErrorCode.E_TIMEOUT
        assert 0.05 <= time.monotonic() - start < 2.0


def test_a_signalled_gl_fence_passes_and_a_bogus_sync_is_einval(gl):
    gl.ctx.make_current()
    s = GL.glFenceSync(GL.GL_SYNC_GPU_COMMANDS_COMPLETE, 0)
    GL.glFinish()
    vg.check_sync_acquire(s)  # PyOpenGL's GLsync pointer
    GL.glDeleteSync(s)
    refused(gl, lambda: vg.check_sync_acquire(0x1234), ErrorCode.E_INVAL, "sync")
    refused(gl, lambda: vg.check_sync_acquire(object()), ErrorCode.E_INVAL, "sync")


def test_no_current_context_is_estate(gl):
    from OpenGL import EGL

    dpy = EGL.eglGetCurrentDisplay()
    assert EGL.eglMakeCurrent(dpy, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)
    try:
        with pytest.raises(vg.GlWrongState) as ei:
            _export(gl, gl.tex.yuv420p)()
        assert ei.value.field == "context" and ei.value.code == ErrorCode.E_STATE
    finally:
        gl.ctx.make_current()


# ---------------------------------------------------------------------------------- memory-object path

def test_the_memory_object_path_without_allow_copy_is_enotsup_naming_the_flag(gl):
    """It is a GPU copy (glReadPixels into the VMM buffer): R11 wants ALLOW_COPY."""
    for fmt, bitdepth in (("yuv420p", 8), ("p010", 10)):
        err = refused(gl, _export(gl, getattr(gl.tex, fmt), fmt, bitdepth, path="memory_object", device=CUDA),
                      ErrorCode.E_NOTSUP, "flags")
        assert "ALLOW_COPY" in err.message
    err = refused(gl, _export(gl, gl.tex.yuv420p, path="auto", device=CUDA), ErrorCode.E_NOTSUP, "flags")


def test_the_memory_object_path_without_cuda_is_refused(gl):
    from vmafx.cuda_frames import CudaProducer, CudaUnavailable

    try:
        CudaProducer(0).close()
    except (CudaUnavailable, RuntimeError):
        pass
    else:
        pytest.skip("CUDA works here: the memory-object path runs (tests/gl/test_gl_nvidia.py)")
    info = gle._gl_context_info(gle._gl())
    want = "producer" if "GL_EXT_memory_object_fd" in info.extensions else "GL_EXT_memory_object_fd"
    err = refused(gl, _export(gl, gl.tex.yuv420p, path="memory_object", flags=ALLOW_COPY, device=CUDA),
                  ErrorCode.E_NOTSUP, want)
    print(err.message)


class _MemfdMemory:
    """A stand-in for a VmmFrameBuffer: a memfd with the same plane layout (not importable by any GL)."""

    def __init__(self, fmt="yuv420p", bitdepth=8):
        self.planes = []
        off = 0
        for shape, _ in vg.plane_formats(fmt, W, H, bitdepth):
            pitch = (shape.row_bytes + 255) // 256 * 256
            self.planes.append(SimpleNamespace(offset=off, pitch=pitch))
            off += pitch * shape.height
        self.size = (off + 4095) // 4096 * 4096
        self.fd = OwnedFd(os.memfd_create("gl-standin", os.MFD_CLOEXEC))
        os.ftruncate(self.fd.fileno(), self.size)

    def registration(self):
        return {"kind": "memfd", "device": None}

    def close(self):
        self.fd.close()


def test_a_memory_object_gl_cannot_back_is_refused_and_leaves_nothing(gl):
    """The import steps run for real: llvmpipe takes a memfd into a memory object but cannot back a buffer with
    it (GL_OUT_OF_MEMORY, PLATFORM.md), so the path is refused -- state restored, the memory object and GL's
    dup of the fd freed, every fd of ours closed."""
    if "llvmpipe" not in gl.ctx.gl_renderer:
        pytest.skip("only on llvmpipe: a vendor driver is not fed a foreign fd as an opaque memory fd")
    mem = _MemfdMemory()
    try:
        err = refused(gl, _export(gl, gl.tex.yuv420p, path="memory_object", flags=ALLOW_COPY, device=CPU,
                                  memory=mem), ErrorCode.E_NOTSUP, ("GL_EXT_memory_object", "GL_EXT_memory_object_fd"))
        assert "GL_OUT_OF_MEMORY" in err.message or "glImportMemoryFdEXT" in err.message
        assert not mem.fd.closed  # the caller's memory stays the caller's
    finally:
        mem.close()


def test_a_memory_layout_glreadpixels_cannot_write_is_einval(gl):
    mem = _MemfdMemory()
    try:
        mem.planes[1] = SimpleNamespace(offset=mem.planes[1].offset, pitch=W // 2 - 1)
        refused(gl, _export(gl, gl.tex.yuv420p, path="memory_object", flags=ALLOW_COPY, device=CPU, memory=mem),
                ErrorCode.E_INVAL, "memory.planes[1].pitch")
    finally:
        mem.close()


# ----------------------------------------------- the dma-buf export's decisions, with a stand-in EGL driver

class _FakeDriver:
    """Answers the EGL export calls as a driver would: each texture exports as a memfd (a stand-in dma-buf),
    with the fourcc, modifier, offset and stride the test says."""

    def __init__(self, modifier: int, fourccs=None, make_fd=None):
        self.modifier = modifier
        self.fourccs = fourccs
        self.make_fd = make_fd or (lambda: os.memfd_create("fake-dmabuf", os.MFD_CLOEXEC))
        self.images: dict[int, int] = {}
        self.exported: list[int] = []
        self.calls = 0

    def eglCreateImageKHR(self, dpy, ctx, target, buffer, attrs):
        assert target == glc.EGL_GL_TEXTURE_2D_KHR
        self.calls += 1
        self.images[self.calls] = buffer.value
        return self.calls

    def eglExportDMABUFImageQueryMESA(self, dpy, img, fourcc, nplanes, mods):
        tex = self.images[img]
        fourcc._obj.value = self.fourccs[tex]
        nplanes._obj.value = 1
        mods[0] = self.modifier
        return 1

    def eglExportDMABUFImageMESA(self, dpy, img, fds, strides, offsets):
        fd = self.make_fd()
        try:
            os.ftruncate(fd, 1 << 16)
        except OSError:
            pass  # an eventfd (the never-ready stand-in) has no size
        self.exported.append(fd)
        fds[0], strides[0], offsets[0] = fd, 128, 64
        return 1

    def eglDestroyImageKHR(self, dpy, img):
        self.images.pop(img)
        return 1


def _fake_export(monkeypatch, gl, driver, fmt="yuv420p"):
    planes = vg.plane_formats(fmt, W, H, 8)
    by_tex = {t: pf.drm_fourcc for t, (_, pf) in zip(getattr(gl.tex, fmt), planes)}
    driver.fourccs = driver.fourccs or by_tex
    monkeypatch.setattr(gldma, "_egl", lambda: driver)
    monkeypatch.setattr(vg.GlFrameExporter, "_setup_dmabuf", lambda self: setattr(self, "render_node", "/nonexistent"))


def test_stand_in_driver_a_linear_export_is_read_in_place(gl, monkeypatch):
    """No copy: the frame buffer is the exported dma-bufs (modifier 0), one fd per plane at the export's
    offset and pitch; the fds are the exporter's (closed with it); the state is untouched."""
    driver = _FakeDriver(vg.DRM_FORMAT_MOD_LINEAR)
    _fake_export(monkeypatch, gl, driver)
    gl.ctx.make_current()
    gl.busy.apply()
    before = vg.gl_state_snapshot()
    x = vg.GlFrameExporter(W, H, "yuv420p", device=CPU, path="dmabuf", trace=print)
    f = x.export(gl.tex.yuv420p)
    assert (f.path, f.copied, f.new_buffer, f.exported_modifiers) == ("dmabuf", False, True, (0, 0, 0))
    assert f.buffer.kind == "dmabuf" and f.buffer.modifier == 0
    assert [(p.fd, p.offset, p.pitch) for p in f.buffer.planes] == [(0, 64, 128), (1, 64, 128), (2, 64, 128)]
    assert [fd.fileno() for fd in f.buffer.fds] == driver.exported
    f2 = x.export(gl.tex.yuv420p)
    assert f2.buffer is f.buffer and not f2.new_buffer and driver.calls == 3  # exported once, reused
    assert vg.gl_state_snapshot() == before and not driver.images
    x.close()
    for fd in driver.exported:
        with pytest.raises(OSError):
            os.fstat(fd)
    gl.busy.reset()


@pytest.mark.parametrize("modifier", [vg.DRM_FORMAT_MOD_INVALID, 0x0100000000000002],
                         ids=["MOD_INVALID", "tiled"])
def test_stand_in_driver_a_tiled_export_needs_allow_copy(gl, monkeypatch, modifier):
    """R11 / ADR-2132 item 2: tiled or DRM_FORMAT_MOD_INVALID -> E_NOTSUP naming flags without ALLOW_COPY
    (its exported fds closed); with it, the GPU copy is tried and here refused at the first capability it
    lacks (llvmpipe cannot import the linear buffer back: EGL_EXT_image_dma_buf_import)."""
    driver = _FakeDriver(modifier)
    _fake_export(monkeypatch, gl, driver)
    err = refused(gl, _export(gl, gl.tex.yuv420p, path="dmabuf"), ErrorCode.E_NOTSUP, "flags")
    assert "ALLOW_COPY" in err.message and hex(modifier) in err.message
    driver.exported.clear()
    if _display_has("EGL_EXT_image_dma_buf_import"):
        pytest.skip("this display imports dma-bufs: the GBM copy would need a real render node")
    refused(gl, _export(gl, gl.tex.yuv420p, path="dmabuf", flags=ALLOW_COPY), ErrorCode.E_NOTSUP,
            "EGL_EXT_image_dma_buf_import")


def test_stand_in_driver_a_texture_exported_in_another_format_is_einval(gl, monkeypatch):
    """ADR-2132 item 2: the format is checked from the export too."""
    driver = _FakeDriver(0)
    t = gl.tex.yuv420p
    driver.fourccs = {t[0]: glc.DRM_FORMAT_R8, t[1]: glc.DRM_FORMAT_GR88, t[2]: glc.DRM_FORMAT_R8}
    _fake_export(monkeypatch, gl, driver)
    err = refused(gl, _export(gl, t, path="dmabuf"), ErrorCode.E_INVAL, "planes[1]")
    assert "GR88" in err.message and "R8" in err.message


def test_stand_in_driver_implicit_fences_are_waited_for_at_most_the_bound(gl, monkeypatch):
    """ADR-2132 item 5: after the export each dma-buf is polled readable (its implicit write fences), bounded.
    An fd that never polls readable (an unsignalled eventfd) times out naming the plane's fd."""
    driver = _FakeDriver(0, make_fd=lambda: os.eventfd(0, os.EFD_CLOEXEC))
    _fake_export(monkeypatch, gl, driver)
    driver.exported.clear()
    gl.ctx.make_current()
    gl.busy.apply()
    before = vg.gl_state_snapshot()
    fds = _fds()
    x = vg.GlFrameExporter(W, H, "yuv420p", device=CPU, path="dmabuf", implicit_fence_timeout_s=0.1)
    start = time.monotonic()
    with pytest.raises(vg.GlTimeout) as ei:
        x.export(gl.tex.yuv420p)
    took = time.monotonic() - start
    assert ei.value.field == "planes[0].fd" and ei.value.code == ErrorCode.E_TIMEOUT
    assert 0.095 <= took < 1.0, took  # poll()'s timeout may end a fraction of a millisecond early
    x.close()
    assert vg.gl_state_snapshot() == before and _fds() == fds
    gl.busy.reset()
