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
* R9 :meth:`vmafxd.lanes.runtime.Stream.submit` queries the stream after enqueueing: without it
  the last frame came out wrong in 8 of 8 runs.
* R5 ``hipEventQuery`` of a never-recorded event returns success:
  :attr:`vmafxd.lanes.runtime.Event.recorded` stays False until a record is enqueued, and the
  pending table does not trust a query before that.
* R4 ``hipFree`` of a mapping synchronised the device for 200 ms: imports are
  closed only by the reaper, behind the lane's release event.
* R6/R7/R10 are the shared lane's (transient wait events, pool memory, one
  library stream).
"""

from __future__ import annotations

import ctypes
import os
from typing import Sequence

import numpy as np

from .errors import InvalidInput
from .runtime import (
    CompileError, DeviceInfo, DeviceTable, Event, ImportedMemory, OnePerProcess, RuntimeCallError, RuntimeUnavailable,
    StatusDevice, StatusDriver, Stream, Undo, status_code,
)

__all__ = ["HipRuntime", "load", "hiprtc_compile", "compiler_version", "HIPRTC_OPTIONS"]

#: HIPRTC's options for the kernels (no FMA contraction, as NVRTC's --fmad=false)
HIPRTC_OPTIONS = ("-ffp-contract=off", "-std=c++17")

_runtime = OnePerProcess(lambda: HipRuntime())


def load() -> "HipRuntime":
    """The process's HIP runtime (initialised once).  Raises RuntimeUnavailable."""
    return _runtime.get()


def _bindings():
    try:
        from hip import hip, hiprtc
    except ImportError as e:
        raise RuntimeUnavailable("hip", f"the hip-python package is not installed ({e}); install vmafxd[hip]") from None
    return hip, hiprtc


def _err_value(res):
    return res[0] if isinstance(res, tuple) else res


class _HipDriver(StatusDriver):
    """The driver table of the shared handle classes over hip-python (every call
    returns ``(hipError_t, *outputs)``)."""

    name = "hip"
    prefix = "hip"

    def __init__(self, hip):
        super().__init__(hip, hip.hipError_t.hipSuccess, hip.hipError_t.hipErrorNotReady)
        self.hip = hip

    def error_name(self, err) -> str:
        return getattr(err, "name", str(err))

    def ipc_bytes(self, handle) -> bytes:
        return bytes(handle.reserved) if hasattr(handle, "reserved") else ctypes.string_at(int(handle), 64)


