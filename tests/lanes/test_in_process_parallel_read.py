"""The in-process GPU path reading uncompressed files on several threads (vmafx/io/parallel_read.py
under vmafxd/lanes/gpu/in_process.py): scores equal to the CPU lane's, frames in order across
small batches and reused slots, and every end and failure as the sequential reader has them.
On the emulated lane (the kernels' CPU emulator stands for CUDA and HIP here)."""

from __future__ import annotations

import lzma
import threading

import pytest

from vmafx import in_process
from vmafx.io.inputs import InputError, open_input

from ..reference import uncompressed_chelsea, vendored_pairs

MODELS, FEATURES = ["version=vmaf_v0.6.1"], ["psnr"]


@pytest.fixture
def emu(gpu, monkeypatch):
    rt, _dev = gpu
    if rt.name != "emu":
        pytest.skip("in-process scoring takes its runtime by name; the emulator stands for it here")
    from vmafxd.lanes.gpu import in_process as gpu_in_process

    # batches of 2 pairs in 2 slots on 3 reader threads: several position reads a batch,
    # slots reused, the last batch short
    monkeypatch.setattr(gpu_in_process, "BATCH", 2)
    monkeypatch.setattr(gpu_in_process, "SLOTS", 2)
    monkeypatch.setenv("VMAFX_READ_THREADS", "3")
    from vmafx.io import parallel_read

    taken: list[int] = []  # each batch of position reads: the pairs it took, in the order handed over
    real = parallel_read.PairReads.result

    def result(self):
        got = real(self)
        taken.append(got)
        return got

    monkeypatch.setattr(parallel_read.PairReads, "result", result)
    return taken


@pytest.fixture(scope="module")
def chelsea(tmp_path_factory):
    """The 641x361 pair (odd sizes, 6 frames) uncompressed: y4m, and raw .yuv of the same frames."""
    return uncompressed_chelsea(tmp_path_factory.mktemp("chelsea"))


RAW = dict(width=641, height=361, pixel_format="420", bitdepth=8)


def _score(lane, ref_path, dist_path, *, geo=None, frames=None, progress=None):
    geo = geo or {}
    with open_input(ref_path, **geo) as ref, open_input(dist_path, **geo) as dist:
        report, n = in_process.score_in_process(ref, dist, MODELS, FEATURES, lane=lane, max_frames=frames,
                                                progress=progress)
        after = ref.read_frame(), ref.frames_read
    return report, n, after


@pytest.mark.gpu
@pytest.mark.parametrize("mapped", ["0", "1"], ids=["preadv", "mmap"])
@pytest.mark.parametrize("raw", [False, True], ids=["y4m", "yuv"])
def test_read_on_threads_equals_the_cpu_lane(emu, chelsea, raw, mapped, monkeypatch):
    monkeypatch.setenv("VMAFX_READ_MMAP", mapped)
    names = ("ref_raw", "dist_raw") if raw else ("ref", "dist")
    geo = RAW if raw else None
    cpu, n_cpu, _ = _score("cpu", *(chelsea[k] for k in names), geo=geo)
    got, n_gpu, (after, _) = _score("emu", *(chelsea[k] for k in names), geo=geo)
    assert n_cpu == n_gpu == 6 and after is None
    assert [i for i, _ in got.frames] == list(range(6))
    assert got.frames == cpu.frames and got.pooled == cpu.pooled
    assert emu == [2, 2, 2, 0]  # every pair read by position, two a batch; the end found sequentially


@pytest.mark.gpu
def test_max_frames_stops_the_readers_where_the_sequential_reader_would(emu, chelsea):
    """Stopped after 3 frames (inside a batch): the next frame read is the file's fourth."""
    got, n, (after, read) = _score("emu", chelsea["ref"], chelsea["dist"], frames=3)
    with open_input(chelsea["ref"]) as alone:
        fourth = [alone.read_frame() for _ in range(4)][3]
    assert n == 3 == len(got.frames) and read == 4
    assert emu == [2, 1]
    assert all((a == b).all() for a, b in zip(after, fourth))


