"""The GPU runtime layer: what the GPU lane (``vmafxd/lanes/gpu/``) is written against.

Three bindings implement it: ``cuda.py`` (cuda-bindings' driver API and
NVRTC), ``hip.py`` (hip-python and HIPRTC) and ``emulated.py`` (the kernels'
own source built with the host C++ compiler, for CI).  Only a binding names
its vendor.  This module holds what they share:

* **Owned handles** (:class:`Owned`, in cuda.core's manner): one Python object
  per driver handle.  ``close()`` destroys it, is checked (a failing destroy
  raises :class:`RuntimeCallError`) and is safe to call twice; a handle
  dropped without ``close()`` is destroyed by a ``weakref.finalize`` safety
  net (its failure is logged, there is no caller to raise to; while this
  thread captures a graph the net waits for the capture's end,
  :func:`drops_deferred`).  A *borrowed*
  handle (``owned=False``: someone else destroys it) is never destroyed here.
  :func:`live_handles` counts the owned handles not yet destroyed, so tests
  can show that sessions leave none behind.
* **One class per handle kind**, :class:`Event`, :class:`Stream`,
  :class:`Module`, :class:`ImportedMemory`, :class:`HostRegistration` and :class:`Graph`, over a binding's
  :class:`Driver` table (the few calls each kind needs).  A binding supplies
  the table and its :class:`Device`; it repeats none of these classes.
* **One error type**: :class:`~vmafxd.lanes.errors.RuntimeCallError` (runtime,
  call, the driver's error name and code), with
  :class:`~vmafxd.lanes.errors.CompileError` carrying the compiler's log.
  :class:`RuntimeUnavailable` says that the runtime cannot be used here at all.
* **Capabilities** on the :class:`Runtime` (which buffer kinds it imports as
  device memory, its interprocess event kind, whether its device reads host
  memory in place, whether its compiled binaries are worth the on-disk cache,
  its compiler options): the lane reads these, never the runtime's name.

What a device offers (:class:`Device`): streams and events (timing off;
interprocess ones for producer fences), stream-ordered allocations from the
stream's pool (R7) and plain ones, pinned host memory (allocated, or a host
mapping registered: :class:`HostRegistration`), asynchronous copies,
modules and launches with a packed argument array, graphs (a stream's work
captured once and launched again in one call, where the binding has them), and imports of another
process's memory (VMM POSIX fds, IPC memory handles, dma-bufs), each an
:class:`ImportedMemory` that the lane's reaper closes behind the release
event of every frame that read it (R4).
"""

from __future__ import annotations

import ctypes
import logging
import threading
import weakref
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from .errors import CompileError, LaneError, RuntimeCallError

__all__ = [
    "RuntimeUnavailable",
    "RuntimeCallError",
    "CompileError",
    "LaneError",
    "DeviceInfo",
    "Driver",
    "StatusDriver",
    "status_code",
    "Owned",
    "Event",
    "Stream",
    "Module",
    "ImportedMemory",
    "HostRegistration",
    "Graph",
    "Device",
    "StatusDevice",
    "Runtime",
    "DeviceTable",
    "OnePerProcess",
    "live_handles",
    "dropped_handles",
    "drops_deferred",
    "Undo",
]

log = logging.getLogger("vmafxd.lanes.runtime")


class RuntimeUnavailable(RuntimeError):
    """The runtime cannot be used here (binding missing, driver library missing, no device).

    ``runtime`` names it ("cuda", "hip"); the message says what is missing, in
    words an operator can act on.
    """

    def __init__(self, runtime: str, message: str):
        super().__init__(f"{runtime}: {message}")
        self.runtime = runtime
        self.reason = message


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


# --------------------------------------------------------------------------- owned handles

_live: Counter = Counter()
_dropped: Counter = Counter()
_live_lock = threading.Lock()


def live_handles(runtime: str | None = None, kind: str | None = None) -> int:
    """Owned handles created and not yet destroyed (of one runtime / kind, or all)."""
    with _live_lock:
        return sum(n for (r, k), n in _live.items()
                   if (runtime is None or r == runtime) and (kind is None or k == kind))


def dropped_handles(runtime: str | None = None) -> int:
    """Owned handles that were destroyed by the safety net, not by ``close()`` (a leak found)."""
    with _live_lock:
        return sum(n for (r, _), n in _dropped.items() if runtime is None or r == runtime)


