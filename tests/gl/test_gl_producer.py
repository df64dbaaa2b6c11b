"""The GL producer harness, run here: shader output, read-backs, registration, releases, state checks.

No GL export path runs on this machine (PLATFORM.md), so the exporter is the
:class:`~tests.gl.session.HostReadbackExporter` stand-in (a host copy into a
memfd) and the daemon is the CPU lane.  What this proves before the H200 run:
the dither shader writes exactly what numpy computes for every plane format
(R8, GR88, R16, GR1616; odd sizes), the harness registers each buffer once,
checks the acquire, keeps the producer's state, waits for both releases, and
its scores equal the memfd twin's bit for bit.  tests/gl/test_gl_nvidia.py
runs the same harness with the real memory-object exporter on the H200.
"""

from __future__ import annotations

import os

import pytest

try:
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    from OpenGL import GL  # noqa: F401
except Exception as e:  # noqa: BLE001
    pytest.skip(f"PyOpenGL or a GL library is missing ({type(e).__name__}: {e}); install vmafxd[gl] and Debian's "
                "libegl1 libgl1 libegl-mesa0 (scripts/bootstrap.sh test)", allow_module_level=True)

from vmafx import gl as vg  # noqa: E402

from ..daemon.conftest import Daemon  # noqa: E402
from ..daemon.rawclient import RawClient  # noqa: E402
from .producer import CASES  # noqa: E402
from .session import HostReadbackExporter, differing, gl_session, memfd_session  # noqa: E402


@pytest.fixture(scope="module")
def cpu_daemon():
    d = Daemon(workers=2, fence_timeout_ms=2000)
    try:
        yield d
    finally:
        alive = d.proc.poll() is None
        rc = d.stop() if alive else d.proc.returncode
        log = d.log()
        d.close()
        assert alive and rc == 0, f"the daemon exited with {rc}:\n{log[-4000:]}"


def test_the_daemon_device_from_a_real_hello(cpu_daemon, egl):
    c = RawClient(cpu_daemon.socket, "gl-hello")
    hello = c.hello()
    print(hello.lanes)
    dev = vg.DaemonDevice.from_lanes(hello.lanes)
    assert dev.lane == "cpu" and dev.index == 0
    c.close()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_harness_scores_like_the_memfd_twin_with_a_host_readback_stand_in(cpu_daemon, egl, case):
    c = RawClient(cpu_daemon.socket, f"gl-{case.id}")
    c.hello()
    run = gl_session(c, egl, case, lambda p, w, h, f, b: HostReadbackExporter(p, w, h, f, b), frames=3)
    twin = memfd_session(c, run)
    diff = differing(run.results, twin)
    for i in sorted(run.results):
        print(f"{case.id} frame {i}: vmaf {run.results[i].get('vmaf')} / twin {twin[i].get('vmaf')}")
    assert not diff, diff[:8]
    assert run.state_checks == len(run.refs) >= 2
    assert [r for r, _ in run.zero_copy] == ["ref", "dist"]  # registered once each
    assert all(0 <= run.results[i]["vmaf"] <= 100 for i in run.results)
    assert len({run.results[i]["psnr_y"] for i in run.results}) == len(run.results)  # the frames differ
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    c.close()