@pytest.mark.gpu
def test_a_truncated_last_frame_is_the_same_error_as_on_the_cpu_lane(emu, chelsea, tmp_path):
    cut = tmp_path / "cut.y4m"
    data = open(chelsea["dist"], "rb").read()
    cut.write_bytes(data[:-1000])
    with pytest.raises(InputError) as cpu:
        _score("cpu", chelsea["ref"], str(cut))
    with pytest.raises(InputError) as gpu:
        _score("emu", chelsea["ref"], str(cut))
    assert str(gpu.value) == str(cpu.value) and "frame 5 is truncated" in str(gpu.value)


@pytest.mark.gpu
@pytest.mark.parametrize("slots, plain", [(2, 1), (4, 3)])
def test_frame_lines_with_parameters_read_one_by_one_equal_the_cpu_lane(emu, chelsea, tmp_path, monkeypatch,
                                                                         slots, plain):
    """From frame ``plain`` on the distorted's FRAME lines carry parameters: the position reads
    stop there (with 4 slots, reads started for later batches are dropped and their slots reused)."""
    from vmafxd.lanes.gpu import in_process as gpu_in_process

    monkeypatch.setattr(gpu_in_process, "SLOTS", slots)
    odd = tmp_path / "params.y4m"
    with open_input(chelsea["dist"]) as inp, open(odd, "wb") as f:
        f.write(open(chelsea["dist"], "rb").readline())
        buf = bytearray(inp.info.frame_size)
        k = 0
        while inp.read_frame_into(memoryview(buf)):
            f.write(b"FRAME Ixyz\n" if k >= plain else b"FRAME\n")
            f.write(buf)
            k += 1
    cpu, _, _ = _score("cpu", chelsea["ref"], str(odd))
    got, n, (after, read) = _score("emu", chelsea["ref"], str(odd))
    assert n == 6 and got.frames == cpu.frames and after is None and read == 6
    assert emu == [2] * (plain // 2) + [plain % 2]  # whole batches, then the one the parameters cut


@pytest.mark.gpu
def test_no_frames_asked_reads_none(emu, chelsea):
    got, n, (after, read) = _score("emu", chelsea["ref"], chelsea["dist"], frames=0)
    assert n == 0 and got.frames == [] and read == 1 and after is not None


@pytest.mark.gpu
def test_an_error_while_scoring_stops_every_reader_thread(emu, chelsea):
    before = threading.active_count()

    def progress(n):
        if n >= 2:
            raise KeyboardInterrupt  # Ctrl-C at the second batch

    with pytest.raises(KeyboardInterrupt):
        _score("emu", chelsea["ref"], chelsea["dist"], progress=progress)
    assert threading.active_count() == before
    assert not [t.name for t in threading.enumerate() if t.name.startswith("vmafx-read")]


@pytest.mark.gpu
def test_a_device_started_ahead_is_the_one_scored_on_and_its_slot_used(emu, chelsea, monkeypatch):
    """start_device (the command line calls it before loading models and opening files):
    the scoring takes that start's device and its pinned slot; the other slots are pinned
    on a thread meanwhile, and every one is freed."""
    from vmafxd.lanes.gpu import device_start, in_process as gpu_in_process

    monkeypatch.setattr(gpu_in_process, "SLOTS", 3)
    in_process.start_gpu("emu")
    start = device_start._starting["emu"]
    _rt, dev, first = start.take()
    freed = []
    real_free = type(dev).free_host
    monkeypatch.setattr(type(dev), "free_host", lambda self, a: (freed.append(a), real_free(self, a))[1])
    cpu, _, _ = _score("cpu", chelsea["ref"], chelsea["dist"])
    got, n, _ = _score("emu", chelsea["ref"], chelsea["dist"])
    assert n == 6 and got.frames == cpu.frames
    assert "emu" not in device_start._starting
    slot = 2 * 2 * 347_603  # 2 pairs of 641x361 frames (the others: the engine's own host buffers)
    assert first.nbytes == gpu_in_process.SLOT_BYTES and any(a is first for a in freed)
    assert len({id(a) for a in freed if a.nbytes == slot}) == 2


def test_a_lane_started_ahead_that_cannot_run_fails_where_scoring_does(monkeypatch, chelsea):
    from vmafxd.lanes.gpu import device_start, in_process as gpu_in_process

    monkeypatch.setitem(gpu_in_process.RUNTIMES, "cuda", "vmafxd.lanes.no_such_binding")
    in_process.start_gpu("cuda")  # no error yet: the command goes on to open its inputs
    with pytest.raises(in_process.LaneUnavailableHere, match="cuda: its binding cannot be imported"):
        _score("cuda", chelsea["ref"], chelsea["dist"])
    assert "cuda" not in device_start._starting


@pytest.mark.gpu
def test_ten_bit_frames_read_on_threads_equal_the_cpu_lane(emu, tmp_path):
    """The 1280x720 10-bit pair (2 frames) uncompressed: little-endian samples through the pool."""
    pair = next(p for p in vendored_pairs() if p.id.startswith("p15_"))
    paths = []
    for f in (pair.ref_file, pair.dist_file):
        paths.append(tmp_path / f.name[:-3])
        paths[-1].write_bytes(lzma.decompress(f.read_bytes()))
    cpu, _, _ = _score("cpu", *map(str, paths))
    got, n, _ = _score("emu", *map(str, paths))
    assert n == 2 and got.frames == cpu.frames and emu == [2, 0]


@pytest.mark.gpu
def test_a_failing_read_on_a_thread_is_one_input_error_and_every_thread_stops(emu, chelsea, monkeypatch):
    import errno
    import os

    from vmafx.io import video

    real = os.preadv
    dist = os.path.realpath(chelsea["dist"])

    def failing(fd, bufs, offset):
        if os.path.realpath(f"/proc/self/fd/{fd}") == dist and offset > 3 * 347_609:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(fd, bufs, offset)

    monkeypatch.setattr(video.os, "preadv", failing)
    with pytest.raises(InputError, match=r"dist\.y4m: frame 3 cannot be read \(Input/output error\)$"):
        _score("emu", chelsea["ref"], chelsea["dist"])
    assert not [t.name for t in threading.enumerate() if t.name.startswith("vmafx-read")]


def _score_plan(lane, ref_path, dist_path, features, geo=None):
    with open_input(ref_path, **(geo or {})) as ref, open_input(dist_path, **(geo or {})) as dist:
        report, n = in_process.score_in_process(ref, dist, MODELS, features, lane=lane)
    return report, n


@pytest.mark.gpu
@pytest.mark.parametrize("mapped", ["0", "1"], ids=["preadv", "mmap"])
@pytest.mark.parametrize("raw", [False, True], ids=["y4m", "yuv"])
def test_a_luma_only_plan_reads_the_luma_bytes_alone(emu, chelsea, raw, mapped, monkeypatch):
    """vmaf_v0.6.1 alone reads luma only (FeatureDeclaration.luma_only): each frame read by
    position reads its 641x361 luma bytes, the slots' chroma is left as it was (two slots
    reused across three batches), and the scores equal the CPU lane's; with psnr (which reads
    chroma) every byte is read."""
    from vmafx.io import video

    monkeypatch.setenv("VMAFX_READ_MMAP", mapped)
    asked: list = []
    real = video.FramesAt.read
    monkeypatch.setattr(video.FramesAt, "read", lambda self, i, dst, nbytes=None: (asked.append(nbytes),
                                                                                   real(self, i, dst, nbytes))[1])
    names = ("ref_raw", "dist_raw") if raw else ("ref", "dist")
    geo = RAW if raw else None
    for features, want in (([], 641 * 361), (["psnr"], None)):
        asked.clear()
        cpu, _ = _score_plan("cpu", *(chelsea[k] for k in names), features, geo)
        got, n = _score_plan("emu", *(chelsea[k] for k in names), features, geo)
        assert n == 6 and got.frames == cpu.frames and got.pooled == cpu.pooled
        assert len(asked) >= 12 and set(asked) == {want}, (features, set(asked))


@pytest.mark.gpu
def test_a_luma_only_plan_still_finds_a_frame_whose_chroma_is_cut(emu, chelsea, tmp_path):
    """The last frame's V plane cut short: reading its luma alone would not see it, so the frame
    is checked whole against the file's size, and the error is the CPU lane's."""
    cut = tmp_path / "cut.y4m"
    cut.write_bytes(open(chelsea["dist"], "rb").read()[:-1000])
    with pytest.raises(InputError) as cpu:
        _score_plan("cpu", chelsea["ref"], str(cut), [])
    with pytest.raises(InputError) as gpu:
        _score_plan("emu", chelsea["ref"], str(cut), [])
    assert str(gpu.value) == str(cpu.value) and "frame 5 is truncated" in str(gpu.value)
