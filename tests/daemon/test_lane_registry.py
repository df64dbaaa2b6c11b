"""The lane registry: pluggable factories, typed unavailability, auto's fallback."""

import pytest

from vmafxd import lanes
from vmafxd.lanes import LaneUnavailable, create_lane
from vmafxd.lanes.device import LaneServices


class Cfg:
    cpu_workers = 1


def test_unbuilt_and_unknown_lanes(monkeypatch):
    monkeypatch.delitem(lanes.LANE_FACTORIES, "cuda", raising=False)
    with pytest.raises(LaneUnavailable) as e:
        create_lane("cuda", Cfg(), LaneServices())
    assert str(e.value) == "lane cuda is not available: this build of vmafxd has no such lane yet"
    with pytest.raises(LaneUnavailable):
        create_lane("opencl", Cfg(), LaneServices())


def test_a_factory_whose_runtime_is_missing_makes_auto_fall_back_to_cpu(monkeypatch):
    from vmafxd.lanes.runtime import RuntimeUnavailable

    def no_driver(config, services):
        raise RuntimeUnavailable("cuda", "no CUDA driver (libcuda.so.1 not found)")

    monkeypatch.setitem(lanes.LANE_FACTORIES, "cuda", no_driver)
    monkeypatch.setitem(lanes.LANE_FACTORIES, "hip", "vmafxd.lanes.no_such_module:create")
    with pytest.raises(LaneUnavailable) as e:
        create_lane("cuda", Cfg(), LaneServices())
    assert e.value.reason == "no CUDA driver (libcuda.so.1 not found)"
    with pytest.raises(LaneUnavailable) as e:
        create_lane("hip", Cfg(), LaneServices())
    assert "cannot be imported" in e.value.reason
    lane = create_lane("auto", Cfg(), LaneServices())
    assert lane.name == "cpu" and len(lane.describe()["devices"]) == 1
