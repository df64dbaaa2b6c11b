#!/usr/bin/env python3
"""Probe the CUDA runtime layer on a real GPU: imports between processes, events, kernels.

Prints one line per check ("ok"/"FAIL" and figures).  Run on a machine with an
NVIDIA GPU:  python3 scripts/gpu_probe.py
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from _checkout import ROOT

from vmafx.io.video import read_all  # noqa: E402
from vmafx.transport import recv_packet_blocking, send_packet_blocking  # noqa: E402

CLIP = ROOT / "tests/data/clips/src_testsrc2_576x324.y4m.xz"
results: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    results.append((name, ok, detail))
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}", flush=True)


def producer(sock_fd: int) -> None:
    from vmafx.cuda_frames import CudaProducer, VmmFrameBuffer

    sock = socket.socket(fileno=sock_fd)
    info, frames = read_all(CLIP)
    p = CudaProducer(0)
    buf = VmmFrameBuffer(p, info.width, info.height, "yuv420p", 8, extra_offset=256)
    ev = p.interprocess_event()
    # write frame 3 and record the event after the writes: the fence
    buf.write(frames[3])
    handle = ev.record()
    reg = buf.registration()
    send_packet_blocking(sock, json.dumps({"reg": reg, "event": handle.hex()}).encode(), [buf.fd])
    recv_packet_blocking(sock, 1024, 0)  # wait for "done"
    buf.close()
    ev.close()
    p.close()


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--producer":
        producer(int(sys.argv[2]))
        return
    from vmafxd.lanes import cuda
    from vmafxd.lanes.gpu import kernels

    rt = cuda.load()
    dev = rt.device(0)
    check("device", True, f"{dev.info}")
    t0 = time.perf_counter()
    mods = {}
    for name in kernels.available_sources():
        img = kernels.compile_cached(name, dev.info.arch, rt.compiler_version(), rt.compile, kernels.NVRTC_OPTIONS)
        mods[name] = dev.load_module(img)
    check("compile+load", True, f"{len(mods)} modules in {time.perf_counter() - t0:.2f}s")
    stream = dev.create_stream()
    from vmafxd.lanes.gpu.launch import Launcher

    def launch(fn, grid, block, args):
        Launcher(dev, fn, [a.dtype for a in args])(grid, block, stream, *args)

    # R5: a never-recorded event queries as complete
    ev = dev.create_event()
    check("never-recorded event query returns success (R5 trap)", ev.query() is True)
    ev.close()

    # cross-process VMM import + IPC event
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    child = subprocess.Popen([sys.executable, __file__, "--producer", str(b.fileno())], pass_fds=[b.fileno()])
    b.close()
    pkt = recv_packet_blocking(a, 65536, 4)
    msg = json.loads(pkt.data)
    reg = msg["reg"]
    fd = pkt.fds[0]
    check("vmm fd received", True, f"readlink={os.readlink(f'/proc/self/fd/{fd.fileno()}')} size={reg['size']}")
    imp = dev.import_vmm_fd(fd.fileno(), reg["size"])
    fd.close()
    evp = dev.open_ipc_event(bytes.fromhex(msg["event"]))
    stream.wait_event(evp)
    info, frames = read_all(CLIP)
    w, h = info.width, info.height
    out = dev.alloc(w * h + 2 * (w // 2) * (h // 2))
    jobs = np.zeros((3, 8), dtype=np.uint64)
    dst_off = [0, w * h, w * h + (w // 2) * (h // 2)]
    sizes = [(w, h), (w // 2, h // 2), (w // 2, h // 2)]
    for i, pl in enumerate(reg["planes"]):
        jobs[i] = [imp.ptr + pl["offset"], pl["pitch"], 0, sizes[i][0], sizes[i][1], out + dst_off[i], sizes[i][0], 0]
    djobs = dev.alloc(jobs.nbytes)
    hj = dev.alloc_host(jobs.nbytes)
    hj[:] = jobs.view(np.uint8).ravel()
    dev.copy_htod_async(djobs, hj, jobs.nbytes, stream)
    f = mods["convert.cu"].function("vx_convert")
    launch(f, ((h + 3) // 4, 3), (256,), [np.uint64(djobs), np.int32(3)])
    host = dev.alloc_host(w * h + 2 * (w // 2) * (h // 2))
    dev.copy_dtoh_async(host, out, host.nbytes, stream)
    stream.synchronize()
    want = np.concatenate([frames[3][0].ravel(), frames[3][1][: h // 2, : w // 2].ravel(), frames[3][2][: h // 2, : w // 2].ravel()])
    check("vmm import + ipc event + convert kernel", np.array_equal(host, want), f"{int((host != want).sum())} differing")
    send_packet_blocking(a, b"done")
    child.wait(timeout=30)
    check("producer exited", child.returncode == 0)
    imp.close()
    evp.close()

    # dma-buf: export works, import is refused
    d = rt.d
    from vmafx.cuda_frames import CudaProducer, VmmFrameBuffer

    p = CudaProducer(0)
    vb = VmmFrameBuffer(p, 64, 64, "yuv420p")
    dev.make_current()
    try:
        res = d.cuMemGetHandleForAddressRange(vb.ptr, vb.size, d.CUmemRangeHandleType.CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)
        dfd = int(res[1])
        link = os.readlink(f"/proc/self/fd/{dfd}")
        size = os.lseek(dfd, 0, os.SEEK_END)
        import mmap
        try:
            mmap.mmap(dfd, size, mmap.MAP_SHARED, mmap.PROT_READ)
            mm = "mmap ok"
        except OSError as e:
            mm = f"mmap errno {e.errno}"
        fdinfo = Path(f"/proc/self/fdinfo/{dfd}").read_text().replace("\n", " | ")
        try:
            dev.import_dmabuf(dfd, size)
            check("dma-buf import refused", False, "import succeeded")
        except cuda.RuntimeCallError as e:
            check("dma-buf import refused", e.not_supported, f"{e} link={link} size={size} {mm} fdinfo={fdinfo}")
        os.close(dfd)
    except Exception as e:
        check("dma-buf export", False, repr(e))
    vb.close()
    p.close()
    dev.make_current()

    # psnr + motion kernels vs CPU twins on p01
    from vmafxd.features import motion as mo, psnr as ps

    ref_info, refs = read_all(CLIP)
    _, dists = read_all(ROOT / "tests/data/clips/dst_testsrc2_576x324_x264crf35.y4m.xz")
    n = len(refs)
    lw, lh = w, h
    fstride = lw * lh
    luma_r = np.stack([fr[0] for fr in refs]).astype(np.uint8)
    luma_d = np.stack([fr[0] for fr in dists]).astype(np.uint8)
    dr = dev.alloc(luma_r.nbytes)
    dd = dev.alloc(luma_d.nbytes)
    hr = dev.alloc_host(luma_r.nbytes)
    hr[:] = luma_r.ravel()
    dev.copy_htod_async(dr, hr, luma_r.nbytes, stream)
    hd = dev.alloc_host(luma_d.nbytes)
    hd[:] = luma_d.ravel()
    dev.copy_htod_async(dd, hd, luma_d.nbytes, stream)
    stats = dev.alloc(n * 2 * 8)
    dev.memset_async(stats, 0, n * 16, stream)
    fsse = mods["psnr.cu"].function("vx_psnr_sse_u8")
    launch(fsse, (min(lh, 64), 1, n), (256,), [np.uint64(dr), np.uint64(dd), np.int32(lw), np.int32(lh), np.int64(lw), np.int64(fstride),
                np.uint64(stats), np.int32(2), np.int32(0)])
    fmo = mods["motion.cu"].function("vx_motion_sad_u8")
    launch(fmo, ((lw + 63) // 64, (lh + 15) // 16, n - 1), (256,), [np.uint64(dr), np.uint64(dr), np.uint64(dr), np.int32(1), np.int32(lw), np.int32(lh), np.int64(lw), np.int64(fstride),
                np.int32(8), np.int32(1), np.uint64(stats), np.int32(2), np.int32(1)])
    hs = dev.alloc_host(n * 16)
    dev.copy_dtoh_async(hs, stats, n * 16, stream)
    stream.synchronize()
    got = hs.view(np.int64).reshape(n, 2)
    sse_cpu = [int(ps.compute_stats([luma_r[i]], [luma_d[i]])[0]) for i in range(n)]
    sad_cpu = [0] + [int(mo.compute_stats(luma_r[i - 1], luma_r[i], 8)) for i in range(1, n)]
    check("psnr SSE kernel == CPU twin", list(got[:, 0]) == sse_cpu, f"{got[:3, 0]} vs {sse_cpu[:3]}")
    check("motion SAD kernel == CPU twin", list(got[:, 1]) == sad_cpu, f"{got[:3, 1]} vs {sad_cpu[:3]}")

    # timing at 1080p, batch of 32 random frames
    W, H, B = 1920, 1080, 32
    rng = np.random.default_rng(1)
    big = rng.integers(0, 256, size=(B, H, W), dtype=np.uint8)
    dbig = dev.alloc(big.nbytes)
    hb = dev.alloc_host(big.nbytes)
    hb[:] = big.ravel()
    dev.copy_htod_async(dbig, hb, big.nbytes, stream)
    st2 = dev.alloc(B * 16)
    e0, e1 = dev.create_timing_event(), dev.create_timing_event()
    for rep in range(3):
        e0.record(stream)
        for _ in range(10):
            launch(fsse, (min(H, 128), 1, B), (256,), [np.uint64(dbig), np.uint64(dbig), np.int32(W), np.int32(H), np.int64(W), np.int64(W * H),
                        np.uint64(st2), np.int32(2), np.int32(0)])
        e1.record(stream)
        e1.synchronize()
        t_sse = dev.elapsed_ms(e0, e1) / 10 / B * 1000
        e0.record(stream)
        for _ in range(10):
            launch(fmo, ((W + 63) // 64, (H + 15) // 16, B - 1), (256,), [np.uint64(dbig), np.uint64(dbig), np.uint64(dbig), np.int32(1), np.int32(W), np.int32(H), np.int64(W), np.int64(W * H),
                        np.int32(8), np.int32(1), np.uint64(st2), np.int32(2), np.int32(1)])
        e1.record(stream)
        e1.synchronize()
        t_mo = dev.elapsed_ms(e0, e1) / 10 / (B - 1) * 1000
        check(f"timing 1080p rep {rep}", True, f"psnr-sse {t_sse:.1f} us/frame, motion {t_mo:.1f} us/frame")
    # launch overhead from Python
    t = time.perf_counter()
    for _ in range(1000):
        launch(fsse, (1, 1, 1), (256,), [np.uint64(dbig), np.uint64(dbig), np.int32(8), np.int32(1), np.int64(W), np.int64(W * H),
                    np.uint64(st2), np.int32(2), np.int32(0)])
    stream.synchronize()
    check("python launch cost", True, f"{(time.perf_counter() - t) * 1000:.1f} us per launch (1000 launches, a Launcher built each time)")
    bad = [r for r in results if not r[1]]
    print(f"SUMMARY {len(results) - len(bad)} ok, {len(bad)} failed")


if __name__ == "__main__":
    main()