def _destroy(key: tuple[str, str], destroy: Callable[[Any], None], handle: Any, dropped: bool) -> None:
    with _live_lock:
        _live[key] -= 1
        if dropped:
            _dropped[key] += 1
    if not dropped:
        destroy(handle)
        return
    if getattr(_capturing, "depth", 0):
        with _live_lock:
            _deferred.append((key, destroy, handle))
        return
    _safety_net(key, destroy, handle)


def _safety_net(key: tuple[str, str], destroy: Callable[[Any], None], handle: Any) -> None:
    # Nobody called close().  There is no caller to raise to.
    try:
        destroy(handle)
    except Exception as e:
        log.warning("%s %s dropped without close(): destroying it failed: %s", key[0], key[1], e)
    else:
        log.debug("%s %s dropped without close() was destroyed by its finalizer", key[0], key[1])


_capturing = threading.local()
_deferred: list[tuple[tuple[str, str], Callable[[Any], None], Any]] = []


@contextmanager
def drops_deferred():
    """The span of a graph capture on this thread.

    A capturing thread may not free or unload (CUDA's thread-local capture mode:
    the call fails and the capture is invalidated).  The garbage collector runs
    finalizers on whichever thread allocates, so a handle dropped without
    ``close()`` (a cycle collected at that moment) would do just that inside the
    capture.  Within this span its destroy waits in a queue, run when the
    outermost span on this thread ends."""
    depth = getattr(_capturing, "depth", 0)
    _capturing.depth = depth + 1
    try:
        yield
    finally:
        _capturing.depth = depth
        if depth == 0:
            with _live_lock:
                todo = list(_deferred)
                _deferred.clear()
            for key, destroy, handle in todo:
                _safety_net(key, destroy, handle)


class Owned:
    """One driver handle.  ``destroy`` (None: borrowed) is called once, by ``close()`` or at drop.

    ``destroy`` must not refer to this object (the finalizer holds it); it
    receives the raw handle and must work from any thread (a binding makes
    its device's context current around it).  ``owner`` keeps whatever a
    borrowed handle lives in (a module for its functions) alive as long as it.
    """

    kind = "handle"

    def __init__(self, runtime: str, handle: Any, destroy: Callable[[Any], None] | None, *, owner: Any = None):
        self.runtime = runtime
        self.handle = handle
        self._owner = owner
        self._finalizer: weakref.finalize | None = None
        if destroy is not None:
            key = (runtime, self.kind)
            with _live_lock:
                _live[key] += 1
            self._finalizer = weakref.finalize(self, _destroy, key, destroy, handle, True)
            # At interpreter exit the process's end frees everything; calling into a
            # driver that is being torn down only risks a crash.
            self._finalizer.atexit = False

    @property
    def owned(self) -> bool:
        return self._finalizer is not None

    @property
    def closed(self) -> bool:
        return self.handle is None

    def close(self) -> None:
        """Destroy the handle (checked); a second call does nothing.  A borrowed one is only let go."""
        fin, self._finalizer = self._finalizer, None
        self.handle = None
        self._owner = None
        if fin is not None:
            got = fin.detach()
            if got is not None:
                _, _, (key, destroy, handle, _dropped), _ = got
                _destroy(key, destroy, handle, False)


class Driver(Protocol):
    """The calls a binding provides for the shared handle classes (``h``: raw handles)."""

    name: str

    def event_record(self, event: Any, stream: Any) -> None: ...

    def event_query(self, event: Any) -> bool: ...  # True: complete; raises on an error

    def event_synchronize(self, event: Any) -> None: ...

    def event_ipc_handle(self, event: Any) -> bytes: ...

    def event_destroy(self, event: Any) -> None: ...

    def stream_wait(self, stream: Any, event: Any) -> None: ...

    def stream_query(self, stream: Any) -> bool: ...

    def stream_synchronize(self, stream: Any) -> None: ...

    def stream_destroy(self, stream: Any) -> None: ...

    def module_function(self, module: Any, name: str) -> Any: ...

    def module_unload(self, module: Any) -> None: ...


def status_code(err: Any) -> int | None:
    """A driver status as a number for :class:`RuntimeCallError` (None when it has none)."""
    try:
        return int(err)
    except (TypeError, ValueError):
        return None


