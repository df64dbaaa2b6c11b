"""A device's kit for scoring files (vmafxd/lanes/gpu/scoring_kit.py), kept between a daemon's
jobs: scorings of different geometries on one kit equal the CPU lane, its slots are pinned once
and reused, a larger batch grows them, and closing it frees every allocation it made; the pool
keeps one kit a device and frees it when unused.  On the emulated lane."""

from __future__ import annotations

import pytest

from vmafx import in_process
from vmafx.io.inputs import open_input

from ..reference import uncompressed_chelsea, vendored_pairs

MODELS, FEATURES = ["version=vmaf_v0.6.1"], ["psnr"]


@pytest.fixture
def emu(gpu):
    rt, dev = gpu
    if rt.name != "emu":
        pytest.skip("scoring kits take their runtime by name; the emulator stands for it here")
    return dev


@pytest.fixture(scope="module")
def chelsea(tmp_path_factory):
    return uncompressed_chelsea(tmp_path_factory.mktemp("chelsea"))


def _plan():
    return in_process._plan(MODELS, FEATURES)


def _on_kit(kit, ref, dist, frames=None):
    from vmafxd import offline

    with open_input(str(ref)) as r, open_input(str(dist)) as d:
        scorer, n = offline.score_frames_on_gpu("emu", _plan(), r, d, max_frames=frames, kit=kit)
    return list(scorer.assembler.frames), n


def _cpu(ref, dist, frames=None):
    with open_input(str(ref)) as r, open_input(str(dist)) as d:
        report, n = in_process.score_in_process(r, d, MODELS, FEATURES, lane="cpu", max_frames=frames)
    return report.frames, n


def _held(dev, chelsea) -> int:
    """The device's allocations a kit could leak: plain blocks and pinned host memory (the memory
    pool's blocks stay with the pool, as CUDA's do), after one scoring has made the device's
    once-a-process tables."""
    _on_kit(None, chelsea["ref"], chelsea["dist"], 1)
    return len(dev._buffers) - len(dev._pool_sizes) + len(dev._host)


def _counting(monkeypatch, dev):
    """Counts the device's pinning calls (the emulated device is one object a process)."""
    pinned: list[int] = []
    real = type(dev).alloc_host
    monkeypatch.setattr(type(dev), "alloc_host", lambda self, n: (pinned.append(n), real(self, n))[1])
    return pinned


def test_one_kit_scores_two_geometries_pins_once_and_frees_all(emu, chelsea, monkeypatch):
    from vmafxd.lanes.gpu.scoring_kit import ScoringKit

    other = next(p for p in vendored_pairs() if p.id.startswith("p13_"))
    before = _held(emu, chelsea)
    pinned = _counting(monkeypatch, emu)
    # slots of at least 3 chelsea pairs: the 32-pair batches of the first scoring fit them
    kit = ScoringKit("emu", min_slot_bytes=3 * 2 * 347_603, slots=3)
    try:
        want, n_cpu = _cpu(chelsea["ref"], chelsea["dist"])
        got, n = _on_kit(kit, chelsea["ref"], chelsea["dist"])
        assert n == n_cpu == 6 and got == want
        slots_pinned = [b for b in pinned if b >= 3 * 2 * 347_603]
        assert len(slots_pinned) == 3  # every slot, once (slot 0: the device start's 64 MiB)
        got2, n2 = _on_kit(kit, chelsea["ref"], chelsea["dist"], frames=4)
        assert n2 == 4 and got2 == want[:4]
        assert [b for b in pinned if b >= 3 * 2 * 347_603] == slots_pinned  # none pinned again
        # another geometry on the same kit: equal to the CPU lane too
        want3, n3_cpu = _cpu(other.ref_file, other.dist_file, 3)
        got3, n3 = _on_kit(kit, other.ref_file, other.dist_file, 3)
        assert n3 == n3_cpu == 3 and got3 == want3
    finally:
        kit.close()
        kit.close()  # idempotent
    assert _held(emu, chelsea) == before


