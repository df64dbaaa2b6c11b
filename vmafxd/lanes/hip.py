"""The HIP binding of the GPU runtime layer, over hip-python and HIPRTC.

Only this module names HIP.  The lane above it is the CUDA lane's code, so
every rule of the research note on the gfx1036 / ROCm 10.1 runtime
(``../shared/seeds/research-2159-hip-runtime-imports.txt``) is kept here or in
the shared lane code — docs/lanes.md lists where each one lives:

* R3 ``hipImportExternalMemory`` of a dma-buf imports *any* size it is given
  (4x the buffer included) and leaves the descriptor open: :meth:`import_dmabuf`
  takes the size from ``lseek(SEEK_END)`` on a ``dup()`` it owns, refuses a larger
  declared size naming the field, and closes that dup when the import is freed.
* R2 a sync_file is never imported as an external semaphore (10.1 refuses,
  7.2 aborts the process): this binding has no semaphore import at all; fences
  are checked on the host by the daemon.
* R9 :meth:`HipStream.submit` queries the stream after enqueueing: without it
  the last frame came out wrong in 8 of 8 runs.
* R5 ``hipEventQuery`` of a never-recorded event returns success:
  :attr:`HipEvent.recorded` stays False until a record is enqueued, and the
  pending table does not trust a query before that.
* R4 ``hipFree`` of a mapping synchronised the device for 200 ms: imports are
  closed only by the reaper, behind the lane's release event.
* R6/R7/R10 are the shared lane's (transient wait events, pool memory, one
  library stream).
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Sequence

import numpy as np

from .runtime import CompileError, DeviceInfo, RuntimeCallError, RuntimeUnavailable

__all__ = ["HipRuntime", "load", "hiprtc_compile", "compiler_version"]

_lock = threading.Lock()
_runtime: "HipRuntime | None" = None


def load() -> "HipRuntime":
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = HipRuntime()
        return _runtime


def _bindings():
    try:
        from hip import hip, hiprtc
    except ImportError as e:
        raise RuntimeUnavailable("hip", f"the hip-python package is not installed ({e}); install vmafxd[hip]") from None
    return hip, hiprtc


def _err_value(res):
    return res[0] if isinstance(res, tuple) else res


class _Checker:
    def __init__(self, hip):
        self.hip = hip
        self.success = hip.hipError_t.hipSuccess

    def __call__(self, call: str, result):
        err = _err_value(result)
        rest = result[1:] if isinstance(result, tuple) else ()
        if err != self.success:
            raise RuntimeCallError("hip", call, self.name(err))
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    def name(self, err) -> str:
        return getattr(err, "name", str(err))


class HipEvent:
    def __init__(self, device: "HipDevice", handle, *, interprocess: bool = False, owned: bool = True):
        self._dev = device
        self.handle = handle
        self.recorded = False  # R5: a never-recorded event queries as complete on HIP
        self.interprocess = interprocess
        self._owned = owned

    def record(self, stream) -> None:
        self._dev._ck("hipEventRecord", self._dev._hip.hipEventRecord(self.handle, stream.handle))
        self.recorded = True

    def query(self) -> bool:
        hip = self._dev._hip
        err = _err_value(hip.hipEventQuery(self.handle))
        if err == hip.hipError_t.hipSuccess:
            return True
        if err == hip.hipError_t.hipErrorNotReady:
            return False
        raise RuntimeCallError("hip", "hipEventQuery", self._dev._ck.name(err))

    def synchronize(self) -> None:
        self._dev._ck("hipEventSynchronize", self._dev._hip.hipEventSynchronize(self.handle))

    def ipc_handle(self) -> bytes:
        h = self._dev._ck("hipIpcGetEventHandle", self._dev._hip.hipIpcGetEventHandle(self.handle))
        return bytes(h.reserved) if hasattr(h, "reserved") else ctypes.string_at(int(h), 64)

    def close(self) -> None:
        h, self.handle = self.handle, None
        if h is not None and self._owned:
            self._dev._hip.hipEventDestroy(h)


class HipStream:
    def __init__(self, device: "HipDevice", handle):
        self._dev = device
        self.handle = handle

    def wait_event(self, event) -> None:
        self._dev._ck("hipStreamWaitEvent", self._dev._hip.hipStreamWaitEvent(self.handle, event.handle, 0))

    def submit(self) -> None:
        # R9: without a query after enqueueing, the research note's last frame
        # came out wrong in 8 of 8 runs (the work sat unsubmitted).
        self._dev._hip.hipStreamQuery(self.handle)

    def synchronize(self) -> None:
        self._dev._ck("hipStreamSynchronize", self._dev._hip.hipStreamSynchronize(self.handle))

    def close(self) -> None:
        h, self.handle = self.handle, None
        if h is not None:
            self._dev._hip.hipStreamDestroy(h)


class HipModule:
    def __init__(self, device: "HipDevice", handle):
        self._dev = device
        self.handle = handle
        self._functions: dict[str, object] = {}

    def function(self, name: str):
        f = self._functions.get(name)
        if f is None:
            f = self._functions[name] = self._dev._ck(
                f"hipModuleGetFunction({name})", self._dev._hip.hipModuleGetFunction(self.handle, name.encode()))
        return f

    def close(self) -> None:
        h, self.handle = self.handle, None
        if h is not None:
            self._dev._hip.hipModuleUnload(h)


class _HipImport:
    """Imported device memory; ``close()`` frees it (only the reaper calls it, R4)."""

    def __init__(self, device: "HipDevice", ptr: int, size: int, free):
        self._dev = device
        self.ptr = ptr
        self.size = size
        self.device = device.info.ordinal
        self._free = free

    def close(self) -> None:
        free, self._free = self._free, None
        if free is not None:
            self._dev.make_current()
            free()
            self.ptr = 0


class HipDevice:
    def __init__(self, runtime: "HipRuntime", ordinal: int):
        self._rt = runtime
        self._hip = hip = runtime.hip
        self._ck = ck = runtime.ck
        self._ordinal = ordinal
        ck("hipSetDevice", hip.hipSetDevice(ordinal))
        props = hip.hipDeviceProp_t()
        ck("hipGetDeviceProperties", hip.hipGetDeviceProperties(props, ordinal))
        name = props.name.decode() if isinstance(props.name, bytes) else str(props.name)
        arch = props.gcnArchName.decode() if isinstance(props.gcnArchName, bytes) else str(props.gcnArchName)
        bus = ck("hipDeviceGetPCIBusId", hip.hipDeviceGetPCIBusId(32, ordinal))
        bus = bus.split(b"\0", 1)[0].decode() if isinstance(bus, (bytes, bytearray)) else str(bus)
        self.info = DeviceInfo(ordinal, name.split("\0", 1)[0], bus.lower(), arch.split(":", 1)[0],
                               int(props.multiProcessorCount), int(props.totalGlobalMem))
        # Keep freed pool memory cached (R7), as on CUDA.
        pool = ck("hipDeviceGetDefaultMemPool", hip.hipDeviceGetDefaultMemPool(ordinal))
        threshold = np.array([np.iinfo(np.uint64).max], dtype=np.uint64)
        ck("hipMemPoolSetAttribute", hip.hipMemPoolSetAttribute(
            pool, hip.hipMemPoolAttr.hipMemPoolAttrReleaseThreshold, threshold))
        self.closed = False

    def make_current(self) -> None:
        self._ck("hipSetDevice", self._hip.hipSetDevice(self._ordinal))

    def create_stream(self) -> HipStream:
        return HipStream(self, self._ck("hipStreamCreateWithFlags",
                                        self._hip.hipStreamCreateWithFlags(self._hip.hipStreamNonBlocking)))

    def create_event(self, *, interprocess: bool = False) -> HipEvent:
        hip = self._hip
        flags = hip.hipEventDisableTiming | (hip.hipEventInterprocess if interprocess else 0)
        return HipEvent(self, self._ck("hipEventCreateWithFlags", hip.hipEventCreateWithFlags(flags)),
                        interprocess=interprocess)

    def create_timing_event(self) -> HipEvent:
        return HipEvent(self, self._ck("hipEventCreate", self._hip.hipEventCreate()))

    def elapsed_ms(self, start: HipEvent, end: HipEvent) -> float:
        return float(self._ck("hipEventElapsedTime", self._hip.hipEventElapsedTime(start.handle, end.handle)))

    def open_ipc_event(self, handle: bytes) -> HipEvent:
        hip = self._hip
        h = hip.hipIpcEventHandle_t()
        ctypes.memmove(int(h.getPtr() if hasattr(h, "getPtr") else h.ptr), bytes(handle), 64)
        ev = HipEvent(self, self._ck("hipIpcOpenEventHandle", hip.hipIpcOpenEventHandle(h)), interprocess=True)
        ev.recorded = True  # recorded by the producer; we only wait on it
        return ev

    # memory
    def alloc(self, nbytes: int) -> int:
        return int(self._ck("hipMalloc", self._hip.hipMalloc(max(1, nbytes))))

    def free(self, ptr: int) -> None:
        if ptr:
            self._hip.hipFree(ptr)

    def alloc_async(self, nbytes: int, stream: HipStream) -> int:
        return int(self._ck("hipMallocAsync", self._hip.hipMallocAsync(max(1, nbytes), stream.handle)))

    def free_async(self, ptr: int, stream: HipStream) -> None:
        if ptr:
            self._ck("hipFreeAsync", self._hip.hipFreeAsync(ptr, stream.handle))

    def alloc_host(self, nbytes: int) -> np.ndarray:
        ptr = int(self._ck("hipHostMalloc", self._hip.hipHostMalloc(max(1, nbytes), 0)))
        return np.ctypeslib.as_array((ctypes.c_uint8 * max(1, nbytes)).from_address(ptr))

    def free_host(self, array: np.ndarray) -> None:
        self._hip.hipHostFree(array.ctypes.data)

    def copy_htod_async(self, dst: int, src: np.ndarray, nbytes: int, stream: HipStream) -> None:
        self._ck("hipMemcpyHtoDAsync", self._hip.hipMemcpyHtoDAsync(dst, src.ctypes.data, nbytes, stream.handle))

    def copy_dtoh_async(self, dst: np.ndarray, src: int, nbytes: int, stream: HipStream) -> None:
        self._ck("hipMemcpyDtoHAsync", self._hip.hipMemcpyDtoHAsync(dst.ctypes.data, src, nbytes, stream.handle))

    def copy_dtod_async(self, dst: int, src: int, nbytes: int, stream: HipStream) -> None:
        self._ck("hipMemcpyDtoDAsync", self._hip.hipMemcpyDtoDAsync(dst, src, nbytes, stream.handle))

    def copy_2d_async(self, dst, dst_pitch, src, src_pitch, width_bytes, rows, stream) -> None:
        hip = self._hip
        self._ck("hipMemcpy2DAsync", hip.hipMemcpy2DAsync(
            dst, dst_pitch, src, src_pitch, width_bytes, rows, hip.hipMemcpyKind.hipMemcpyDeviceToDevice,
            stream.handle))

    def memset_async(self, dst: int, value: int, nbytes: int, stream: HipStream) -> None:
        self._ck("hipMemsetD8Async", self._hip.hipMemsetD8Async(dst, value, nbytes, stream.handle))

    # modules and launches
    def load_module(self, image: bytes) -> HipModule:
        buf = np.frombuffer(image, dtype=np.uint8).copy()
        return HipModule(self, self._ck("hipModuleLoadData", self._hip.hipModuleLoadData(buf.ctypes.data)))

    def launch_packed(self, function, grid: Sequence[int], block: Sequence[int], shared: int,
                      stream: HipStream, args_address: int, types=()) -> None:
        gx, gy, gz = (list(grid) + [1, 1])[:3]
        bx, by, bz = (list(block) + [1, 1])[:3]
        self._ck("hipModuleLaunchKernel", self._hip.hipModuleLaunchKernel(
            function, gx, gy, gz, bx, by, bz, shared, stream.handle, args_address, None))

    # imports
    def import_dmabuf(self, fd: int, size: int) -> _HipImport:
        """R3: the dma-buf's own size, a larger declared size refused, a dup() we own and close.

        The caller passes the size it validated; we measure the real one on
        our own dup and refuse when the declared size exceeds it (the runtime
        would import 4x the buffer without a word).
        """
        hip = self._hip
        own = os.dup(fd)
        try:
            real = os.lseek(own, 0, os.SEEK_END)
            if size > real:
                raise RuntimeCallError("hip", "hipImportExternalMemory", "E_INVAL",
                                       f"size: declared {size} bytes but the dma-buf holds {real}")
            desc = hip.hipExternalMemoryHandleDesc()
            desc.type = hip.hipExternalMemoryHandleType.hipExternalMemoryHandleTypeOpaqueFd
            desc.handle.fd = own
            desc.size = real
            ext = self._ck("hipImportExternalMemory", hip.hipImportExternalMemory(desc))
            bdesc = hip.hipExternalMemoryBufferDesc()
            bdesc.offset = 0
            bdesc.size = real
            try:
                ptr = int(self._ck("hipExternalMemoryGetMappedBuffer", hip.hipExternalMemoryGetMappedBuffer(ext, bdesc)))
            except BaseException:
                hip.hipDestroyExternalMemory(ext)
                raise
        except BaseException:
            os.close(own)
            raise

        def free():
            hip.hipFree(ptr)
            hip.hipDestroyExternalMemory(ext)
            os.close(own)  # the runtime leaves the descriptor open (research note)

        return _HipImport(self, ptr, real, free)

    def import_ipc_memory(self, handle: bytes, size: int) -> _HipImport:
        hip = self._hip
        h = hip.hipIpcMemHandle_t()
        ctypes.memmove(int(h.getPtr() if hasattr(h, "getPtr") else h.ptr), bytes(handle), 64)
        ptr = int(self._ck("hipIpcOpenMemHandle", hip.hipIpcOpenMemHandle(h, hip.hipIpcMemLazyEnablePeerAccess)))
        return _HipImport(self, ptr, size, lambda: hip.hipIpcCloseMemHandle(ptr))

    def import_vmm_fd(self, fd: int, size: int) -> _HipImport:
        hip, ck = self._hip, self._ck
        handle = ck("hipMemImportFromShareableHandle", hip.hipMemImportFromShareableHandle(
            fd, hip.hipMemAllocationHandleType.hipMemHandleTypePosixFileDescriptor))
        ptr = int(ck("hipMemAddressReserve", hip.hipMemAddressReserve(size, 0, 0, 0)))
        try:
            ck("hipMemMap", hip.hipMemMap(ptr, size, 0, handle, 0))
            desc = hip.hipMemAccessDesc()
            desc.location.type = hip.hipMemLocationType.hipMemLocationTypeDevice
            desc.location.id = self._ordinal
            desc.flags = hip.hipMemAccessFlags.hipMemAccessFlagsProtRead
            ck("hipMemSetAccess", hip.hipMemSetAccess(ptr, size, desc, 1))
        except BaseException:
            hip.hipMemAddressFree(ptr, size)
            hip.hipMemRelease(handle)
            raise
        hip.hipMemRelease(handle)

        def free():
            hip.hipMemUnmap(ptr, size)
            hip.hipMemAddressFree(ptr, size)

        return _HipImport(self, ptr, size, free)

    def close(self) -> None:
        self.closed = True


class HipRuntime:
    name = "hip"

    def __init__(self):
        self.hip, self.hiprtc = _bindings()
        self.ck = _Checker(self.hip)
        try:
            count = self.hip.hipGetDeviceCount()
        except RuntimeError as e:  # hip-python: "failed to dlopen libamdhip64.so"
            raise RuntimeUnavailable("hip", f"libamdhip64 cannot be loaded ({e})") from None
        err = _err_value(count)
        if err == self.hip.hipError_t.hipErrorNoDevice or (err == self.ck.success and count[1] == 0):
            raise RuntimeUnavailable("hip", "no AMD GPU (hipGetDeviceCount: hipErrorNoDevice)")
        if err != self.ck.success:
            raise RuntimeUnavailable("hip", f"hipGetDeviceCount failed with {self.ck.name(err)}")
        self._count = int(count[1])
        self._devices: dict[int, HipDevice] = {}

    def device_count(self) -> int:
        return self._count

    def device(self, ordinal: int) -> HipDevice:
        dev = self._devices.get(ordinal)
        if dev is None:
            dev = self._devices[ordinal] = HipDevice(self, ordinal)
        return dev

    def compiler_version(self) -> str:
        return compiler_version()

    def compile(self, source: str, name: str, arch: str, options: Sequence[str]) -> bytes:
        return hiprtc_compile(source, name, arch, options)


def compiler_version() -> str:
    hip, hiprtc = _bindings()
    try:
        v = hip.hipRuntimeGetVersion()
        return f"hiprtc-hip{int(v[1])}"
    except RuntimeError as e:
        raise RuntimeUnavailable("hip", f"libamdhip64 cannot be loaded ({e})") from None


def hiprtc_compile(source: str, name: str, arch: str, options: Sequence[str]) -> bytes:
    """Compile to a code object for ``arch`` (``gfx1036``); needs no GPU (the arch is given, not queried)."""
    _, hiprtc = _bindings()
    ok = hiprtc.hiprtcResult.HIPRTC_SUCCESS
    try:
        res = hiprtc.hiprtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    except RuntimeError as e:
        raise RuntimeUnavailable("hip", f"HIPRTC cannot be loaded ({e})") from None
    err, prog = res
    if _err_value(err) != ok and err != 0:
        raise RuntimeCallError("hip", "hiprtcCreateProgram", str(err))
    try:
        opts = [f"--offload-arch={arch}".encode(), *[o.encode() for o in options]]
        (err,) = hiprtc.hiprtcCompileProgram(prog, len(opts), opts)
        if err != ok:
            _, n = hiprtc.hiprtcGetProgramLogSize(prog)
            log = bytearray(n)
            hiprtc.hiprtcGetProgramLog(prog, log)
            raise CompileError("hip", name, bytes(log).decode(errors="replace"))
        _, n = hiprtc.hiprtcGetCodeSize(prog)
        code = bytearray(n)
        (err,) = hiprtc.hiprtcGetCode(prog, code)
        if err != ok:
            raise RuntimeCallError("hip", "hiprtcGetCode", str(err))
        return bytes(code)
    finally:
        # the C call takes a hiprtcProgram* (passing the handle itself crashes)
        hiprtc.hiprtcDestroyProgram(prog.createRef())