class StatusDriver:
    """The :class:`Driver` table of a vendor API whose every call returns ``(status, *outputs)``.

    CUDA's driver API (cuda-bindings) and HIP (hip-python) are both of this
    kind, and the calls the handle classes need have the same names in both
    but for the vendor's prefix (``cuEventRecord``, ``hipEventRecord``), so the
    table is written once here; a binding gives its API module, prefix and
    status values, and how to name an error and read an IPC event handle.
    ``self(call, result)`` is the one checker of every call: a failing status
    raises :class:`RuntimeCallError` with the driver's error name and code; a
    passing one returns the outputs (None, one value, or a tuple).
    """

    name: str
    #: the vendor's prefix of every call name: "cu", "hip"
    prefix: str

    def __init__(self, api: Any, success: Any, not_ready: Any):
        self.api = api
        self.success = success
        self.not_ready = not_ready

    def __call__(self, call: str, result: Any) -> Any:
        if isinstance(result, tuple):
            err, rest = result[0], result[1:]
        else:
            err, rest = result, ()
        if err != self.success:
            raise self.error(call, err)
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    def error(self, call: str, err: Any) -> RuntimeCallError:
        return RuntimeCallError(self.name, call, self.error_name(err), status_code(err))

    def error_name(self, err: Any) -> str:
        return str(err)

    def ipc_bytes(self, handle: Any) -> bytes:
        """The 64 bytes of an interprocess event handle the API returned."""
        raise NotImplementedError

    def call(self, call: str, *args: Any, label: str | None = None) -> Any:
        """``prefix + call`` made and checked (``label``: the name an error gives instead)."""
        name = self.prefix + call
        return self(label or name, getattr(self.api, name)(*args))

    def _ready(self, call: str, *args: Any) -> bool:
        """A query: True when done, False when not ready, raises on an error."""
        name = self.prefix + call
        result = getattr(self.api, name)(*args)
        err = result[0] if isinstance(result, tuple) else result
        if err == self.success:
            return True
        if err == self.not_ready:
            return False
        raise self.error(name, err)

    # R5: a never-recorded event queries as complete on CUDA and HIP (Event.recorded guards it)
    def event_record(self, event: Any, stream: Any) -> None:
        self.call("EventRecord", event, stream)

    def event_query(self, event: Any) -> bool:
        return self._ready("EventQuery", event)

    def event_synchronize(self, event: Any) -> None:
        self.call("EventSynchronize", event)

    def event_ipc_handle(self, event: Any) -> bytes:
        return self.ipc_bytes(self.call("IpcGetEventHandle", event))

    def event_destroy(self, event: Any) -> None:
        self.call("EventDestroy", event)

    def stream_wait(self, stream: Any, event: Any) -> None:
        self.call("StreamWaitEvent", stream, event, 0)

    def stream_query(self, stream: Any) -> bool:
        # R9: without a query after enqueueing, the research note's last frame on
        # HIP came out wrong in 8 of 8 runs (the work sat unsubmitted).
        return self._ready("StreamQuery", stream)

    def stream_synchronize(self, stream: Any) -> None:
        self.call("StreamSynchronize", stream)

    def stream_destroy(self, stream: Any) -> None:
        self.call("StreamDestroy", stream)

    def module_function(self, module: Any, name: str) -> Any:
        return self.call("ModuleGetFunction", module, name.encode(),
                         label=f"{self.prefix}ModuleGetFunction({name})")

    def module_unload(self, module: Any) -> None:
        self.call("ModuleUnload", module)


class Event(Owned):
    """A device event.  ``recorded`` is False until :meth:`record` was enqueued (R5)."""

    kind = "event"

    def __init__(self, device: "Device", handle: Any, *, owned: bool = True, interprocess: bool = False,
                 recorded: bool = False):
        drv = device.driver
        super().__init__(drv.name, handle, device.scoped(drv.event_destroy) if owned else None)
        self._drv = drv
        self.interprocess = interprocess
        self.recorded = recorded

    def record(self, stream: "Stream") -> None:
        self._drv.event_record(self.handle, stream.handle)
        self.recorded = True

    def query(self) -> bool:
        return self._drv.event_query(self.handle)

    def synchronize(self) -> None:
        self._drv.event_synchronize(self.handle)

    def ipc_handle(self) -> bytes:
        return self._drv.event_ipc_handle(self.handle)


