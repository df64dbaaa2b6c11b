"""GL frames into a ``--lane cuda`` daemon through the memory-object path, on the H200 (marked gpu).

The producer is a PyOpenGL program on NVIDIA's EGL device platform
(``EGL_EXT_platform_device``; tests/gl/conftest.py makes the context).  Per
frame it uploads the reference planes into textures and *renders* the
distorted ones (dither shader); ``vmafx.gl.GlFrameExporter(path=
"memory_object")`` imports a CUDA VMM buffer into GL as a memory object and
``glReadPixels`` writes each texture's rows into it; the VMM fd is registered
once as a ``cuda_vmm`` buffer and reused after every release.

What must hold (R11's NVIDIA alternative, R13):
* every feature of every frame (vmaf_v0.6.1 + psnr + float_ssim +
  float_ms_ssim) equals, bit for bit, the same frames uploaded from the host
  (memfds) through the same daemon -- for R8, GR88 (NV12), R16 (10-bit) and
  GR1616 (P010) planes and an odd size;
* the daemon's host-copy counter does not move during the GL session;
* the producer's GL state after every export equals before (vmafx.gl's reading
  and PyOpenGL's);
* CUDA reads back from the VMM buffer exactly the planes GL holds.

Everything is printed (EGL display, extensions, devices, each step), so one
run says what happened.  It skips cleanly without CUDA or without an NVIDIA
EGL context.  The EGL dma-buf path is also tried here and must be refused
(no DRM device on the H200, PLATFORM.md) -- printed with the driver's answer.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

try:
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    from OpenGL import GL
except Exception as e:  # noqa: BLE001
    pytest.skip(f"PyOpenGL or a GL library is missing ({type(e).__name__}: {e}); install vmafxd[gl] and the GL "
                "loader libraries (libegl1 libopengl0 libglvnd0 libgldispatch0) with NVIDIA's EGL",
                allow_module_level=True)

from vmafx import gl as vg  # noqa: E402
from vmafx.gl import constants as glc  # noqa: E402
from vmafx.gl import entry_points as gle  # noqa: E402
from vmafx.frames import ALLOW_COPY  # noqa: E402
from vmafx.protocol.errors import ErrorCode  # noqa: E402

from ..daemon.conftest import Daemon  # noqa: E402
from ..daemon.rawclient import RawClient  # noqa: E402
from .producer import CASES, GlProducer, dither_expected, load_case  # noqa: E402
from .session import differing, gl_session, memfd_session  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def nvidia(egl_session):
    """The session's EGL context if it is NVIDIA's and CUDA works here; else a skip saying which is missing."""
    egl_session.make_current()
    info = egl_session.info()
    print("\n" + info.describe())
    gl_info = gle._gl_context_info(gle._gl())
    print(f"GL: {gl_info.version_string} | {gl_info.renderer} | {gl_info.vendor} | platform {egl_session.platform}")
    for ext in ("GL_EXT_memory_object", "GL_EXT_memory_object_fd", "GL_EXT_semaphore_fd", "GL_OES_EGL_image",
                "GL_ARB_direct_state_access"):
        print(f"  {ext}: {ext in gl_info.extensions}")
    try:
        from vmafx.cuda_frames import CudaProducer

        p = CudaProducer(0)
        bus = vg.GlFrameExporter._producer_pci(p)
        print(f"CUDA device 0 at PCI {bus}; EGL display's CUDA device: {info.cuda_device}")
        p.close()
    except Exception as e:  # noqa: BLE001 -- any CUDA failure: skip with its words
        pytest.skip(f"no CUDA here ({type(e).__name__}: {e})")
    if "llvmpipe" in gl_info.renderer or "NVIDIA" not in (gl_info.vendor + gl_info.renderer):
        pytest.skip(f"the EGL context is {gl_info.renderer!r} ({gl_info.vendor}), not NVIDIA's: install the GL loader "
                    "libraries (GLVND libEGL/libOpenGL) next to NVIDIA's libEGL_nvidia, and use the EGL device "
                    "platform (VMAFX_GL_PLATFORM=device)")
    assert "GL_EXT_memory_object_fd" in gl_info.extensions, \
        "NVIDIA's GL without GL_EXT_memory_object_fd: PLATFORM.md measured it present on the H200"
    return egl_session


@pytest.fixture(scope="module")
def cuda_daemon(nvidia):
    d = Daemon("--lane", "cuda", "--gpu-batch", "4", workers=1, fence_timeout_ms=2000)
    try:
        yield d
    finally:
        alive = d.proc.poll() is None
        rc = d.stop() if alive else d.proc.returncode
        log = d.log()
        d.close()
        assert alive and rc == 0, f"the daemon exited with {rc}:\n{log[-4000:]}"


def _cuda_device(c) -> vg.DaemonDevice:
    hello = c.hello()
    print(f"daemon lanes: {hello.lanes}")
    dev = vg.DaemonDevice.from_lanes(hello.lanes, lane="cuda")
    print(f"daemon device: {dev}")
    return dev


def _exporters(device):
    return lambda p, w, h, f, b: vg.GlFrameExporter(w, h, f, b, device=device, flags=ALLOW_COPY, path="memory_object",
                                                    trace=print)


def _vmm_planes(exporter) -> list[np.ndarray]:
    """The VMM buffer's planes as CUDA reads them (device -> host), in the exporter's plane layout."""
    from vmafx.cuda_frames import _ck

    mem = exporter.memory
    prod = mem.producer
    d = prod.d
    prod.make_current()
    host = np.empty(mem.size, np.uint8)
    _ck(d, "cuMemcpyDtoH", d.cuMemcpyDtoH(host.ctypes.data, mem.ptr, mem.size))
    out = []
    for spec, (shape, pf) in zip(mem.planes, exporter.planes):
        rows = np.lib.stride_tricks.as_strided(host[spec.offset:], (shape.height, shape.row_bytes), (spec.pitch, 1))
        out.append(rows.copy().view(np.uint8 if pf.bytes_per_sample == 1 else "<u2"))
    return out


def _check_vmm(exporter, want, role):
    got = _vmm_planes(exporter)
    for k, (a, b) in enumerate(zip(got, want)):
        b = np.asarray(b)
        same = int(np.count_nonzero(a == b))
        print(f"{role} plane {k}: CUDA read back {same} of {b.size} samples right (shape {b.shape}, {b.dtype})")
        assert a.shape == b.shape and same == b.size, f"{role} plane {k}: {b.size - same} samples differ"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_gl_frames_score_bit_for_bit_like_host_uploads(cuda_daemon, nvidia, case):
    c = RawClient(cuda_daemon.socket, f"gl-nvidia-{case.id}")
    device = _cuda_device(c)
    diff: list = []
    for attempt in range(4):  # R12: a differing cell is repeated (up to four times) and every repeat printed
        run = gl_session(c, nvidia, case, _exporters(device), check_buffers=_check_vmm if attempt == 0 else None)
        print(f"{case.id}: exports {run.exports[0]}, zero_copy {run.zero_copy}, host copies "
              f"{run.copies_before} -> {run.copies_after}, state checks {run.state_checks}")
        assert run.exports[0] == ("memory_object", True, "memory_object", True)
        assert [zc for _, zc in run.zero_copy] == [True, True], run.zero_copy
        assert run.copies_after == run.copies_before, "the GL session moved bytes through the host"
        assert run.state_checks == len(run.refs)
        twin = memfd_session(c, run)
        for i in sorted(run.results):
            print(f"{case.id} frame {i}: GL vmaf {run.results[i].get('vmaf')!r} psnr_y {run.results[i].get('psnr_y')!r}"
                  f" | memfd vmaf {twin[i].get('vmaf')!r} psnr_y {twin[i].get('psnr_y')!r}")
        diff = differing(run.results, twin)
        if not diff:
            break
        print(f"R12 repeat {attempt + 1}/4: {len(diff)} differing cells, first: {diff[:8]}")
    assert not diff, f"GL-exported frames differ from host-uploaded ones: {diff[:8]}"
    names = sorted(run.results[0])
    print(f"{case.id}: {len(run.results)} frames x {len(names)} metrics identical: {names}")
    for want in ("vmaf", "psnr_y", "float_ssim", "float_ms_ssim"):
        assert want in names, names
    assert all(0 <= run.results[i]["vmaf"] <= 100 for i in run.results)
    if len(run.results) > 1:
        assert len({run.results[i]["psnr_y"] for i in run.results}) > 1  # real, changing frames
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    c.close()


def test_the_vmm_buffer_is_not_rewritten_before_its_release(cuda_daemon, nvidia):
    """The one VMM buffer is reused frame after frame: a second export before mark_released() is E_BUSY naming
    ``buffer``; after it, the export rewrites the buffer.  Closing the exporter closes the VMM fd."""
    nvidia.make_current()
    c = RawClient(cuda_daemon.socket, "gl-reuse")
    device = _cuda_device(c)
    w, h, fmt, bitdepth, refs, _ = load_case(CASES[0], 2)
    formats = vg.plane_formats(fmt, w, h, bitdepth)
    p = GlProducer()
    tex = p.make_textures(w, h, fmt, bitdepth)
    fds_before = len(os.listdir("/proc/self/fd"))
    x = vg.GlFrameExporter(w, h, fmt, bitdepth, device=device, flags=ALLOW_COPY, trace=print)
    try:
        assert x.path == "memory_object"  # auto on a cuda-lane device
        def acquired():
            sync = p.fence()
            vg.wait_sync_acquire(sync, timeout_s=10.0)  # the caller's retry loop: E_BUSY is not what is tested
            return sync

        p.upload(tex, refs[0], formats)
        f0 = x.export(tex, sync=acquired())
        assert f0.new_buffer and f0.buffer.kind == "cuda_vmm" and f0.buffer.device is not None
        _check_vmm(x, refs[0], "frame 0")
        p.upload(tex, refs[1], formats)
        with pytest.raises(vg.GlBusy) as ei:
            x.export(tex, sync=acquired())
        assert ei.value.field == "buffer" and ei.value.code == ErrorCode.E_BUSY
        _check_vmm(x, refs[0], "still frame 0")
        x.mark_released()
        f1 = x.export(tex, sync=acquired())
        assert f1.buffer is f0.buffer and not f1.new_buffer
        _check_vmm(x, refs[1], "frame 1")
        vmm_fd = x.memory.fd  # the VmmFrameBuffer's OwnedFd: the exporter made it, so it closes it
    finally:
        x.close()
        p.close()
    assert vmm_fd.closed and x.memory is None
    print(f"open fds before the exporter {fds_before}, after close {len(os.listdir('/proc/self/fd'))} "
          "(GL's dup of the VMM fd is the driver's to close with the memory object)")
    c.close()


def test_another_gpu_is_refused_naming_the_device(nvidia):
    """The VMM buffer must be on the daemon device's GPU (matched by PCI location)."""
    nvidia.make_current()
    w, h, fmt, bitdepth, refs, _ = load_case(CASES[0], 1)
    p = GlProducer()
    tex = p.make_textures(w, h, fmt, bitdepth)
    try:
        elsewhere = vg.DaemonDevice("cuda", 0, pci="0000:ff:1f.7", name="a GPU that is not here")
        with pytest.raises(vg.GlNotSupported) as ei:
            vg.export_texture_planes(tex, w, h, fmt, bitdepth, device=elsewhere, flags=ALLOW_COPY, trace=print)
        print(f"refused: {ei.value}")
        assert ei.value.field == "device" and "0000:ff:1f.7" in ei.value.message
        from vmafx.cuda_frames import CudaProducer

        prod = CudaProducer(0)
        try:
            with pytest.raises(vg.GlNotSupported) as ei:
                vg.export_texture_planes(tex, w, h, fmt, bitdepth, device=elsewhere, flags=ALLOW_COPY, producer=prod,
                                         trace=print)
            print(f"refused: {ei.value}")
            assert ei.value.field == "device"
        finally:
            prod.close()
    finally:
        p.close()


