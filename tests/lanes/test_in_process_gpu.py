"""``vmafxctl score --in-process --lane cuda|hip``: two files scored on a GPU of this process
(vmafxd/lanes/gpu/in_process.py), equal to the CPU lane frame by frame; on the emulated lane here."""

from __future__ import annotations

import pytest

from vmafx import in_process
from vmafx.io.inputs import open_input

from ..reference import vendored_pairs

MODELS, FEATURES = ["version=vmaf_v0.6.1"], ["psnr", "float_ssim"]


def _score(pair, lane, frames, *, cut_distorted=None):
    with open_input(str(pair.ref_file)) as ref, open_input(str(pair.dist_file)) as dist:
        if cut_distorted is not None:
            real = dist.read_frame_into
            left = [cut_distorted]

            def short(dst):
                if left[0] == 0:
                    return False
                left[0] -= 1
                return real(dst)

            dist.read_frame_into = short
        report, n = in_process.score_in_process(ref, dist, MODELS, FEATURES, lane=lane, max_frames=frames)
        more = ref.read_frame() is not None  # a reference frame read past the distorted's end came back
    return report, n, more


@pytest.mark.gpu
@pytest.mark.parametrize("pair", [p for p in vendored_pairs() if p.id.startswith(("p13_", "p16_", "p18_"))],
                         ids=lambda p: p.id)
def test_in_process_gpu_equals_the_cpu_lane(gpu, pair):
    rt, _dev = gpu
    if rt.name != "emu":
        pytest.skip("in-process scoring takes its runtime by name; the emulator stands for it here")
    frames = min(pair.frames, 5)  # the vendored clips are short; batches of 32: one short batch
    cpu, n_cpu, _ = _score(pair, "cpu", frames)
    got, n_gpu, _ = _score(pair, "emu", frames)
    assert n_cpu == n_gpu == frames >= 2
    assert [i for i, _ in got.frames] == list(range(frames))
    assert got.frames == cpu.frames  # every metric, bit for bit (float_ssim too: the same double window)
    assert got.pooled == cpu.pooled and got.models == ["vmaf"]


@pytest.mark.gpu
def test_in_process_gpu_stops_at_the_shorter_input_and_gives_the_frame_back(gpu):
    rt, _dev = gpu
    if rt.name != "emu":
        pytest.skip("in-process scoring takes its runtime by name; the emulator stands for it here")
    pair = next(p for p in vendored_pairs() if p.id.startswith("p13_"))
    cut = pair.frames - 1
    got, n, more = _score(pair, "emu", None, cut_distorted=cut)
    assert n == cut == len(got.frames) and more


def test_a_missing_runtime_is_one_typed_error(monkeypatch):
    from vmafxd.lanes.gpu import in_process as gpu_in_process

    monkeypatch.setitem(gpu_in_process.RUNTIMES, "cuda", "vmafxd.lanes.no_such_binding")
    pair = vendored_pairs()[0]
    with pytest.raises(in_process.LaneUnavailableHere, match="cuda: its binding cannot be imported"):
        _score(pair, "cuda", 1)


@pytest.mark.gpu
@pytest.mark.parametrize("cut", [None, 4])
def test_in_process_gpu_pipeline_of_small_batches(gpu, monkeypatch, cut):
    """Batches of 2 in 2 slots: the reader thread refills slots while others are scored, so
    every slot is reused; the frames, their order and the shorter input's end still hold."""
    rt, _dev = gpu
    if rt.name != "emu":
        pytest.skip("in-process scoring takes its runtime by name; the emulator stands for it here")
    from vmafxd.lanes.gpu import in_process as gpu_in_process

    monkeypatch.setattr(gpu_in_process, "BATCH", 2)
    monkeypatch.setattr(gpu_in_process, "SLOTS", 2)
    pair = next(p for p in vendored_pairs() if p.id.startswith("p16_"))  # 641x361, 6 frames
    frames = pair.frames - 1
    cpu, n_cpu, _ = _score(pair, "cpu", cut or frames)  # (the cut wraps read_frame_into: GPU path only)
    got, n_gpu, more = _score(pair, "emu", frames, cut_distorted=cut)
    assert n_cpu == n_gpu == (cut or frames) and len(got.frames) == n_gpu
    assert got.frames == cpu.frames and got.pooled == cpu.pooled
    assert more  # the clip has frames past what was scored: none of them was lost to the reader thread