class Stream(Owned):
    kind = "stream"

    def __init__(self, device: "Device", handle: Any, *, owned: bool = True):
        drv = device.driver
        super().__init__(drv.name, handle, device.scoped(drv.stream_destroy) if owned else None)
        self._drv = drv

    def wait_event(self, event: Event) -> None:
        self._drv.stream_wait(self.handle, event.handle)

    def submit(self) -> None:
        """Make sure enqueued work is submitted to the device (R9: a stream query).

        The research note saw HIP's last frame come out wrong without it; on
        CUDA it is cheap, so the lane does it the same way on both."""
        self._drv.stream_query(self.handle)

    def synchronize(self) -> None:
        self._drv.stream_synchronize(self.handle)


class Module(Owned):
    """Loaded device code; its functions are borrowed from it (valid while it is open)."""

    kind = "module"

    def __init__(self, device: "Device", handle: Any):
        drv = device.driver
        super().__init__(drv.name, handle, device.scoped(drv.module_unload))
        self._drv = drv
        self._functions: dict[str, Any] = {}

    def function(self, name: str) -> Any:
        f = self._functions.get(name)
        if f is None:
            f = self._functions[name] = self._drv.module_function(self.handle, name)
        return f

    def close(self) -> None:
        self._functions.clear()
        super().close()


class ImportedMemory(Owned):
    """Device memory of another process, mapped into ours.  ``close()`` unmaps and frees it.

    ``free`` (from the binding) undoes every step of the import; the lane
    calls ``close()`` from the reaper only, behind the frames' release events (R4).
    """

    kind = "import"

    def __init__(self, device: "Device", ptr: int, size: int, free: Callable[[int], None]):
        super().__init__(device.driver.name, ptr, device.scoped(free))
        self.ptr = ptr
        self.size = size
        self.device = device.info.ordinal

    def close(self) -> None:
        super().close()
        self.ptr = 0


class HostRegistration(Owned):
    """Host memory page-locked for the device (``cuMemHostRegister``/``hipHostRegister``):
    uploads from it are DMA, asynchronous to the host.  ``close()`` unregisters it (once);
    it must close before the memory is unmapped, and only once no copy from it is pending
    (the lane closes it with the import, behind the release events of every frame that read it)."""

    kind = "host_register"

    def __init__(self, device: "Device", ptr: int, size: int, unregister: Callable[[int], None]):
        super().__init__(device.driver.name, ptr, device.scoped(unregister))
        self.ptr = ptr
        self.size = size


class Graph(Owned):
    """A stream's work captured once (:meth:`StatusDevice.begin_capture` ..
    :meth:`StatusDevice.end_capture`) and instantiated: ``launch(stream)`` enqueues all of it
    again in one call.  What the work read when captured is fixed: kernels' argument values,
    addresses, sizes; the memory at those addresses is read when the graph runs.  ``close()``
    destroys it; a launch still running completes (the driver frees it after)."""

    kind = "graph"

    def __init__(self, device: "Device", handle: Any, destroy: Callable[[Any], None],
                 launch: Callable[[Any, "Stream"], None]):
        super().__init__(device.driver.name, handle, destroy)
        self._launch = launch

    def launch(self, stream: "Stream") -> None:
        if self.handle is None:
            raise RuntimeError("launch of a closed graph")
        self._launch(self.handle, stream)


class Undo:
    """The completed steps of a multi-call import, undone in reverse when a later step fails.

    ``with Undo() as undo:`` then ``undo.push(what, fn, *args)`` after each step
    that succeeded.  If the block raises, every pushed step is undone, newest
    first, and the block's error propagates (an undo that fails too is logged:
    the first error is the one to report).  :meth:`drop` forgets a step that a
    later one made unnecessary.
    """

    def __init__(self) -> None:
        self._steps: list[tuple[str, Callable[..., Any], tuple]] = []

    def push(self, what: str, fn: Callable[..., Any], *args: Any) -> int:
        self._steps.append((what, fn, args))
        return len(self._steps) - 1

    def drop(self, step: int) -> None:
        what, _, _ = self._steps[step]
        self._steps[step] = (what, lambda *a: None, ())

    def __enter__(self) -> "Undo":
        return self

    def __exit__(self, typ, exc, tb) -> bool:
        if typ is not None:
            for what, fn, args in reversed(self._steps):
                try:
                    fn(*args)
                except Exception as e:
                    log.warning("undoing %s after a failed import failed too: %s", what, e)
        self._steps.clear()
        return False