class HipDevice(StatusDevice):
    ALLOC, FREE, ALLOC_ASYNC, FREE_ASYNC = "Malloc", "Free", "MallocAsync", "FreeAsync"
    HOST_ALLOC, HOST_FREE = "HostMalloc", "HostFree"
    #: hipHostRegisterDefault (0); hip-python offers no read-only flag, so a read-only
    #: mapping the driver will not pin falls back to pageable uploads (the lane says so once)
    HOST_REGISTER, HOST_UNREGISTER = "HostRegister", "HostUnregister"
    LAUNCH, LAUNCH_EXTRA = "ModuleLaunchKernel", None
    #: no graphs: hip-python's capture and instantiation calls have never run here (no AMD
    #: GPU), so the engine launches a batch's kernels one by one on HIP
    graphs = False

    def __init__(self, runtime: "HipRuntime", ordinal: int):
        self._rt = runtime
        self._hip = hip = runtime.hip
        self._ck = ck = self.driver = runtime.ck
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

    def scoped(self, fn):
        """``fn(handle)`` run with this device current, from any thread (the reaper, a
        finalizer); the thread's own current device is restored after."""
        hip, ck, ordinal = self._hip, self._ck, self._ordinal

        def call(handle) -> None:
            prev = ck("hipGetDevice", hip.hipGetDevice())
            ck("hipSetDevice", hip.hipSetDevice(ordinal))
            try:
                fn(handle)
            finally:
                ck("hipSetDevice", hip.hipSetDevice(prev))

        return call

    def create_stream(self) -> Stream:
        return Stream(self, self._ck("hipStreamCreateWithFlags",
                                        self._hip.hipStreamCreateWithFlags(self._hip.hipStreamNonBlocking)))

    def create_event(self, *, interprocess: bool = False, blocking: bool = False) -> Event:
        hip = self._hip
        flags = hip.hipEventDisableTiming | (hip.hipEventInterprocess if interprocess else 0)
        if blocking:  # hipEventSynchronize sleeps until the event completes instead of spinning
            flags |= hip.hipEventBlockingSync
        return Event(self, self._ck("hipEventCreateWithFlags", hip.hipEventCreateWithFlags(flags)),
                     interprocess=interprocess)

    def create_timing_event(self) -> Event:
        return Event(self, self._ck("hipEventCreate", self._hip.hipEventCreate()))

    def open_ipc_event(self, handle: bytes) -> Event:
        hip = self._hip
        h = hip.hipIpcEventHandle_t()
        ctypes.memmove(int(h.getPtr() if hasattr(h, "getPtr") else h.ptr), bytes(handle), 64)
        # owned: an opened IPC event is ours to destroy; recorded by the producer, we only wait on it
        return Event(self, self._ck("hipIpcOpenEventHandle", hip.hipIpcOpenEventHandle(h)), interprocess=True,
                     recorded=True)

    # memory
    def trim_pool(self) -> None:
        """Hand the stream-ordered pool's unused memory back (hipMemPoolTrimTo 0), as on CUDA (cuda.py)."""
        hip, ck = self._hip, self._ck
        pool = ck("hipDeviceGetDefaultMemPool", hip.hipDeviceGetDefaultMemPool(self._ordinal))
        self.scoped(lambda _: ck("hipMemPoolTrimTo", hip.hipMemPoolTrimTo(pool, 0)))(None)

    def free_memory(self) -> int:
        """Free device memory now (hipMemGetInfo, with this device current): the lane's budget."""
        out: list = []
        self.scoped(lambda _: out.append(self._ck("hipMemGetInfo", self._hip.hipMemGetInfo())))(None)
        return int(out[0][0])

    def copy_2d_async(self, dst, dst_pitch, src, src_pitch, width_bytes, rows, stream) -> None:
        hip = self._hip
        self._ck("hipMemcpy2DAsync", hip.hipMemcpy2DAsync(
            dst, dst_pitch, src, src_pitch, width_bytes, rows, hip.hipMemcpyKind.hipMemcpyDeviceToDevice,
            stream.handle))

    # imports: each step that succeeded is undone if a later one fails
    def import_dmabuf(self, fd: int, size: int) -> ImportedMemory:
        """R3: the dma-buf's own size, a larger declared size refused, a dup() we own and close.

        The caller passes the size it validated; we measure the real one on
        our own dup and refuse when the declared size exceeds it (the runtime
        would import 4x the buffer without a word): a :class:`LaneError`
        naming ``size``.
        """
        hip, ck = self._hip, self._ck
        with Undo() as undo:
            own = os.dup(fd)
            undo.push("close", os.close, own)
            real = os.lseek(own, 0, os.SEEK_END)
            if size > real:
                raise InvalidInput("size", f"declared {size} bytes but the dma-buf holds {real}")
            desc = hip.hipExternalMemoryHandleDesc()
            desc.type = hip.hipExternalMemoryHandleType.hipExternalMemoryHandleTypeOpaqueFd
            desc.handle.fd = own
            desc.size = real
            ext = ck("hipImportExternalMemory", hip.hipImportExternalMemory(desc))
            undo.push("hipDestroyExternalMemory", lambda: ck("hipDestroyExternalMemory", hip.hipDestroyExternalMemory(ext)))
            bdesc = hip.hipExternalMemoryBufferDesc()
            bdesc.offset = 0
            bdesc.size = real
            ptr = int(ck("hipExternalMemoryGetMappedBuffer", hip.hipExternalMemoryGetMappedBuffer(ext, bdesc)))

        def free(ptr: int) -> None:
            try:
                ck("hipFree", hip.hipFree(ptr))
                ck("hipDestroyExternalMemory", hip.hipDestroyExternalMemory(ext))
            finally:
                os.close(own)  # the runtime leaves the descriptor open (research note)

        return ImportedMemory(self, ptr, real, free)

    def import_ipc_memory(self, handle: bytes, size: int) -> ImportedMemory:
        if len(handle) != 64:
            raise ValueError("a HIP IPC memory handle is 64 bytes")
        hip, ck = self._hip, self._ck
        h = hip.hipIpcMemHandle_t()
        ctypes.memmove(int(h.getPtr() if hasattr(h, "getPtr") else h.ptr), bytes(handle), 64)
        ptr = int(ck("hipIpcOpenMemHandle", hip.hipIpcOpenMemHandle(h, hip.hipIpcMemLazyEnablePeerAccess)))
        return ImportedMemory(self, ptr, size, lambda p: ck("hipIpcCloseMemHandle", hip.hipIpcCloseMemHandle(p)))

    def vmm_handle_type(self):
        return self._hip.hipMemAllocationHandleType.hipMemHandleTypePosixFileDescriptor

    def vmm_read_access(self):
        hip = self._hip
        desc = hip.hipMemAccessDesc()
        desc.location.type = hip.hipMemLocationType.hipMemLocationTypeDevice
        desc.location.id = self._ordinal
        desc.flags = hip.hipMemAccessFlags.hipMemAccessFlagsProtRead
        return desc

    def close(self) -> None:
        self.closed = True


