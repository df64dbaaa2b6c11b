"""KernelSet.device_table: a read-only table built once a device, shared, freed at close."""

from __future__ import annotations

import pytest

from vmafxd.lanes.gpu.engine import KernelSet

pytestmark = pytest.mark.gpu


@pytest.fixture
def emu():
    from .conftest import load_runtime

    rt, dev = load_runtime("emu")
    dev.make_current()
    return rt, dev


def test_built_once_shared_and_freed_at_close(emu):
    rt, dev = emu
    before = dev.allocated_bytes
    ks = KernelSet(rt, dev)
    st = dev.create_stream()
    builds = []

    def build(nbytes):
        def fill(ptr, stream):
            builds.append(ptr)
            dev.memset_async(ptr, 7, nbytes, stream)
        return fill

    a = ks.device_table("t", 4096, build(4096), st)
    b = ks.device_table("t", 4096, build(4096), st)
    other = ks.device_table("u", 64, build(64), st)
    assert a == b and other != a and builds == [a, other]
    assert dev.allocated_bytes > before
    ks.close()
    ks.close()  # idempotent
    assert dev.allocated_bytes == before


def test_a_failed_build_frees_its_memory_and_the_next_call_builds_again(emu):
    rt, dev = emu
    before = dev.allocated_bytes
    ks = KernelSet(rt, dev)
    st = dev.create_stream()

    def failing(ptr, stream):
        raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError, match="launch failed"):
        ks.device_table("t", 4096, failing, st)
    assert dev.allocated_bytes == before
    built = []
    ptr = ks.device_table("t", 4096, lambda p, s: built.append(p), st)
    assert built == [ptr]
    ks.close()
    assert dev.allocated_bytes == before