# --------------------------------------------------------------------------- devices and runtimes


class StatusDevice:
    """The :class:`Device` calls that are one checked API call on CUDA and HIP alike.

    A binding's device sets ``driver`` (its :class:`StatusDriver`) and names,
    after the vendor prefix, the calls whose names differ between the two APIs
    (``cuMemAlloc`` / ``hipMalloc``); the rest (``MemcpyHtoDAsync``,
    ``ModuleLoadData``, ...) are spelled alike.
    """

    driver: StatusDriver
    ALLOC = "MemAlloc"
    FREE = "MemFree"
    ALLOC_ASYNC = "MemAllocAsync"
    FREE_ASYNC = "MemFreeAsync"
    HOST_ALLOC = "MemHostAlloc"
    HOST_FREE = "MemFreeHost"
    HOST_REGISTER = "MemHostRegister"
    HOST_UNREGISTER = "MemHostUnregister"
    LAUNCH = "LaunchKernel"
    #: the launch's last argument, "extra" (0 for the CUDA bindings, None for hip-python)
    LAUNCH_EXTRA: Any = 0
    #: whether this binding captures a stream's work into a :class:`Graph` (begin/end_capture),
    #: and the capture mode it asks for (thread-local: other threads' calls are not restricted)
    graphs = False
    CAPTURE_MODE: Any = None

    def elapsed_ms(self, start: Event, end: Event) -> float:
        return float(self.driver.call("EventElapsedTime", start.handle, end.handle))

    def alloc(self, nbytes: int) -> int:
        return int(self.driver.call(self.ALLOC, max(1, nbytes)))

    def free(self, ptr: int) -> None:
        if ptr:
            self.driver.call(self.FREE, ptr)

    def alloc_async(self, nbytes: int, stream: Stream) -> int:
        return int(self.driver.call(self.ALLOC_ASYNC, max(1, nbytes), stream.handle))

    def free_async(self, ptr: int, stream: Stream) -> None:
        if ptr:
            self.driver.call(self.FREE_ASYNC, ptr, stream.handle)

    def alloc_host(self, nbytes: int) -> np.ndarray:
        ptr = int(self.driver.call(self.HOST_ALLOC, max(1, nbytes), 0))
        return np.ctypeslib.as_array((ctypes.c_uint8 * max(1, nbytes)).from_address(ptr))

    def free_host(self, array: np.ndarray) -> None:
        self.driver.call(self.HOST_FREE, array.ctypes.data)

    def host_register_flags(self) -> Sequence[Any]:
        """The flags :meth:`host_register` tries, in order (the first the driver takes wins)."""
        return (0,)

    def host_register(self, array: np.ndarray) -> HostRegistration:
        """Page-lock the host memory under ``array`` (a mapping the daemon already holds).

        Raises :class:`RuntimeCallError` when the driver refuses every flag set (some
        mappings cannot be pinned); the caller then uploads from pageable memory."""
        ptr, size = int(array.ctypes.data), int(array.nbytes)
        call = self.driver.call
        refused: RuntimeCallError | None = None
        for flags in self.host_register_flags():
            try:
                call(self.HOST_REGISTER, ptr, size, flags)
            except RuntimeCallError as e:
                refused = refused or e
                continue
            return HostRegistration(self, ptr, size, lambda p: call(self.HOST_UNREGISTER, p))
        assert refused is not None
        raise refused

    def copy_htod_async(self, dst: int, src: np.ndarray, nbytes: int, stream: Stream) -> None:
        self.driver.call("MemcpyHtoDAsync", dst, src.ctypes.data, nbytes, stream.handle)

    def copy_dtoh_async(self, dst: np.ndarray, src: int, nbytes: int, stream: Stream) -> None:
        self.driver.call("MemcpyDtoHAsync", dst.ctypes.data, src, nbytes, stream.handle)

    def copy_dtod_async(self, dst: int, src: int, nbytes: int, stream: Stream) -> None:
        self.driver.call("MemcpyDtoDAsync", dst, src, nbytes, stream.handle)

    def memset_async(self, dst: int, value: int, nbytes: int, stream: Stream) -> None:
        self.driver.call("MemsetD8Async", dst, value, nbytes, stream.handle)

    def load_module(self, image: bytes) -> Module:
        buf = np.frombuffer(image, dtype=np.uint8).copy()
        return Module(self, self.driver.call("ModuleLoadData", buf.ctypes.data))

    def vmm_size(self, size: int) -> int:
        """The size to map for a VMM import of ``size`` bytes (CUDA rounds to its granularity)."""
        return size

    def vmm_handle_type(self) -> Any:
        """The API's handle type of a POSIX fd export."""
        raise NotImplementedError

    def vmm_read_access(self) -> Any:
        """The access argument of ``MemSetAccess``: this device may read."""
        raise NotImplementedError

    def import_vmm_fd(self, fd: int, size: int) -> ImportedMemory:
        """Map another process's VMM allocation (exported as a POSIX fd) read-only.

        The fd stays the caller's (the driver does not take it).  A mapping
        larger than the allocation fails in ``MemMap``.  Each step that
        succeeded is undone if a later one fails.
        """
        call, p = self.driver.call, self.driver.prefix
        size = self.vmm_size(size)
        with Undo() as undo:
            handle = call("MemImportFromShareableHandle", fd, self.vmm_handle_type())
            release = undo.push(p + "MemRelease", lambda: call("MemRelease", handle))
            ptr = int(call("MemAddressReserve", size, 0, 0, 0))
            undo.push(p + "MemAddressFree", lambda: call("MemAddressFree", ptr, size))
            call("MemMap", ptr, size, 0, handle, 0)
            undo.push(p + "MemUnmap", lambda: call("MemUnmap", ptr, size))
            call("MemSetAccess", ptr, size, self.vmm_read_access(), 1)
            # The mapping holds the allocation now; our handle is no longer needed.
            undo.drop(release)
            call("MemRelease", handle)

        def free(ptr: int) -> None:
            call("MemUnmap", ptr, size)
            call("MemAddressFree", ptr, size)

        return ImportedMemory(self, ptr, size, free)

    def begin_capture(self, stream: Stream) -> None:
        """From here until :meth:`end_capture`, the work enqueued on ``stream`` is recorded, not run."""
        self.driver.call("StreamBeginCapture", stream.handle, self.CAPTURE_MODE)

    def end_capture(self, stream: Stream, *, keep: bool = True) -> Graph | None:
        """End the capture on ``stream``: its work as an instantiated :class:`Graph` (``keep``), or
        dropped (``keep=False``: a capture abandoned, whatever its state; nothing raised)."""
        call = self.driver.call
        if not keep:
            try:
                graph = call("StreamEndCapture", stream.handle)
            except RuntimeCallError:
                return None
            if graph is not None:
                call("GraphDestroy", graph)
            return None
        graph = call("StreamEndCapture", stream.handle)
        try:
            exe = call("GraphInstantiate", graph, 0)
        finally:
            call("GraphDestroy", graph)  # the executable graph does not need it
        return Graph(self, exe, self.scoped(lambda h: call("GraphExecDestroy", h)),
                     lambda h, s: call("GraphLaunch", h, s.handle))

    def launch_packed(self, function: Any, grid: Sequence[int], block: Sequence[int], shared: int,
                      stream: Stream, args_address: int, types: Sequence = ()) -> None:
        """Launch with a ready array of argument pointers at ``args_address`` (see gpu/launch.py).

        ``types`` (the parameters' dtypes) is for bindings that need them; the driver does not."""
        gx, gy, gz = (list(grid) + [1, 1])[:3]
        bx, by, bz = (list(block) + [1, 1])[:3]
        self.driver.call(self.LAUNCH, function, gx, gy, gz, bx, by, bz, shared, stream.handle, args_address,
                         self.LAUNCH_EXTRA)


