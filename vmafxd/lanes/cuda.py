"""The CUDA binding of the GPU runtime layer, over cuda-bindings (driver API) and NVRTC.

Only this module names CUDA.  Facts it is built on, measured on the H200
(../shared/docs/PLATFORM.md):

* the zero-copy path between processes is the CUDA VMM POSIX fd
  (``cuMemImportFromShareableHandle`` + reserve/map/set-access);
* legacy IPC memory and event handles work;
* ``cuImportExternalMemory`` of a dma-buf answers ``CUDA_ERROR_NOT_SUPPORTED``
  (NVIDIA documents it for Tegra only): the lane turns that into ``E_NOTSUP``;
* ``cuEventQuery`` of a never-recorded event returns success (R5's trap);
* PTX from a newer NVRTC than the driver is refused, so we load cubin, never PTX.
"""

from __future__ import annotations

import ctypes
from typing import Sequence

import numpy as np

from .runtime import (
    CompileError, DeviceInfo, DeviceTable, Event, ImportedMemory, OnePerProcess, RuntimeCallError, RuntimeUnavailable,
    StatusDevice, StatusDriver, Stream, Undo, status_code,
)

__all__ = ["CudaRuntime", "load", "nvrtc_compile", "compiler_version", "NVRTC_OPTIONS"]

#: NVRTC's options for the kernels: no FMA contraction, so device arithmetic that
#: passes through double/float (VIF's g, ADM's angle test) rounds as the CPU twin's.
NVRTC_OPTIONS = ("--fmad=false", "--std=c++17", "-default-device")

_runtime = OnePerProcess(lambda: CudaRuntime())


def load() -> "CudaRuntime":
    """The process's CUDA runtime (initialised once).  Raises RuntimeUnavailable."""
    return _runtime.get()


def _import_bindings():
    try:
        from cuda.bindings import driver, nvrtc
    except ImportError as e:
        raise RuntimeUnavailable("cuda", f"the cuda-bindings package is not installed ({e}); "
                                         "install vmafxd[cuda]") from None
    return driver, nvrtc


class _CudaDriver(StatusDriver):
    """The driver table of the shared handle classes over cuda-bindings' driver API
    (every call returns ``(CUresult, *outputs)``)."""

    name = "cuda"
    prefix = "cu"

    def __init__(self, driver):
        super().__init__(driver, driver.CUresult.CUDA_SUCCESS, driver.CUresult.CUDA_ERROR_NOT_READY)
        self.d = driver

    def error_name(self, err) -> str:
        try:
            e, name = self.d.cuGetErrorName(err)
            if e == self.success and name:
                return name.decode() if isinstance(name, bytes) else str(name)
        except Exception:
            pass
        return str(err)

    def ipc_bytes(self, handle) -> bytes:
        return ctypes.string_at(handle.getPtr(), 64)


