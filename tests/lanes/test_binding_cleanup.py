"""The CUDA and HIP bindings' clean-up paths, over a recording stand-in for the driver.

No GPU is needed: the bindings' own code runs, every driver call it makes is
recorded, and one chosen call fails.  What is checked is the binding's logic
-- a failed import undoes exactly the steps that succeeded, newest first; a
destroy is checked and runs with the device made current and restored --
not the driver's behaviour (the H200 run checks that).
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from vmafxd.lanes import cuda, hip
from vmafxd.lanes.errors import LaneError, RuntimeCallError
from vmafxd.lanes.runtime import DeviceInfo, live_handles

FAIL = 999


class _Any:
    """Enum members and descriptor structs: any attribute, settable, nestable."""

    def __getattr__(self, name):
        v = _Any()
        object.__setattr__(self, name, v)
        return v

    def __call__(self, *a, **k):
        return _Any()

    def __or__(self, other):
        return self

    __ror__ = __or__


_HIP_CONSTANTS = {"hipEventDisableTiming", "hipEventInterprocess", "hipStreamNonBlocking",
                  "hipIpcMemLazyEnablePeerAccess"}


class FakeDriver:
    def __init__(self, fail: str | None = None):
        self.calls: list[str] = []
        self.fail = fail
        self._next = 1000
        self.CUresult = SimpleNamespace(CUDA_SUCCESS=0, CUDA_ERROR_NOT_READY=600)
        self.hipError_t = SimpleNamespace(hipSuccess=0, hipErrorNotReady=600)

    def cuGetErrorName(self, err):
        return (0, b"CUDA_ERROR_FAKE")

    def __getattr__(self, name):
        # calls are cuXxx / hipXxx; hip's enums, structs and flags are told apart by name
        if name.startswith(("cu", "hip")) and name not in _HIP_CONSTANTS and (
                name.endswith("WithFlags") or not name.endswith(("Type", "Desc", "Flags", "_t"))):
            def call(*args):
                self.calls.append(name)
                if name == self.fail:
                    return (FAIL,)
                self._next += 1
                return (0, self._next)
            return call
        return _Any()


def _cuda_device(fail=None):
    fake = FakeDriver(fail)
    dev = cuda.CudaDevice.__new__(cuda.CudaDevice)
    dev._d = fake
    dev._ck = dev.driver = cuda._CudaDriver(fake)
    dev._ctx = "ctx"
    dev._granularity = 2
    dev.info = DeviceInfo(0, "fake", "0000:00:00.0", "sm_90", 1, 1)
    dev.closed = False
    return dev, fake


def _hip_device(fail=None):
    fake = FakeDriver(fail)
    dev = hip.HipDevice.__new__(hip.HipDevice)
    dev._hip = fake
    dev._ck = dev.driver = hip._HipDriver(fake)
    dev._ordinal = 0
    dev.info = DeviceInfo(0, "fake", "0000:00:00.0", "gfx1036", 1, 1)
    dev.closed = False
    return dev, fake


_VMM = {
    "cuda": ("cuMemImportFromShareableHandle", "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree",
             "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuCtxPushCurrent", "cuCtxPopCurrent"),
    "hip": ("hipMemImportFromShareableHandle", "hipMemRelease", "hipMemAddressReserve", "hipMemAddressFree",
            "hipMemMap", "hipMemUnmap", "hipMemSetAccess", None, None),
}


@pytest.mark.parametrize("runtime", ["cuda", "hip"])
@pytest.mark.parametrize("step", ["import", "reserve", "map", "access", "release"])
def test_a_failed_vmm_import_undoes_exactly_what_succeeded(runtime, step):
    imp, rel, reserve, addr_free, map_, unmap, access, _, _ = _VMM[runtime]
    failing = {"import": imp, "reserve": reserve, "map": map_, "access": access, "release": rel}[step]
    dev, fake = (_cuda_device if runtime == "cuda" else _hip_device)(failing)
    with pytest.raises(RuntimeCallError) as e:
        dev.import_vmm_fd(5, 4)
    assert e.value.call == failing and e.value.runtime == runtime and e.value.code == FAIL
    after = fake.calls[fake.calls.index(failing) + 1:]
    undo = {
        "import": [],
        "reserve": [rel],
        "map": [addr_free, rel],
        "access": [unmap, addr_free, rel],
        # the mapping holds the allocation once mapped: a failed release of our handle
        # undoes the mapping, and is not retried
        "release": [unmap, addr_free],
    }[step]
    assert after == undo


@pytest.mark.parametrize("runtime", ["cuda", "hip"])
def test_an_import_is_freed_once_with_the_device_current(runtime):
    imp, rel, reserve, addr_free, map_, unmap, access, push, pop = _VMM[runtime]
    dev, fake = (_cuda_device if runtime == "cuda" else _hip_device)()
    base = live_handles(runtime, "import")
    mem = dev.import_vmm_fd(5, 4)
    assert fake.calls == [imp, reserve, map_, access, rel]
    assert live_handles(runtime, "import") == base + 1
    fake.calls.clear()
    mem.close()
    mem.close()
    if runtime == "cuda":
        assert fake.calls == [push, unmap, addr_free, pop]
    else:  # the thread's device is read, set, and put back
        assert fake.calls == ["hipGetDevice", "hipSetDevice", unmap, addr_free, "hipSetDevice"]
    assert mem.ptr == 0 and live_handles(runtime, "import") == base


@pytest.mark.parametrize("runtime", ["cuda", "hip"])
def test_a_failing_destroy_raises_and_the_context_is_restored(runtime):
    destroy = "cuEventDestroy" if runtime == "cuda" else "hipEventDestroy"
    dev, fake = (_cuda_device if runtime == "cuda" else _hip_device)(destroy)
    base = live_handles(runtime, "event")
    ev = dev.create_event()
    with pytest.raises(RuntimeCallError, match=destroy):
        ev.close()
    restore = "cuCtxPopCurrent" if runtime == "cuda" else "hipSetDevice"
    assert fake.calls[-1] == restore and fake.calls[-2] == destroy
    ev.close()  # gone already: not destroyed twice
    assert fake.calls.count(destroy) == 1 and live_handles(runtime, "event") == base


def test_cuda_dmabuf_import_destroys_the_external_memory_when_mapping_fails():
    dev, fake = _cuda_device("cuExternalMemoryGetMappedBuffer")
    with pytest.raises(RuntimeCallError):
        dev.import_dmabuf(5, 4096)
    assert fake.calls == ["cuImportExternalMemory", "cuExternalMemoryGetMappedBuffer", "cuDestroyExternalMemory"]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_hip_dmabuf_refuses_a_larger_declared_size_naming_it_and_closes_its_dup():
    dev, fake = _hip_device()
    fd = os.memfd_create("dmabuf-stand-in")
    try:
        os.ftruncate(fd, 4096)
        before = _open_fds()
        with pytest.raises(LaneError) as e:
            dev.import_dmabuf(fd, 4 * 4096)
        assert e.value.field == "size" and not isinstance(e.value, RuntimeCallError)
        assert "16384" in str(e.value) and "4096" in str(e.value)
        assert fake.calls == [] and _open_fds() == before

        dev, fake = _hip_device("hipExternalMemoryGetMappedBuffer")
        with pytest.raises(RuntimeCallError):
            dev.import_dmabuf(fd, 4096)
        assert fake.calls == ["hipImportExternalMemory", "hipExternalMemoryGetMappedBuffer",
                              "hipDestroyExternalMemory"]
        assert _open_fds() == before

        dev, fake = _hip_device()
        mem = dev.import_dmabuf(fd, 4096)
        assert mem.size == 4096 and _open_fds() == before + 1  # the dup it owns (R3)
        mem.close()
        assert fake.calls[-4:] == ["hipSetDevice", "hipFree", "hipDestroyExternalMemory", "hipSetDevice"]
        assert _open_fds() == before
    finally:
        os.close(fd)


@pytest.mark.parametrize("runtime", ["cuda", "hip"])
def test_trimming_the_pool_asks_for_the_default_pool_then_trims_it_to_nothing(runtime):
    dev, fake = (_cuda_device if runtime == "cuda" else _hip_device)()
    dev._dev = 0
    trimmed = []
    real = fake.__getattr__(f"{'cu' if runtime == 'cuda' else 'hip'}MemPoolTrimTo")

    def trim(pool, keep):
        trimmed.append((pool, keep))
        return real(pool, keep)

    setattr(fake, f"{'cu' if runtime == 'cuda' else 'hip'}MemPoolTrimTo", trim)
    dev.trim_pool()
    if runtime == "cuda":
        assert fake.calls == ["cuDeviceGetDefaultMemPool", "cuCtxPushCurrent", "cuMemPoolTrimTo", "cuCtxPopCurrent"]
    else:
        assert fake.calls == ["hipDeviceGetDefaultMemPool", "hipGetDevice", "hipSetDevice", "hipMemPoolTrimTo",
                              "hipSetDevice"]
    assert trimmed == [(1001, 0)]  # the pool the first call returned, trimmed to 0 bytes kept