class Device(Protocol):
    info: DeviceInfo
    driver: Driver

    def scoped(self, fn: Callable[[Any], None]) -> Callable[[Any], None]:
        """``fn`` wrapped to run with this device current on any thread (the thread's own left as it was)."""

    def make_current(self) -> None: ...

    def create_stream(self) -> Stream: ...

    def create_event(self, *, interprocess: bool = False, blocking: bool = False) -> Event:
        """``blocking``: a synchronize on it sleeps (the driver's blocking sync) rather than spins."""

    def open_ipc_event(self, handle: bytes) -> Event: ...

    def alloc(self, nbytes: int) -> int: ...

    def free(self, ptr: int) -> None: ...

    def alloc_async(self, nbytes: int, stream: Stream) -> int: ...

    def free_async(self, ptr: int, stream: Stream) -> None: ...

    def alloc_host(self, nbytes: int): ...  # a numpy uint8 array in pinned memory

    def free_host(self, array) -> None: ...

    def host_register(self, array) -> HostRegistration:
        """Page-lock a host mapping for asynchronous uploads; raises RuntimeCallError if refused."""

    def copy_htod_async(self, dst: int, src, nbytes: int, stream: Stream) -> None: ...

    def copy_dtoh_async(self, dst, src: int, nbytes: int, stream: Stream) -> None: ...

    def copy_dtod_async(self, dst: int, src: int, nbytes: int, stream: Stream) -> None: ...

    def copy_2d_async(self, dst: int, dst_pitch: int, src: int, src_pitch: int,
                      width_bytes: int, rows: int, stream: Stream) -> None: ...

    def memset_async(self, dst: int, value: int, nbytes: int, stream: Stream) -> None: ...

    def load_module(self, image: bytes) -> Module: ...

    def launch_packed(self, function: Any, grid: Sequence[int], block: Sequence[int], shared: int,
                      stream: Stream, args_address: int, types: Sequence = ()) -> None: ...

    #: whether begin_capture/end_capture make graphs here (False: the engine launches directly)
    graphs: bool

    def begin_capture(self, stream: Stream) -> None: ...

    def end_capture(self, stream: Stream, *, keep: bool = True) -> Graph | None: ...

    def import_vmm_fd(self, fd: int, size: int) -> ImportedMemory: ...

    def import_ipc_memory(self, handle: bytes, size: int) -> ImportedMemory: ...

    def import_dmabuf(self, fd: int, size: int) -> ImportedMemory:
        """A dma-buf as device memory.  A declared ``size`` larger than the buffer raises
        :class:`LaneError` with ``field="size"``; a driver without the import raises
        :class:`RuntimeCallError` whose ``not_supported`` is True."""

    def close(self) -> None: ...


