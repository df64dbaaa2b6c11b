"""The emulator's launches: one host call a launch, libraries keyed by their build flags,
and launches from several host threads at once (no process-wide lock)."""

import threading
from pathlib import Path

import pytest

from vmafxd.core.scoring import FeatureRequest, ScoringPlan

from ..reference import vendored_pairs
from .conftest import load_runtime
from .test_gpu_engine import cpu_scores, gpu_scores


@pytest.fixture
def emu():
    return load_runtime("emu")


def test_every_kernel_has_a_launch_entry(emu):
    """The build appends vx_launch_<kernel> for each kernel, those a macro makes included
    (cambi's vx_cambi_cvalues_w<W>)."""
    from vmafxd.lanes.gpu import kernels

    rt, dev = emu
    lib = dev.load_module(rt.compile(kernels.source("cambi.cu"), "cambi.cu", "emu", list(kernels.COMMON_OPTIONS)))
    assert "vx_cambi_cvalues_w##W" in kernels.source("cambi.cu"), "pick another macro-made kernel"
    for name in ("vx_cambi_mask", "vx_cambi_cvalues_sat", "vx_cambi_cvalues_w5", "vx_cambi_cvalues_w17"):
        assert lib.function(name).launch.__name__ == f"vx_launch_{name}"
    with pytest.raises(AttributeError):
        lib.function("vx_cambi_cvalues_w6")


def test_library_name_changes_with_the_build_flags(emu, monkeypatch):
    from vmafxd.lanes import emulated
    from vmafxd.lanes.gpu import kernels

    rt, _ = emu
    text = kernels.source("psnr.cu")
    a = rt.compile(text, "psnr.cu", "emu", list(kernels.COMMON_OPTIONS))
    monkeypatch.setattr(emulated, "BUILD_FLAGS", tuple(f if f != "-O3" else "-O2" for f in emulated.BUILD_FLAGS))
    b = rt.compile(text, "psnr.cu", "emu", list(kernels.COMMON_OPTIONS))
    assert a != b and Path(a.decode()).exists() and Path(b.decode()).exists()
    c = rt.compile(text, "psnr.cu", "emu", [*kernels.COMMON_OPTIONS, "-DVX_EXTRA=1"])
    assert c not in (a, b)


def test_launches_from_several_threads_at_once_equal_the_cpu_lane(emu):
    """Three sessions' engines launching at the same time (shared memory is each block's
    own stack, blockIdx each thread's own): every one equals the numpy twins."""
    rt, dev = emu
    pair = vendored_pairs()[0]
    plan = ScoringPlan.build([], [FeatureRequest(f, {"debug": "true"}) for f in ("adm", "motion")]
                             + [FeatureRequest("psnr_hvs")])
    want = cpu_scores(plan, pair)
    got: list = [None] * 3
    start = threading.Barrier(3)

    def run(k: int) -> None:
        start.wait()
        got[k] = gpu_scores(rt, dev, plan, pair, batch=2)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(3):
        assert got[k] == want, f"thread {k} differs"