class HipRuntime(DeviceTable):
    device_class = HipDevice
    name = "hip"
    device_import_kinds = ("hip_vmm", "hip_ipc")
    ipc_event_kind = "hip_ipc_event"
    device_reads_host = False
    caches_binaries = True
    parallel_launches = True
    compile_options = HIPRTC_OPTIONS

    def __init__(self):
        self.hip, self.hiprtc = _bindings()
        self.ck = _HipDriver(self.hip)
        try:
            count = self.hip.hipGetDeviceCount()
        except RuntimeError as e:  # hip-python: "failed to dlopen libamdhip64.so"
            raise RuntimeUnavailable("hip", f"libamdhip64 cannot be loaded ({e})") from None
        err = _err_value(count)
        if err == self.hip.hipError_t.hipErrorNoDevice or (err == self.ck.success and count[1] == 0):
            raise RuntimeUnavailable("hip", "no AMD GPU (hipGetDeviceCount: hipErrorNoDevice)")
        if err != self.ck.success:
            raise RuntimeUnavailable("hip", f"hipGetDeviceCount failed with {self.ck.error_name(err)}")
        self._count = int(count[1])
        self._devices: dict[int, HipDevice] = {}

    def device_count(self) -> int:
        return self._count

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
        raise RuntimeCallError("hip", "hiprtcCreateProgram", str(err), status_code(err))
    try:
        opts = [f"--offload-arch={arch}".encode(), *[o.encode() for o in options]]
        (err,) = hiprtc.hiprtcCompileProgram(prog, len(opts), opts)
        if err != ok:
            _, n = hiprtc.hiprtcGetProgramLogSize(prog)
            log = bytearray(n)
            hiprtc.hiprtcGetProgramLog(prog, log)
            raise CompileError("hip", name, bytes(log).decode(errors="replace"), "hiprtcCompileProgram")
        _, n = hiprtc.hiprtcGetCodeSize(prog)
        code = bytearray(n)
        (err,) = hiprtc.hiprtcGetCode(prog, code)
        if err != ok:
            raise RuntimeCallError("hip", "hiprtcGetCode", str(err), status_code(err))
        return bytes(code)
    finally:
        # the C call takes a hiprtcProgram* (passing the handle itself crashes)
        hiprtc.hiprtcDestroyProgram(prog.createRef())