class OnePerProcess:
    """A binding's runtime object: made by the first :meth:`get` (under a lock), shared after.

    A failing ``make`` (RuntimeUnavailable) is raised to that caller and tried
    again by the next one."""

    def __init__(self, make: Callable[[], Any]):
        self._make = make
        self._lock = threading.Lock()
        self._value: Any = None

    def get(self) -> Any:
        with self._lock:
            if self._value is None:
                self._value = self._make()
            return self._value


class DeviceTable:
    """A runtime's :meth:`device`: each ordinal's device made once (``device_class(runtime,
    ordinal)``) and kept in ``self._devices``, which the runtime's ``__init__`` sets up."""

    device_class: Callable[[Any, int], Any]
    _devices: dict[int, Any]

    def device(self, ordinal: int) -> Any:
        dev = self._devices.get(ordinal)
        if dev is None:
            dev = self._devices[ordinal] = self.device_class(self, ordinal)
        return dev


class Runtime(Protocol):
    name: str
    #: buffer kinds imported as device memory ("cuda_vmm", "cuda_ipc"); memfd/dmabuf are the lane's
    device_import_kinds: tuple[str, ...]
    #: the fence kind of this runtime's interprocess events (None: it has none)
    ipc_event_kind: str | None
    #: the device reads host memory in place (the emulator): host mappings are its device memory
    device_reads_host: bool
    #: compiled binaries are worth the on-disk kernel cache (the emulator's are paths in a temp dir)
    caches_binaries: bool
    #: a launch's threads run in parallel: a table of millions of entries that one launch builds
    #: once a device costs milliseconds (the emulator runs them one by one: seconds)
    parallel_launches: bool
    #: the compiler's options for the kernels (after ``gpu/kernels.py``'s COMMON_OPTIONS)
    compile_options: tuple[str, ...]

    def device_count(self) -> int: ...

    def device(self, ordinal: int) -> Device: ...

    def compiler_version(self) -> str: ...

    def compile(self, source: str, name: str, arch: str, options: Sequence[str]) -> bytes: ...
