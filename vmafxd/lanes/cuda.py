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
import threading
from typing import Sequence

import numpy as np

from .runtime import CompileError, DeviceInfo, RuntimeCallError, RuntimeUnavailable

__all__ = ["CudaRuntime", "load"]

_lock = threading.Lock()
_runtime: "CudaRuntime | None" = None


def load() -> "CudaRuntime":
    """The process's CUDA runtime (initialised once).  Raises RuntimeUnavailable."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = CudaRuntime()
        return _runtime


def _import_bindings():
    try:
        from cuda.bindings import driver, nvrtc
    except ImportError as e:
        raise RuntimeUnavailable("cuda", f"the cuda-bindings package is not installed ({e}); "
                                         "install vmafxd[cuda]") from None
    return driver, nvrtc


class _Checker:
    """Every driver call goes through here: a failing call raises with the driver's error name."""

    def __init__(self, driver):
        self.d = driver
        self.success = driver.CUresult.CUDA_SUCCESS

    def __call__(self, call: str, result):
        if isinstance(result, tuple):
            err, rest = result[0], result[1:]
        else:
            err, rest = result, ()
        if err != self.success:
            raise RuntimeCallError("cuda", call, self.error_name(err))
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    def error_name(self, err) -> str:
        try:
            e, name = self.d.cuGetErrorName(err)
            if e == self.success and name:
                return name.decode() if isinstance(name, bytes) else str(name)
        except Exception:
            pass
        return str(err)


class CudaEvent:
    """A CUDA event; ``recorded`` stays False until a record was enqueued (R5)."""

    def __init__(self, device: "CudaDevice", handle, *, owned: bool = True, interprocess: bool = False):
        self._dev = device
        self.handle = handle
        self.recorded = False
        self.interprocess = interprocess
        self._owned = owned

    def record(self, stream) -> None:
        self._dev._ck("cuEventRecord", self._dev._d.cuEventRecord(self.handle, stream.handle))
        self.recorded = True

    def query(self) -> bool:
        err = self._dev._d.cuEventQuery(self.handle)
        err = err[0] if isinstance(err, tuple) else err
        if err == self._dev._ck.success:
            return True
        if err == self._dev._d.CUresult.CUDA_ERROR_NOT_READY:
            return False
        raise RuntimeCallError("cuda", "cuEventQuery", self._dev._ck.error_name(err))

    def synchronize(self) -> None:
        self._dev._ck("cuEventSynchronize", self._dev._d.cuEventSynchronize(self.handle))

    def ipc_handle(self) -> bytes:
        h = self._dev._ck("cuIpcGetEventHandle", self._dev._d.cuIpcGetEventHandle(self.handle))
        return ctypes.string_at(h.getPtr(), 64)

    def close(self) -> None:
        h, self.handle = self.handle, None
        if h is not None and self._owned:
            self._dev._d.cuEventDestroy(h)


class CudaStream:
    def __init__(self, device: "CudaDevice", handle):
        self._dev = device
        self._obj = handle
        self.handle = handle

    def wait_event(self, event) -> None:
        self._dev._ck("cuStreamWaitEvent", self._dev._d.cuStreamWaitEvent(self.handle, event.handle, 0))

    def submit(self) -> None:
        # R9: a query makes the driver submit what was enqueued (the research
        # note saw the last frame come out wrong without it on HIP; on CUDA
        # it is cheap, so the lane does it the same way on both).
        self._dev._d.cuStreamQuery(self.handle)

    def synchronize(self) -> None:
        self._dev._ck("cuStreamSynchronize", self._dev._d.cuStreamSynchronize(self.handle))

    def close(self) -> None:
        h, self.handle = self.handle, None
        if h is not None:
            self._dev._d.cuStreamDestroy(h)


class CudaModule:
    def __init__(self, device: "CudaDevice", handle):
        self._dev = device
        self.handle = handle
        self._functions: dict[str, object] = {}

    def function(self, name: str):
        f = self._functions.get(name)
        if f is None:
            f = self._dev._ck(f"cuModuleGetFunction({name})",
                              self._dev._d.cuModuleGetFunction(self.handle, name.encode()))
            self._functions[name] = f
        return f

    def close(self) -> None:
        h, self.handle = self.handle, None
        if h is not None:
            self._dev._d.cuModuleUnload(h)


class VmmImport:
    """A VMM allocation of another process, mapped read-only into ours."""

    def __init__(self, device: "CudaDevice", ptr: int, size: int):
        self._dev = device
        self.ptr = ptr
        self.size = size
        self.device = device.info.ordinal

    def close(self) -> None:
        ptr, self.ptr = self.ptr, 0
        if ptr:
            d = self._dev._d
            d.cuMemUnmap(ptr, self.size)
            d.cuMemAddressFree(ptr, self.size)


