"""The small GPU runtime layer the GPU lane is written against.

The CUDA and HIP lanes are one code path (``vmafxd/lanes/gpu.py``) over this
interface; only the bindings (``cuda.py``, ``hip.py``) name a vendor.  What a
lane needs and nothing more:

* devices: ordinal, name, PCI location, architecture, multiprocessor count;
* one context per device, made current on the thread that owns the device;
* streams, events (timing off; interprocess ones for producer fences and
  release points), stream waits;
* stream-ordered allocations from the stream's pool (``alloc_async`` /
  ``free_async``, R7), plain device allocations, pinned host memory;
* copies host<->device and device<->device, 1-D and 2-D, asynchronous;
* modules from compiled code (cubin / code object) and kernel launches;
* imported memory: VMM POSIX fds, IPC memory handles, dma-bufs (external
  memory, where the driver can), each an :class:`ImportedMemory` that owns its
  mapping and frees it behind the lane's release event (R4);
* a compiler (NVRTC / HIPRTC) with a version string for the kernel cache key.

Every driver call goes through the binding's one checker, which raises
:class:`RuntimeCallError` carrying the runtime, the call and the driver's
error name (and the compile log for the compiler).  Handles are owned by one
Python object each, with an idempotent ``close()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

__all__ = [
    "RuntimeUnavailable",
    "RuntimeCallError",
    "CompileError",
    "DeviceInfo",
    "Event",
    "Stream",
    "ImportedMemory",
    "Module",
    "Device",
    "Runtime",
]


class RuntimeUnavailable(RuntimeError):
    """The runtime cannot be used here (binding missing, driver library missing, no device).

    ``runtime`` names it ("cuda", "hip"); the message says what is missing, in
    words an operator can act on.
    """

    def __init__(self, runtime: str, message: str):
        super().__init__(f"{runtime}: {message}")
        self.runtime = runtime
        self.reason = message


class RuntimeCallError(RuntimeError):
    """A driver call failed: ``runtime``, ``call`` and the driver's ``error`` name."""

    def __init__(self, runtime: str, call: str, error: str, detail: str = ""):
        msg = f"{runtime}: {call} failed with {error}"
        if detail:
            msg += f": {detail}"
        super().__init__(msg)
        self.runtime = runtime
        self.call = call
        self.error = error

    @property
    def not_supported(self) -> bool:
        return self.error.endswith("NOT_SUPPORTED") or self.error.endswith("NotSupported")


class CompileError(RuntimeError):
    def __init__(self, runtime: str, source: str, log: str):
        super().__init__(f"{runtime}: compiling {source} failed:\n{log}")
        self.runtime = runtime
        self.source = source
        self.log = log


@dataclass(frozen=True)
class DeviceInfo:
    ordinal: int
    name: str
    #: "0000:3b:00.0"
    pci_bus_id: str
    #: the compiler's target: "sm_90", "gfx1036"
    arch: str
    multiprocessors: int
    total_memory: int


class Event(Protocol):
    """A device event.  ``recorded`` is False until :meth:`record` was enqueued (R5)."""

    recorded: bool

    def record(self, stream: "Stream") -> None: ...

    def query(self) -> bool: ...

    def synchronize(self) -> None: ...

    def ipc_handle(self) -> bytes: ...

    def close(self) -> None: ...


class Stream(Protocol):
    handle: int

    def wait_event(self, event: Event) -> None: ...

    def submit(self) -> None:
        """Make sure enqueued work is submitted to the device (R9: a stream query)."""

    def synchronize(self) -> None: ...

    def close(self) -> None: ...


class ImportedMemory(Protocol):
    """Device memory of another process, mapped into ours.  ``close()`` unmaps and frees it."""

    ptr: int
    size: int
    device: int

    def close(self) -> None: ...


class Module(Protocol):
    def function(self, name: str) -> int: ...

    def close(self) -> None: ...


class Device(Protocol):
    info: DeviceInfo

    def make_current(self) -> None: ...

    def create_stream(self) -> Stream: ...

    def create_event(self, *, interprocess: bool = False) -> Event: ...

    def open_ipc_event(self, handle: bytes) -> Event: ...

    def alloc(self, nbytes: int) -> int: ...

    def free(self, ptr: int) -> None: ...

    def alloc_async(self, nbytes: int, stream: Stream) -> int: ...

    def free_async(self, ptr: int, stream: Stream) -> None: ...

    def alloc_host(self, nbytes: int): ...  # a numpy uint8 array in pinned memory

    def free_host(self, array) -> None: ...

    def copy_htod_async(self, dst: int, src, nbytes: int, stream: Stream) -> None: ...

    def copy_dtoh_async(self, dst, src: int, nbytes: int, stream: Stream) -> None: ...

    def copy_dtod_async(self, dst: int, src: int, nbytes: int, stream: Stream) -> None: ...

    def copy_2d_async(self, dst: int, dst_pitch: int, src: int, src_pitch: int,
                      width_bytes: int, rows: int, stream: Stream) -> None: ...

    def memset_async(self, dst: int, value: int, nbytes: int, stream: Stream) -> None: ...

    def load_module(self, image: bytes) -> Module: ...

    def launch_packed(self, function: int, grid: Sequence[int], block: Sequence[int], shared: int,
                      stream: Stream, args_address: int, types: Sequence = ()) -> None: ...

    def import_vmm_fd(self, fd: int, size: int) -> ImportedMemory: ...

    def import_ipc_memory(self, handle: bytes) -> ImportedMemory: ...

    def import_dmabuf(self, fd: int, size: int) -> ImportedMemory: ...

    def close(self) -> None: ...


class Runtime(Protocol):
    name: str

    def device_count(self) -> int: ...

    def device(self, ordinal: int) -> Device: ...

    def compiler_version(self) -> str: ...

    def compile(self, source: str, name: str, arch: str, options: Sequence[str]) -> bytes: ...