def test_a_batch_larger_than_the_slots_grows_them(emu, chelsea):
    from vmafxd.lanes.gpu.scoring_kit import ScoringKit

    before = _held(emu, chelsea)
    kit = ScoringKit("emu", min_slot_bytes=1024, slots=2)
    try:
        kit.host(0, 1024)  # the device start's 64 MiB
        kit.host(1, 1024)
        kit.dev(1, 1024)
        small_host, small_dev = kit.hosts[1], kit.devs[1]
        assert small_host.nbytes == 1024
        got, n = _on_kit(kit, chelsea["ref"], chelsea["dist"])
        assert n == 6 and got == _cpu(chelsea["ref"], chelsea["dist"])[0]
        assert kit.hosts[1] is not small_host and kit.hosts[1].nbytes >= 6 * 2 * 347_603
        assert kit.devs[1] != small_dev and kit.devs[1][1] >= 6 * 2 * 347_603
    finally:
        kit.close()
    assert _held(emu, chelsea) == before


def test_the_pool_keeps_one_kit_a_device_and_frees_it_unused(emu, chelsea):
    from vmafxd.lanes.gpu.scoring_kit import KitPool

    before = _held(emu, chelsea)
    pool = KitPool("emu", keep_s=30.0)
    a = pool.take(0)
    b = pool.take(0)  # a second job on the device at once: a kit of its own
    assert a is not b and pool.made == 2
    a.host(0, 4096)
    pool.give(a)
    pool.give(b)  # the device already has one kept: closed
    assert b.closed and not a.closed and pool.kept == 1
    assert pool.take(0) is a and pool.made == 2 and pool.kept == 0
    pool.give(a, keep=False)  # a job the device failed: not kept
    assert a.closed and pool.kept == 0
    c = pool.take(0)
    pool.give(c)
    assert pool.expire(now=c.used + 29.0) == 0 and pool.kept == 1
    assert pool.expire(now=c.used + 30.0) == 1 and c.closed and pool.kept == 0
    d = pool.take(0)
    pool.give(d)
    pool.close()
    assert d.closed and pool.kept == 0
    e = pool.take(0)
    pool.give(e)  # after close: closed at once
    assert e.closed and pool.kept == 0
    assert _held(emu, chelsea) == before


def test_a_pool_that_keeps_nothing_closes_every_kit(emu):
    from vmafxd.lanes.gpu.scoring_kit import KitPool

    pool = KitPool("emu", keep_s=0)
    kit = pool.take(0)
    pool.give(kit)
    assert kit.closed and pool.kept == 0


def test_a_free_that_fails_leaves_nothing_else_held_and_the_pool_goes_on(emu, chelsea, monkeypatch, caplog):
    """A device gone bad can make a free fail: every other allocation is still freed, the kit
    raises the first error, and the pool (the daemon's) logs it and goes on."""
    from vmafxd.lanes.gpu.scoring_kit import KitPool

    before = _held(emu, chelsea)
    pool = KitPool("emu", keep_s=0)
    kit = pool.take(0)
    got, n = _on_kit(kit, chelsea["ref"], chelsea["dist"])
    assert n == 6
    real = type(emu).free
    failed = []

    def free(self, ptr):
        if not failed:  # the first device free fails (and frees nothing)
            failed.append(ptr)
            raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS")
        real(self, ptr)

    monkeypatch.setattr(type(emu), "free", free)
    with caplog.at_level("WARNING", logger="vmafxd.lanes.gpu"):
        pool.give(kit)
    assert kit.closed and failed and "CUDA_ERROR_ILLEGAL_ADDRESS" in caplog.text
    monkeypatch.setattr(type(emu), "free", real)
    real(emu, failed[0])  # the one the failure left
    assert _held(emu, chelsea) == before