class IpcImport:
    def __init__(self, device: "CudaDevice", ptr: int, size: int):
        self._dev = device
        self.ptr = ptr
        self.size = size
        self.device = device.info.ordinal

    def close(self) -> None:
        ptr, self.ptr = self.ptr, 0
        if ptr:
            self._dev._d.cuIpcCloseMemHandle(ptr)


class CudaDevice:
    def __init__(self, runtime: "CudaRuntime", ordinal: int):
        self._rt = runtime
        self._d = runtime.d
        self._ck = runtime.ck
        d, ck = self._d, self._ck
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

    # -- streams and events -----------------------------------------------
    def create_stream(self) -> CudaStream:
        h = self._ck("cuStreamCreate", self._d.cuStreamCreate(self._d.CUstream_flags.CU_STREAM_NON_BLOCKING))
        return CudaStream(self, h)

    def create_event(self, *, interprocess: bool = False) -> CudaEvent:
        f = self._d.CUevent_flags
        flags = f.CU_EVENT_DISABLE_TIMING
        if interprocess:
            flags |= f.CU_EVENT_INTERPROCESS
        h = self._ck("cuEventCreate", self._d.cuEventCreate(flags))
        return CudaEvent(self, h, interprocess=interprocess)

    def create_timing_event(self) -> CudaEvent:
        h = self._ck("cuEventCreate", self._d.cuEventCreate(self._d.CUevent_flags.CU_EVENT_DEFAULT))
        return CudaEvent(self, h)

    def elapsed_ms(self, start: CudaEvent, end: CudaEvent) -> float:
        return float(self._ck("cuEventElapsedTime", self._d.cuEventElapsedTime(start.handle, end.handle)))

    def open_ipc_event(self, handle: bytes) -> CudaEvent:
        if len(handle) != 64:
            raise ValueError("a CUDA IPC event handle is 64 bytes")
        buf = np.frombuffer(bytes(handle), dtype=np.uint8).copy()
        h = self._ck("cuIpcOpenEventHandle", self._d.cuIpcOpenEventHandle(self._d.CUipcEventHandle(buf.ctypes.data)))
        ev = CudaEvent(self, h, owned=True, interprocess=True)
        ev.recorded = True  # the producer recorded it; we only wait on it
        return ev

    # -- memory --------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        return int(self._ck("cuMemAlloc", self._d.cuMemAlloc(max(1, nbytes))))

    def free(self, ptr: int) -> None:
        if ptr:
            self._d.cuMemFree(ptr)

    def alloc_async(self, nbytes: int, stream: CudaStream) -> int:
        return int(self._ck("cuMemAllocAsync", self._d.cuMemAllocAsync(max(1, nbytes), stream.handle)))

    def free_async(self, ptr: int, stream: CudaStream) -> None:
        if ptr:
            self._ck("cuMemFreeAsync", self._d.cuMemFreeAsync(ptr, stream.handle))

    def alloc_host(self, nbytes: int) -> np.ndarray:
        ptr = int(self._ck("cuMemHostAlloc", self._d.cuMemHostAlloc(max(1, nbytes), 0)))
        arr = np.ctypeslib.as_array((ctypes.c_uint8 * max(1, nbytes)).from_address(ptr))
        return arr

    def free_host(self, array: np.ndarray) -> None:
        self._d.cuMemFreeHost(array.ctypes.data)

    def copy_htod_async(self, dst: int, src: np.ndarray, nbytes: int, stream: CudaStream) -> None:
        self._ck("cuMemcpyHtoDAsync", self._d.cuMemcpyHtoDAsync(dst, src.ctypes.data, nbytes, stream.handle))

    def copy_dtoh_async(self, dst: np.ndarray, src: int, nbytes: int, stream: CudaStream) -> None:
        self._ck("cuMemcpyDtoHAsync", self._d.cuMemcpyDtoHAsync(dst.ctypes.data, src, nbytes, stream.handle))

    def copy_dtod_async(self, dst: int, src: int, nbytes: int, stream: CudaStream) -> None:
        self._ck("cuMemcpyDtoDAsync", self._d.cuMemcpyDtoDAsync(dst, src, nbytes, stream.handle))

    def copy_2d_async(self, dst: int, dst_pitch: int, src: int, src_pitch: int,
                      width_bytes: int, rows: int, stream: CudaStream) -> None:
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

    def memset_async(self, dst: int, value: int, nbytes: int, stream: CudaStream) -> None:
        self._ck("cuMemsetD8Async", self._d.cuMemsetD8Async(dst, value, nbytes, stream.handle))

    # -- modules and launches -------------------------------------------
    def load_module(self, image: bytes) -> CudaModule:
        buf = np.frombuffer(image, dtype=np.uint8).copy()
        h = self._ck("cuModuleLoadData", self._d.cuModuleLoadData(buf.ctypes.data))
        return CudaModule(self, h)

    def set_max_shared(self, function, nbytes: int) -> None:
        d = self._d
        self._ck("cuFuncSetAttribute", d.cuFuncSetAttribute(
            function, d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes))

    def launch_packed(self, function, grid: Sequence[int], block: Sequence[int], shared: int,
                      stream: CudaStream, args_address: int, types=()) -> None:
        """Launch with a ready array of argument pointers at ``args_address`` (see gpu/launch.py).

        ``types`` (the parameters' dtypes) is for bindings that need them; the driver does not."""
        gx, gy, gz = (list(grid) + [1, 1])[:3]
        bx, by, bz = (list(block) + [1, 1])[:3]
        self._ck("cuLaunchKernel", self._d.cuLaunchKernel(
            function, gx, gy, gz, bx, by, bz, shared, stream.handle, args_address, 0))

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

    def import_vmm_fd(self, fd: int, size: int) -> VmmImport:
        """Map another process's VMM allocation (exported as a POSIX fd) read-only.

        The fd stays the caller's (the driver does not take it).  ``size`` is
        rounded up to the allocation granularity; a mapping larger than the
        allocation fails in cuMemMap.
        """
        d, ck = self._d, self._ck
        g = self.vmm_granularity()
        size = (size + g - 1) // g * g
        handle = ck("cuMemImportFromShareableHandle", d.cuMemImportFromShareableHandle(
            fd, d.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        ptr = 0
        try:
            ptr = int(ck("cuMemAddressReserve", d.cuMemAddressReserve(size, 0, 0, 0)))
            ck("cuMemMap", d.cuMemMap(ptr, size, 0, handle, 0))
            desc = d.CUmemAccessDesc()
            desc.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            desc.location.id = self.info.ordinal
            desc.flags = d.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READ
            try:
                ck("cuMemSetAccess", d.cuMemSetAccess(ptr, size, [desc], 1))
            except RuntimeCallError:
                d.cuMemUnmap(ptr, size)
                raise
        except BaseException:
            if ptr:
                d.cuMemAddressFree(ptr, size)
            d.cuMemRelease(handle)
            raise
        # The mapping holds the allocation; our handle is no longer needed.
        d.cuMemRelease(handle)
        return VmmImport(self, ptr, size)

    def import_ipc_memory(self, handle: bytes, size: int) -> IpcImport:
        if len(handle) != 64:
            raise ValueError("a CUDA IPC memory handle is 64 bytes")
        d = self._d
        buf = np.frombuffer(bytes(handle), dtype=np.uint8).copy()
        ptr = self._ck("cuIpcOpenMemHandle", d.cuIpcOpenMemHandle(
            d.CUipcMemHandle(buf.ctypes.data), d.CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return IpcImport(self, int(ptr), size)

    def import_dmabuf(self, fd: int, size: int):
        """External memory from a dma-buf fd.  On the H200 this answers CUDA_ERROR_NOT_SUPPORTED."""
        d, ck = self._d, self._ck
        desc = d.CUDA_EXTERNAL_MEMORY_HANDLE_DESC()
        desc.type = d.CUexternalMemoryHandleType.CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD
        desc.handle.fd = fd
        desc.size = size
        ext = ck("cuImportExternalMemory", d.cuImportExternalMemory(desc))
        try:
            bdesc = d.CUDA_EXTERNAL_MEMORY_BUFFER_DESC()
            bdesc.offset = 0
            bdesc.size = size
            ptr = ck("cuExternalMemoryGetMappedBuffer", d.cuExternalMemoryGetMappedBuffer(ext, bdesc))
        except BaseException:
            d.cuDestroyExternalMemory(ext)
            raise
        return _ExternalImport(self, int(ptr), size, ext)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._d.cuDevicePrimaryCtxRelease(self._dev)


class _ExternalImport:
    def __init__(self, device: CudaDevice, ptr: int, size: int, ext):
        self._dev = device
        self.ptr = ptr
        self.size = size
        self.device = device.info.ordinal
        self._ext = ext

    def close(self) -> None:
        ext, self._ext = self._ext, None
        if ext is not None:
            self._dev._d.cuMemFree(self.ptr)
            self._dev._d.cuDestroyExternalMemory(ext)
            self.ptr = 0


class CudaRuntime:
    name = "cuda"

    def __init__(self):
        self.d, self.nvrtc = _import_bindings()
        self.ck = _Checker(self.d)
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

    def device(self, ordinal: int) -> CudaDevice:
        dev = self._devices.get(ordinal)
        if dev is None:
            dev = self._devices[ordinal] = CudaDevice(self, ordinal)
        return dev

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
        raise RuntimeCallError("cuda", "nvrtcCreateProgram", str(err))
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *[o.encode() for o in options]]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != ok:
            _, n = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * n
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise CompileError("cuda", name, log.decode(errors="replace"))
        err, n = nvrtc.nvrtcGetCUBINSize(prog)
        if err != ok:
            raise RuntimeCallError("cuda", "nvrtcGetCUBINSize", str(err))
        cubin = b" " * n
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        if err != ok:
            raise RuntimeCallError("cuda", "nvrtcGetCUBIN", str(err))
        return bytes(cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
