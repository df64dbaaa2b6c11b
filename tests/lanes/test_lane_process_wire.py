"""What crosses between the daemon and a lane's worker process (vmafxd/lanes/process/wire.py)."""

from __future__ import annotations

import os
import socket
from types import MappingProxyType

import numpy as np
import pytest

from vmafx.formats import PixelFormat
from vmafxd.core.layout import BufferLayout, Geometry, PlaneSpec
from vmafxd.core.scoring import PlanError
from vmafxd.lanes.errors import InvalidInput, LaneFailure, LaneStopped, OutOfMemory, Unsupported
from vmafxd.lanes.process import wire


@pytest.mark.parametrize("error", [InvalidInput("planes[0].fd", "not a memfd"), Unsupported("kind", "no"),
                                   OutOfMemory("size", "mmap"), LaneFailure("session", "boom"),
                                   LaneStopped("", "stopping"), PlanError("feature.vif", "too small")])
def test_errors_keep_their_class_field_and_reason(error):
    back = wire.error_from_wire(wire.decode(wire.encode([wire.error_to_wire(error)]))[0])
    assert type(back) is type(error) and (back.field, back.reason) == (error.field, error.reason)


def test_other_errors_cross_as_lane_failures_or_value_errors():
    assert type(wire.error_from_wire(wire.error_to_wire(ValueError("vif needs 16x16")))) is ValueError
    back = wire.error_from_wire(wire.error_to_wire(KeyError("x")))
    assert type(back) is LaneFailure and back.reason == "KeyError: 'x'"


def test_a_layout_crosses_whole():
    geo = Geometry(64, 48, PixelFormat.YUV420P, 10)
    layout = BufferLayout("dmabuf", geo, 12345, 7, True,
                          (PlaneSpec(0, 0, 128, 48, 128), PlaneSpec(1, 64, 64, 24, 64)), device=1, handle=b"\x00h")
    assert wire.layout_from_wire(wire.decode(wire.encode([wire.layout_to_wire(layout)]))[0]) == layout


def test_a_plan_crosses_with_its_models_and_resolved_options():
    from vmafx.protocol import Limits
    from vmafxd.session import build_plan

    plan = build_plan(["version=vmaf_v0.6.1neg"], ["psnr", "float_ssim"], Limits())
    back = wire.plan_from_wire(wire.plan_to_wire(plan))
    assert [(i.decl, i.values) for i in back.instances] == [(i.decl, i.values) for i in plan.instances]
    assert back.model_inputs == plan.model_inputs and [m.name for m in back.models] == ["vmaf"]
    assert back.metric_names() == plan.metric_names()


def test_metrics_cross_bit_for_bit_and_numpy_scalars_as_numbers():
    values = [0.1 + 0.2, 1e-300, float("inf"), np.float64(2) ** 0.5, np.float32(0.3)]
    back = wire.decode(wire.encode([values]))[0]
    assert back[:4] == [0.1 + 0.2, 1e-300, float("inf"), float(np.float64(2) ** 0.5)]
    assert back[4] == float(np.float32(0.3))


def test_scored_items_cross_as_the_lane_gives_them():
    """A sink's (index, metrics) pairs go into SCORED unconverted: tuples arrive as lists, a metrics
    mapping that is not a dict (and any sequence) as its plain counterpart, values bit for bit."""
    items = [(0, {"psnr_y": 0.1 + 0.2}), (1, MappingProxyType({"psnr_y": np.float32(0.3)})),
             (2, {"psnr_y": float("inf")})]
    back = wire.decode(wire.encode([[wire.SCORED, 3, items], [wire.RELEASED, range(4, 6)]]))
    assert back == [[wire.SCORED, 3, [[0, {"psnr_y": 0.1 + 0.2}], [1, {"psnr_y": float(np.float32(0.3))}],
                                      [2, {"psnr_y": float("inf")}]]], [wire.RELEASED, [4, 5]]]


def _target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # closed meanwhile
        return ""


def test_a_packet_over_the_inline_size_travels_in_a_memfd_and_leaves_no_fd():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        big = [[wire.SCORED, 1, [[i, {"psnr_y": i / 7, "name": "x" * 40}] for i in range(4000)]]]
        assert len(wire.encode(big)) > wire.INLINE_MAX
        wire.send_blocking(a, big)
        got, fds = wire.recv_blocking(b)
        assert got == big and fds == []
        # no fd of the message's memfd left open, on either side (counting all fds would race with
        # other threads of the test process closing theirs)
        assert not [fd for fd in os.listdir("/proc/self/fd") if "vmafxd-lane-msg" in _target(fd)]
    finally:
        a.close()
        b.close()