class CudaDevice(StatusDevice):
    graphs = True

    def __init__(self, runtime: "CudaRuntime", ordinal: int):
        self._rt = runtime
        self._d = runtime.d
        self._ck = self.driver = runtime.ck
        d, ck = self._d, self._ck
        self.CAPTURE_MODE = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self._dev = ck("cuDeviceGet", d.cuDeviceGet(ordinal))
        name = ck("cuDeviceGetName", d.cuDeviceGetName(256, self._dev))
        name = name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)
        bus = ck("cuDeviceGetPCIBusId", d.cuDeviceGetPCIBusId(32, self._dev))
        bus = bus.split(b"\0", 1)[0].decode() if isinstance(bus, bytes) else str(bus)
        attr = d.CUdevice_attribute
        major = ck("cuDeviceGetAttribute", d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self._dev))
        minor = ck("cuDeviceGetAttribute", d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self._dev))
        sms = ck("cuDeviceGetAttribute", d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, self._dev))
        total = ck("cuDeviceTotalMem", d.cuDeviceTotalMem(self._dev))
        self.info = DeviceInfo(ordinal, name, bus.lower(), f"sm_{major}{minor}", int(sms), int(total))
        self._ctx = ck("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(self._dev))
        self.make_current()
        # Keep freed stream-ordered memory in the pool (R7): without a release
        # threshold the pool would hand pages back to the driver at every sync.
        pool = ck("cuDeviceGetDefaultMemPool", d.cuDeviceGetDefaultMemPool(self._dev))
        ck("cuMemPoolSetAttribute", d.cuMemPoolSetAttribute(
            pool, d.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, d.cuuint64_t(0xFFFFFFFFFFFFFFFF)))
        self._granularity: int | None = None
        self.closed = False

    # -- context -----------------------------------------------------------
    def make_current(self) -> None:
        self._ck("cuCtxSetCurrent", self._d.cuCtxSetCurrent(self._ctx))

    def scoped(self, fn):
        """``fn(handle)`` run with this device's context pushed, from any thread (the
        reaper, a finalizer); the thread's own current context is restored after."""
        d, ctx, ck = self._d, self._ctx, self._ck

        def call(handle) -> None:
            ck("cuCtxPushCurrent", d.cuCtxPushCurrent(ctx))
            try:
                fn(handle)
            finally:
                ck("cuCtxPopCurrent", d.cuCtxPopCurrent())

        return call

    # -- streams and events -----------------------------------------------
    def create_stream(self) -> Stream:
        h = self._ck("cuStreamCreate", self._d.cuStreamCreate(self._d.CUstream_flags.CU_STREAM_NON_BLOCKING))
        return Stream(self, h)

    def create_event(self, *, interprocess: bool = False, blocking: bool = False) -> Event:
        f = self._d.CUevent_flags
        flags = f.CU_EVENT_DISABLE_TIMING
        if interprocess:
            flags |= f.CU_EVENT_INTERPROCESS
        if blocking:  # cuEventSynchronize sleeps until the event completes instead of spinning
            flags |= f.CU_EVENT_BLOCKING_SYNC
        h = self._ck("cuEventCreate", self._d.cuEventCreate(flags))
        return Event(self, h, interprocess=interprocess)

    def create_timing_event(self) -> Event:
        h = self._ck("cuEventCreate", self._d.cuEventCreate(self._d.CUevent_flags.CU_EVENT_DEFAULT))
        return Event(self, h)

    def open_ipc_event(self, handle: bytes) -> Event:
        if len(handle) != 64:
            raise ValueError("a CUDA IPC event handle is 64 bytes")
        buf = np.frombuffer(bytes(handle), dtype=np.uint8).copy()
        h = self._ck("cuIpcOpenEventHandle", self._d.cuIpcOpenEventHandle(self._d.CUipcEventHandle(buf.ctypes.data)))
        # owned: an opened IPC event is ours to destroy; recorded: the producer recorded it, we only wait on it
        return Event(self, h, owned=True, interprocess=True, recorded=True)

    # -- memory --------------------------------------------------------------
    def trim_pool(self) -> None:
        """Hand the stream-ordered pool's unused memory back to the driver (cuMemPoolTrimTo 0).

        The pool keeps what it ever held (the release threshold above, R7); the lane
        trims it once a worker has had no session for a while (gpu/worker.py), so an
        idle daemon's device memory returns to its baseline."""
        d, ck = self._d, self._ck
        pool = ck("cuDeviceGetDefaultMemPool", d.cuDeviceGetDefaultMemPool(self._dev))
        self.scoped(lambda _: ck("cuMemPoolTrimTo", d.cuMemPoolTrimTo(pool, 0)))(None)

    def free_memory(self) -> int:
        """Free device memory now (cuMemGetInfo, with this device's context pushed): the lane's budget."""
        out: list = []
        self.scoped(lambda _: out.append(self._ck("cuMemGetInfo", self._d.cuMemGetInfo())))(None)
        return int(out[0][0])

    def copy_2d_async(self, dst: int, dst_pitch: int, src: int, src_pitch: int,
                      width_bytes: int, rows: int, stream: Stream) -> None:
        d = self._d
        p = d.CUDA_MEMCPY2D()
        p.srcMemoryType = d.CUmemorytype.CU_MEMORYTYPE_DEVICE
        p.srcDevice = src
        p.srcPitch = src_pitch
        p.dstMemoryType = d.CUmemorytype.CU_MEMORYTYPE_DEVICE
        p.dstDevice = dst
        p.dstPitch = dst_pitch
        p.WidthInBytes = width_bytes
        p.Height = rows
        self._ck("cuMemcpy2DAsync", d.cuMemcpy2DAsync(p, stream.handle))

    def host_register_flags(self):
        """The daemon maps producers' memfds read-only, and pinning a read-only mapping takes
        ``CU_MEMHOSTREGISTER_READ_ONLY`` (where the device has
        ``READ_ONLY_HOST_REGISTER_SUPPORTED``; else the driver answers not-supported);
        ``CU_MEMHOSTREGISTER_DEFAULT`` (0) is tried after it."""
        return (self._d.CU_MEMHOSTREGISTER_READ_ONLY, 0)

    # -- modules and launches -------------------------------------------
    def set_max_shared(self, function, nbytes: int) -> None:
        d = self._d
        self._ck("cuFuncSetAttribute", d.cuFuncSetAttribute(
            function, d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes))

    # -- imports -----------------------------------------------------------
    def vmm_granularity(self) -> int:
        if self._granularity is None:
            d = self._d
            prop = d.CUmemAllocationProp()
            prop.type = d.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
            prop.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            prop.location.id = self.info.ordinal
            prop.requestedHandleTypes = d.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            g = self._ck("cuMemGetAllocationGranularity", d.cuMemGetAllocationGranularity(
                prop, d.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM))
            self._granularity = int(g)
        return self._granularity

    def vmm_size(self, size: int) -> int:
        """``size`` rounded up to the allocation granularity."""
        g = self.vmm_granularity()
        return (size + g - 1) // g * g

    def vmm_handle_type(self):
        return self._d.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

    def vmm_read_access(self):
        d = self._d
        desc = d.CUmemAccessDesc()
        desc.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        desc.location.id = self.info.ordinal
        desc.flags = d.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READ
        return [desc]

    def import_ipc_memory(self, handle: bytes, size: int) -> ImportedMemory:
        if len(handle) != 64:
            raise ValueError("a CUDA IPC memory handle is 64 bytes")
        d, ck = self._d, self._ck
        buf = np.frombuffer(bytes(handle), dtype=np.uint8).copy()
        ptr = ck("cuIpcOpenMemHandle", d.cuIpcOpenMemHandle(
            d.CUipcMemHandle(buf.ctypes.data), d.CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return ImportedMemory(self, int(ptr), size,
                              lambda p: ck("cuIpcCloseMemHandle", d.cuIpcCloseMemHandle(p)))

    def import_dmabuf(self, fd: int, size: int) -> ImportedMemory:
        """External memory from a dma-buf fd.  On the H200 this answers CUDA_ERROR_NOT_SUPPORTED."""
        d, ck = self._d, self._ck
        desc = d.CUDA_EXTERNAL_MEMORY_HANDLE_DESC()
        desc.type = d.CUexternalMemoryHandleType.CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD
        desc.handle.fd = fd
        desc.size = size
        with Undo() as undo:
            ext = ck("cuImportExternalMemory", d.cuImportExternalMemory(desc))
            undo.push("cuDestroyExternalMemory", lambda: ck("cuDestroyExternalMemory", d.cuDestroyExternalMemory(ext)))
            bdesc = d.CUDA_EXTERNAL_MEMORY_BUFFER_DESC()
            bdesc.offset = 0
            bdesc.size = size
            ptr = int(ck("cuExternalMemoryGetMappedBuffer", d.cuExternalMemoryGetMappedBuffer(ext, bdesc)))

        def free(ptr: int) -> None:
            # the mapped buffer first (cuMemFree, as the driver documents), then the memory object
            ck("cuMemFree", d.cuMemFree(ptr))
            ck("cuDestroyExternalMemory", d.cuDestroyExternalMemory(ext))

        return ImportedMemory(self, ptr, size, free)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._ck("cuDevicePrimaryCtxRelease", self._d.cuDevicePrimaryCtxRelease(self._dev))


class CudaRuntime(DeviceTable):
    device_class = CudaDevice
    name = "cuda"
    device_import_kinds = ("cuda_vmm", "cuda_ipc")
    ipc_event_kind = "cuda_ipc_event"
    device_reads_host = False
    caches_binaries = True
    parallel_launches = True
    compile_options = NVRTC_OPTIONS

    def __init__(self):
        self.d, self.nvrtc = _import_bindings()
        self.ck = _CudaDriver(self.d)
        try:
            err = self.d.cuInit(0)
        except Exception as e:  # cuda-pathfinder's DynamicLibNotFoundError and friends
            raise RuntimeUnavailable("cuda", f"no CUDA driver ({type(e).__name__}: {e})") from None
        err = err[0] if isinstance(err, tuple) else err
        if err != self.ck.success:
            raise RuntimeUnavailable("cuda", f"cuInit failed with {self.ck.error_name(err)}")
        self._devices: dict[int, CudaDevice] = {}

    def device_count(self) -> int:
        return int(self.ck("cuDeviceGetCount", self.d.cuDeviceGetCount()))

    def compiler_version(self) -> str:
        return compiler_version()

    def compile(self, source: str, name: str, arch: str, options: Sequence[str]) -> bytes:
        return nvrtc_compile(source, name, arch, options)


def compiler_version() -> str:
    _, nvrtc = _import_bindings()
    err, major, minor = nvrtc.nvrtcVersion()
    return f"nvrtc-{major}.{minor}"


def nvrtc_compile(source: str, name: str, arch: str, options: Sequence[str]) -> bytes:
    """Compile CUDA C++ to a cubin for ``arch`` (``sm_90``).  Needs no GPU."""
    _, nvrtc = _import_bindings()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    if err != ok:
        raise RuntimeCallError("cuda", "nvrtcCreateProgram", str(err), status_code(err))
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *[o.encode() for o in options]]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != ok:
            _, n = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * n
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise CompileError("cuda", name, log.decode(errors="replace"), "nvrtcCompileProgram")
        err, n = nvrtc.nvrtcGetCUBINSize(prog)
        if err != ok:
            raise RuntimeCallError("cuda", "nvrtcGetCUBINSize", str(err), status_code(err))
        cubin = b" " * n
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        if err != ok:
            raise RuntimeCallError("cuda", "nvrtcGetCUBIN", str(err), status_code(err))
        return bytes(cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