def test_the_egl_dmabuf_export_is_refused_on_the_h200(cuda_daemon, nvidia):
    """R11's path cannot run here: the daemon's cuda device reaches it only by path="dmabuf", and the display
    has no DRM device.  The raw export is also tried (past the refusal) to record the driver's own answer."""
    nvidia.make_current()
    c = RawClient(cuda_daemon.socket, "gl-dmabuf")
    device = _cuda_device(c)
    c.close()
    w, h, fmt, bitdepth, refs, dists = load_case(CASES[0], 1)
    formats = vg.plane_formats(fmt, w, h, bitdepth)
    p = GlProducer()
    tex = p.make_textures(w, h, fmt, bitdepth)
    try:
        p.upload(tex, refs[0], formats)
        GL.glFinish()
        info = vg.egl_display_info()
        with pytest.raises(vg.GlNotSupported) as ei:
            vg.export_texture_planes(tex, w, h, fmt, bitdepth, device=device, path="dmabuf", flags=ALLOW_COPY,
                                     trace=print)
        print(f"dma-buf path refused: {ei.value}")
        assert ei.value.field in ("EGL_MESA_image_dma_buf_export", "display", "device"), ei.value
        if "EGL_MESA_image_dma_buf_export" not in info.extensions:
            assert ei.value.field == "EGL_MESA_image_dma_buf_export"
        # What the driver itself says when asked to export (PLATFORM.md measured EGL_BAD_MATCH):
        x = vg.GlFrameExporter(w, h, fmt, bitdepth, device=device, path="dmabuf", trace=print)
        x._check_context()
        try:
            exp = x._export_texture(0, tex[0], formats[0][1])
        except vg.GlExportError as e:
            print(f"raw EGL export of texture {tex[0]}: {e}")
            assert e.field == "planes[0]"
        else:
            print(f"raw EGL export of texture {tex[0]} succeeded: fourcc {exp.fourcc:#x} modifier {exp.modifier:#x} "
                  f"stride {exp.stride} offset {exp.offset} (the DRM-device check still refuses the path)")
            assert exp.fourcc == glc.DRM_FORMAT_R8
            exp.fd.close()
        finally:
            x.close()
    finally:
        p.close()


def test_the_dither_render_is_what_numpy_computes_on_nvidia(nvidia):
    """The shader's output on NVIDIA equals the numpy dither (the twin's distorted input is GL's own pixels)."""
    nvidia.make_current()
    for case in CASES:
        w, h, fmt, bitdepth, _, dists = load_case(case, 1)
        formats = vg.plane_formats(fmt, w, h, bitdepth)
        p = GlProducer()
        try:
            src, dst = p.make_textures(w, h, fmt, bitdepth), p.make_textures(w, h, fmt, bitdepth)
            p.upload(src, dists[0], formats)
            p.render_dither(src, dst, formats, 3, case.step, case.maxcode)
            got = p.read_back(dst, formats)
            want = dither_expected(dists[0], 3, case.step, case.maxcode, formats)
            for k, (a, b) in enumerate(zip(got, want)):
                assert np.array_equal(a, b), f"{case.id} plane {k}: {int(np.count_nonzero(a != b))} samples differ"
            print(f"{case.id}: rendered planes equal the numpy dither")
        finally:
            p.close()
