"""A CPU emulation of the GPU runtime layer: the kernels' own source, run on the host.

What it is for: CI and this development machine have no GPU, yet the GPU
lane's kernels must equal the CPU twins bit for bit, and the lane's plumbing
(batches, release events, the reaper, imports) must be exercised.  This
binding compiles each kernel source with the host C++ compiler (``-DVX_EMULATE``,
see the prelude) into a shared library and runs every block of a launch with
**one thread**, blocks one after another.  With one thread per block the
phases a block separates with ``__syncthreads()`` run in order, so the
arithmetic, indexing and mirroring are the device's exactly; what it cannot
show is a race between threads or a wrong barrier — the runs on a real GPU
(docs/gpu-runs.md) decide those.

"Device memory" is host memory (numpy buffers; pointers are their
addresses); streams run their work synchronously, so an event is complete
once recorded -- unless the device has an *event lag*
(``VMAFXD_EMU_EVENT_LAG_MS``, or ``EmuDevice.event_lag`` in seconds): then a
recorded event completes only that long after its record (and not before the
points recorded before it on its stream), as a GPU's would while its stream
still runs, and a synchronize sleeps until then (the GIL let go, as a driver
call does).  Tests use it to show that the lane notices completions without
being handed new work.  A memfd buffer imports zero-copy by mapping it.

A launch is one host call: the build appends, per kernel, an ``extern "C"``
``vx_launch_<kernel>(gx, gy, gz, args)`` (the prelude's ``VX_EMU_LAUNCHER``)
that runs the grid's blocks in a C loop, reading the arguments from the
launcher's packed record as the driver does.  ``blockIdx`` and the
``__shared__`` arrays are ``thread_local``, so host threads launch at once
(no process-wide lock; ctypes lets go of the GIL during the call).  Built
with ``-O3`` but ``-ffp-contract=off`` and no ``-ffast-math``: the float
kernels' operations stay the written IEEE ones, in the written order.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from functools import partial
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import RuntimeCallError
from .runtime import (
    CompileError, DeviceInfo, DeviceTable, Event, Graph, HostRegistration, ImportedMemory, Module, OnePerProcess,
    RuntimeUnavailable, Stream,
)

__all__ = ["EmulatedRuntime", "load"]

_runtime = OnePerProcess(lambda: EmulatedRuntime())

#: The host compiler's flags.  Exactness: no contraction into FMA (the device
#: builds say --fmad=false), no -ffast-math (no reassociation), no aliasing
#: games.  They are part of a library's digest, so a change of flags rebuilds.
BUILD_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-fno-strict-aliasing",
               "-DVX_EMULATE=1")

#: a kernel as the preprocessor leaves it: ``VX_KERNEL`` is ``extern "C" __global__``
_KERNEL_DECL = re.compile(r'extern\s+"C"\s+void\s+([A-Za-z_]\w*)\s*\(')


def load() -> "EmulatedRuntime":
    """The process's CPU emulator of the GPU runtime (made once)."""
    return _runtime.get()


#: VMAFXD_EMU_IPC_EVENTS=1 lets the emulator take ``cuda_ipc_event`` fences (tests of a bad
#: handle among good ones in one batch): a handle starting with this prefix is a good one.
EMU_IPC_EVENT_PREFIX = b"vmafx-emu-ipc-event\0"


def _emu_ipc_events() -> bool:
    return os.environ.get("VMAFXD_EMU_IPC_EVENTS") == "1"


def _emu_event_lag() -> float:
    """``VMAFXD_EMU_EVENT_LAG_MS``: how long after its record an emulated event completes
    (tests of completion wake-ups; a lane worker process inherits it), in seconds; 0 unset."""
    try:
        return max(0.0, float(os.environ.get("VMAFXD_EMU_EVENT_LAG_MS", "0")) / 1000)
    except ValueError:
        return 0.0


class _EmuEvent:
    """An emulated event: complete once the monotonic clock has reached ``at`` (0.0: never
    recorded, or recorded on a device without lag -- complete at once).  ``capture``: the
    capture it was recorded in (a stream that waits on it joins that capture, as on CUDA)."""

    __slots__ = ("at", "capture")

    def __init__(self):
        self.at = 0.0
        self.capture = None


class _Capture(list):
    """A capture's calls, in the order they were enqueued on any of its ``streams`` (the one
    it began on and those that joined it by waiting on an event recorded in it).  ``invalid``:
    why it can no longer make a graph (an unsafe call on its thread, as CUDA's thread-local
    capture mode has it), or None."""

    __slots__ = ("streams", "invalid")

    def __init__(self, stream: "_EmuStream"):
        super().__init__()
        self.streams = [stream]
        self.invalid: str | None = None


#: the captures begun on this thread and not ended (what an unsafe call here invalidates)
_capturing_here = threading.local()


def _unsafe_in_capture(call: str) -> None:
    """A call that frees or unloads, on a thread that captures: it fails, and the capture is
    invalidated (CUDA: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, then _INVALIDATED at its end)."""
    captures = getattr(_capturing_here, "captures", None)
    if captures:
        for capture in captures:
            capture.invalid = f"{call} was called on its thread"
        raise RuntimeCallError("emu", call, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", 900,
                               "not allowed while this thread captures a stream")


class _EmuStream:
    """An emulated stream: its work runs when enqueued; ``busy_until`` is when its last recorded
    point completes (the device's event lag after its record, never before an earlier one)."""

    __slots__ = ("device", "busy_until", "capture")

    def __init__(self, device: "EmuDevice"):
        self.device = device
        self.busy_until = 0.0
        #: while a capture is on (EmuDevice.begin_capture): the work enqueued, as calls to make
        self.capture: list | None = None

    def point(self) -> float:
        """The completion time of a point recorded now (0.0 without lag: complete)."""
        lag = self.device.event_lag
        if lag <= 0:
            return self.busy_until  # 0.0 unless a lag was set earlier and has not passed
        self.busy_until = max(self.busy_until, time.monotonic() + lag)
        return self.busy_until


def _sleep_until(at: float) -> None:
    wait = at - time.monotonic()
    if wait > 0:
        time.sleep(wait)


class _EmuDriver:
    """The driver table of the shared handle classes: streams run their work when it is
    enqueued, so every call is done when it returns; an event is complete, recorded or not
    (R5's trap, as on HIP and CUDA: a never-recorded event answers "done"), but for the
    device's event lag (:class:`_EmuStream`)."""

    name = "emu"

    def _nothing_to_do(self, *handles) -> None:
        pass

    event_destroy = stream_destroy = _nothing_to_do

    def event_record(self, event: _EmuEvent, stream: _EmuStream) -> None:
        event.at = stream.point()
        event.capture = stream.capture

    def event_query(self, event: _EmuEvent | None) -> bool:
        return event is None or event.at <= 0 or event.at <= time.monotonic()

    def event_synchronize(self, event: _EmuEvent | None) -> None:
        if event is not None and event.at > 0:
            _sleep_until(event.at)

    def stream_wait(self, stream: _EmuStream, event: _EmuEvent) -> None:
        if event is None:
            return
        # the stream's later points complete after the awaited one
        if event.at > stream.busy_until:
            stream.busy_until = event.at
        # a fork: waiting on a point of a capture brings the stream into it (its later work is
        # recorded into the same graph, in program order: the emulator runs it in that order)
        capture = event.capture
        if capture is not None and stream.capture is None and capture.streams:
            stream.capture = capture
            capture.streams.append(stream)

    def stream_query(self, stream: _EmuStream) -> bool:
        return stream.busy_until <= 0 or stream.busy_until <= time.monotonic()

    def stream_synchronize(self, stream: _EmuStream) -> None:
        if stream.busy_until > 0:
            _sleep_until(stream.busy_until)

    def event_ipc_handle(self, event) -> bytes:
        raise RuntimeUnavailable("emu", "the emulator has no interprocess events")

    def module_function(self, module, name: str) -> "EmuFunction":
        return EmuFunction(module, name)

    def module_unload(self, module) -> None:
        # a loaded library stays loaded (dlclose under ctypes is not safe); the handle goes
        _unsafe_in_capture("cuModuleUnload")


_DRIVER = _EmuDriver()


class EmuFunction:
    """A kernel's launch entry: ``vx_launch_<name>(gx, gy, gz, args)``, the whole grid in one call."""

    def __init__(self, lib, name: str):
        self.lib = lib
        self.name = name
        self.launch = getattr(lib, f"vx_launch_{name}")
        self.launch.restype = None
        self.launch.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]


def _unregister_nothing(ptr: int) -> None:
    pass


def _destroy_graph(ops: tuple) -> None:
    pass  # the recorded calls go with the handle


def _replay(ops: tuple, stream) -> None:
    """A captured graph's launch: its work, in the order it was enqueued (run at once, as all
    of the emulator's stream work)."""
    for op in ops:
        op()


def _snapshot_args(args_address: int, count: int):
    """A launch's ``count`` argument values copied out of its packed record (CUDA copies them
    into the graph's node at capture), and a pointer array to the copy, kept together."""
    pointers = (ctypes.c_uint64 * count).from_address(args_address)
    record = np.array([ctypes.c_uint64.from_address(p).value for p in pointers], dtype=np.uint64)
    array = np.array([record.ctypes.data + 8 * i for i in range(count)], dtype=np.uint64)
    return record, array


class EmuDevice:
    def __init__(self, runtime: "EmulatedRuntime", ordinal: int = 0):
        self._rt = runtime
        self.info = DeviceInfo(ordinal, "vmafxd CPU emulator", f"0000:00:{ordinal:02x}.0", "emu",
                               os.cpu_count() or 1, 1 << 34)
        self._buffers: dict[int, np.ndarray] = {}
        self.allocated_bytes = 0
        #: the stream-ordered pool, as CUDA's with the lanes' release threshold (cuda.py): blocks
        #: freed with free_async stay allocated, for reuse, until trim_pool
        self._pool_sizes: dict[int, int] = {}  # every pool block: ptr -> size
        self._pool_free: list[tuple[int, int]] = []  # (size, ptr) of the unused ones
        self._pool_lock = threading.Lock()
        #: pinned host blocks handed out and not freed (address -> array)
        self._host: dict[int, np.ndarray] = {}
        self.driver = _DRIVER
        #: seconds after its record that an event completes (see the module's docstring)
        self.event_lag = _emu_event_lag()

    def scoped(self, fn):
        return fn  # one host: nothing to make current

    def make_current(self) -> None:
        pass

    def create_stream(self) -> Stream:
        return Stream(self, _EmuStream(self))

    def create_event(self, *, interprocess: bool = False, blocking: bool = False) -> Event:
        # ``blocking``: a synchronize sleeps here whatever it is asked
        return Event(self, _EmuEvent(), interprocess=interprocess)

    def open_ipc_event(self, handle: bytes):
        if not _emu_ipc_events():
            raise RuntimeUnavailable("emu", "the emulator has no interprocess events")
        # Test hook (VMAFXD_EMU_IPC_EVENTS=1): a handle the emulator "issued" opens to an
        # event that is already complete; any other bytes are refused as CUDA refuses a
        # garbage handle (cuIpcOpenEventHandle: CUDA_ERROR_MAP_FAILED).
        if not (isinstance(handle, (bytes, bytearray)) and len(handle) == 64
                and bytes(handle).startswith(EMU_IPC_EVENT_PREFIX)):
            raise RuntimeCallError("emu", "cuIpcOpenEventHandle", "CUDA_ERROR_MAP_FAILED", 205,
                                   "not an event handle this emulator issued")
        return Event(self, _EmuEvent(), owned=True, interprocess=True, recorded=True)

    # memory: 256-byte aligned numpy buffers keyed by their address
    def free_memory(self) -> int:
        """The emulated device's size less what it has allocated (the lane's budget, as on a GPU)."""
        return self.info.total_memory - self.allocated_bytes

    def alloc(self, nbytes: int) -> int:
        raw = np.zeros(max(1, nbytes) + 256, dtype=np.uint8)
        ptr = (raw.ctypes.data + 255) // 256 * 256
        with self._pool_lock:  # several host threads allocate at once (the CPU lane's workers)
            self._buffers[ptr] = raw
            self.allocated_bytes += raw.nbytes
        return ptr

    def free(self, ptr: int) -> None:
        _unsafe_in_capture("cuMemFree")
        with self._pool_lock:  # a pool block freed at once (cuMemFree takes those too)
            if self._pool_sizes.pop(ptr, None) is not None:
                self._pool_free = [b for b in self._pool_free if b[1] != ptr]
            raw = self._buffers.pop(ptr, None)
            if raw is not None:
                self.allocated_bytes -= raw.nbytes

    def alloc_async(self, nbytes: int, stream) -> int:
        """From the pool: the smallest unused block that fits, else a new one (kept by the pool)."""
        need = max(1, nbytes)
        with self._pool_lock:
            fits = [i for i, (size, _) in enumerate(self._pool_free) if size >= need]
            if fits:
                return self._pool_free.pop(min(fits, key=lambda i: self._pool_free[i][0]))[1]
        ptr = self.alloc(need)
        with self._pool_lock:
            self._pool_sizes[ptr] = need
        return ptr

    def free_async(self, ptr: int, stream) -> None:
        with self._pool_lock:
            size = self._pool_sizes.get(ptr)
            if size is not None:
                self._pool_free.append((size, ptr))
                return
        self.free(ptr)

    def trim_pool(self) -> None:
        """Free the pool's unused blocks (cuMemPoolTrimTo 0)."""
        with self._pool_lock:
            unused, self._pool_free = self._pool_free, []
            for _, ptr in unused:
                del self._pool_sizes[ptr]
        for _, ptr in unused:
            self.free(ptr)

    def live_allocations(self) -> int:
        """Device blocks (plain and pooled, used or not) and pinned host blocks not freed."""
        return len(self._buffers) + len(self._host)

    def alloc_host(self, nbytes: int) -> np.ndarray:
        array = np.zeros(max(1, nbytes), dtype=np.uint8)
        self._host[array.ctypes.data] = array
        return array

    def free_host(self, array) -> None:
        self._host.pop(array.ctypes.data, None)

    def host_register(self, array: np.ndarray) -> HostRegistration:
        """Nothing to page-lock (device memory is host memory, copies are done on return),
        but an owned handle all the same, so the lane's bookkeeping -- unregistered once,
        before the mapping goes -- is counted here as on a GPU."""
        return HostRegistration(self, int(array.ctypes.data), int(array.nbytes), _unregister_nothing)

    # stream work runs when enqueued, or, while the stream captures, is recorded for the graph
    @staticmethod
    def _work(stream, op) -> None:
        capture = stream.handle.capture
        if capture is None:
            op()
        else:
            capture.append(op)

    def copy_htod_async(self, dst: int, src: np.ndarray, nbytes: int, stream) -> None:
        self._work(stream, partial(ctypes.memmove, dst, src.ctypes.data, nbytes))

    def copy_dtoh_async(self, dst: np.ndarray, src: int, nbytes: int, stream) -> None:
        self._work(stream, partial(ctypes.memmove, dst.ctypes.data, src, nbytes))

    def copy_dtod_async(self, dst: int, src: int, nbytes: int, stream) -> None:
        self._work(stream, partial(ctypes.memmove, dst, src, nbytes))

    def copy_2d_async(self, dst, dst_pitch, src, src_pitch, width_bytes, rows, stream) -> None:
        def rows_copy() -> None:
            for r in range(rows):
                ctypes.memmove(dst + r * dst_pitch, src + r * src_pitch, width_bytes)

        self._work(stream, rows_copy)

    def memset_async(self, dst: int, value: int, nbytes: int, stream) -> None:
        self._work(stream, partial(ctypes.memset, dst, value, nbytes))

    # graphs: the calls recorded while the stream captures, replayed by each launch
    graphs = True

    def begin_capture(self, stream) -> None:
        h = stream.handle
        if h.capture is not None:
            raise RuntimeCallError("emu", "cuStreamBeginCapture", "CUDA_ERROR_ILLEGAL_STATE", 401,
                                   "the stream is already capturing")
        h.capture = _Capture(h)
        if not hasattr(_capturing_here, "captures"):
            _capturing_here.captures = []
        _capturing_here.captures.append(h.capture)

    def end_capture(self, stream, *, keep: bool = True):
        h = stream.handle
        ops, h.capture = h.capture, None
        if ops is not None:  # the capture ends for the streams that joined it too
            for joined in ops.streams:
                joined.capture = None
            ops.streams = []
            mine = getattr(_capturing_here, "captures", [])
            mine[:] = [c for c in mine if c is not ops]
        if not keep:
            return None
        if ops is None:
            raise RuntimeCallError("emu", "cuStreamEndCapture", "CUDA_ERROR_ILLEGAL_STATE", 401,
                                   "the stream is not capturing")
        if ops.invalid is not None:
            raise RuntimeCallError("emu", "cuStreamEndCapture", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", 901,
                                   f"the capture was invalidated: {ops.invalid}")
        return Graph(self, tuple(ops), _destroy_graph, _replay)

    def load_module(self, image: bytes) -> Module:
        # the "image" is the path of the compiled shared library
        return Module(self, ctypes.CDLL(image.decode()))

    def launch_packed(self, function: EmuFunction, grid: Sequence[int], block: Sequence[int], shared: int,
                      stream, args_address: int, types: Sequence[np.dtype] = ()) -> None:
        # the kernel reads its arguments by its own signature from the packed record (as the
        # driver does), so ``types`` is not needed here
        gx, gy, gz = (list(grid) + [1, 1])[:3]
        if stream is None or stream.handle.capture is None:
            function.launch(gx, gy, gz, args_address)
            return
        if not types:
            raise RuntimeCallError("emu", "cuLaunchKernel", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", 900,
                                   "a captured launch needs its parameters' types")
        record, array = _snapshot_args(args_address, len(types))

        def launch(_values=record) -> None:  # the values the pointers point at live with the launch
            function.launch(gx, gy, gz, array.ctypes.data)

        stream.handle.capture.append(launch)

    def import_vmm_fd(self, fd: int, size: int):
        raise RuntimeUnavailable("emu", "the emulator imports memfds, not CUDA VMM fds")

    def import_ipc_memory(self, handle: bytes, size: int):
        raise RuntimeUnavailable("emu", "the emulator has no IPC memory handles")

    def import_dmabuf(self, fd: int, size: int) -> ImportedMemory:
        return self.import_memfd(fd, size)

    def import_memfd(self, fd: int, size: int) -> ImportedMemory:
        """A memfd (or any mappable fd) mapped read-only: emulated device memory of another process."""
        mapping = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        held = [np.frombuffer(mapping, dtype=np.uint8)]
        ptr = held[0].ctypes.data

        def free(_ptr: int) -> None:
            held.clear()  # the array's export of the mapping goes first, or close() refuses
            try:
                mapping.close()
            except BufferError:
                pass  # someone still holds a view: the mapping goes with it

        return ImportedMemory(self, ptr, size, free)

    def close(self) -> None:
        self._buffers.clear()
        self._pool_sizes.clear()
        self._pool_free = []
        self._host.clear()


def _compiler() -> str | None:
    for cc in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if cc and shutil.which(cc):
            return cc
    return None


_versions: dict[str, str] = {}


def host_compiler_version(cxx: str) -> str:
    """The first line of ``cxx --version`` (asked once a process): part of a build's cache key."""
    found = _versions.get(cxx)
    if found is None:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()
        found = _versions[cxx] = out[0] if out else cxx
    return found


_libdirs: dict[str, Path] = {}


def library_dir(kind: str) -> Path:
    """``kind/`` in the kernel cache (kernels.cache_dir: a restart loads, not builds), else a
    temporary directory of this process when the cache cannot be written."""
    found = _libdirs.get(kind)
    if found is None:
        from .gpu.kernels import cache_dir

        root = cache_dir()
        if root is not None:
            try:
                (root / kind).mkdir(parents=True, exist_ok=True)
                if os.access(root / kind, os.W_OK | os.X_OK):
                    found = root / kind
            except OSError:
                pass
        if found is None:
            found = Path(tempfile.mkdtemp(prefix=f"vmafxd-{kind}-"))
        _libdirs[kind] = found
    return found


#: the compilers running for build_library (a process group each), how many build_library calls
#: have not returned (their temporaries not yet removed), and the build scopes whose builds are
#: refused; a thread's current scope (:func:`build_scope`)
_builds: set[subprocess.Popen] = set()
_building = 0
_refused: set[object] = set()
_builds_changed = threading.Condition()
_scope = threading.local()


def stop_builds(wait: float = 0.0, refuse: object | None = None) -> int:
    """Kill every compiler build_library runs in this process now (the whole group of each);
    their builds raise CompileError within 0.2 s and leave no file (the builder of a kernel falls
    back as for any failed build).  For a session open that was cancelled, or a lane that stops,
    while a first build runs: all of them, since a build may wait for another's (a library's lock).
    ``refuse``: a :func:`build_scope` token whose later builds fail at once (a cancelled open's
    thread goes on to its other kernels).  ``wait``: at most so many seconds for every build to
    have returned (its temporary folder removed: a process about to exit).  Returns how many were
    killed."""
    with _builds_changed:
        if refuse is not None:
            _refused.add(refuse)
        running = list(_builds)
    for proc in running:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            pass  # finished meanwhile
    if wait > 0:
        with _builds_changed:
            _builds_changed.wait_for(lambda: _building == 0, timeout=wait)
    return len(running)


@contextlib.contextmanager
def build_scope(token: object):
    """The builds this thread runs inside are ``token``'s: :func:`stop_builds` can refuse them."""
    _scope.token = token
    try:
        yield
    finally:
        _scope.token = None
        with _builds_changed:
            _refused.discard(token)


def build_library(cxx: str, source: str, flags: Sequence[str], lib: Path, name: str) -> None:
    """Build ``source`` into the shared library ``lib`` (raises CompileError).  Each caller writes
    its own temporary files and the library appears whole or not at all, so two threads or
    processes building the same source read no half file.  The compiler runs in a session of
    its own with its temporary files in a folder of this build: an interrupt (Ctrl-C reaches
    this process, not the compiler) stops the whole compiler (driver, cc1plus, as) and leaves
    no file behind."""
    global _building
    with _builds_changed:
        if getattr(_scope, "token", None) in _refused:
            raise CompileError("emu", name, "the build was stopped (the session open was cancelled)")
        _building += 1
    try:
        _build_library(cxx, source, flags, lib, name)
    finally:
        with _builds_changed:
            _building -= 1
            _builds_changed.notify_all()


def _build_library(cxx: str, source: str, flags: Sequence[str], lib: Path, name: str) -> None:
    work = Path(tempfile.mkdtemp(prefix=f".{lib.stem}.", dir=lib.parent))
    src, tmp = work / "source.cpp", work / "library.so"
    try:
        src.write_text(source)
        proc = subprocess.Popen([cxx, *flags, "-o", str(tmp), str(src)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                env={**os.environ, "TMPDIR": str(work)})
        with _builds_changed:
            _builds.add(proc)
        try:
            while True:  # in short waits: a signal another thread took is acted on within 0.2 s
                try:
                    _, err = proc.communicate(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    continue
        except BaseException:
            try:
                os.killpg(proc.pid, 9)
            except OSError:
                pass
            proc.wait()
            raise
        finally:
            with _builds_changed:
                _builds.discard(proc)
        if proc.returncode != 0:
            raise CompileError("emu", name, err)
        os.replace(tmp, lib)  # whole or absent: a concurrent build of the same source reads no half file
    finally:
        shutil.rmtree(work, ignore_errors=True)


class EmulatedRuntime(DeviceTable):
    device_class = EmuDevice
    name = "emu"
    device_import_kinds: tuple[str, ...] = ()
    ipc_event_kind = None
    #: its device memory is host memory: a checked host mapping is read in place
    device_reads_host = True
    #: its "binary" is a library path (in the kernel cache's ``emu/``, see :meth:`compile`): the
    #: engine's cache of binaries is not for it
    caches_binaries = False
    #: a launch's blocks run one after another, each with one thread
    parallel_launches = False
    compile_options: tuple[str, ...] = ()

    def __init__(self):
        self._cxx = _compiler()
        if self._cxx is None:
            raise RuntimeUnavailable("emu", "no host C++ compiler (g++) to build the kernels for emulation")
        # VMAFXD_EMU_DEVICES=N pretends to have N devices (multi-device placement tests)
        try:
            self._count = max(1, int(os.environ.get("VMAFXD_EMU_DEVICES", "1")))
        except ValueError:
            self._count = 1
        self._devices: dict[int, EmuDevice] = {}
        if _emu_ipc_events():
            self.ipc_event_kind = "cuda_ipc_event"

    def device_count(self) -> int:
        return self._count

    def device(self, ordinal: int) -> EmuDevice:
        if not 0 <= ordinal < self._count:
            raise RuntimeUnavailable("emu", f"no device {ordinal}")
        return super().device(ordinal)

    def compiler_version(self) -> str:
        return host_compiler_version(self._cxx)

    def compile(self, source: str, name: str, arch: str, options: Sequence[str]) -> bytes:
        """Build a shared library; the 'binary' returned is its path.

        Its name holds the kernel cache's key (kernels.cache_key: the SHA-256 of the source,
        the target, the compiler's version and every build flag), so a change of any of
        them builds a new library.  The source is
        preprocessed first to find its kernels (a macro may make some), and one
        ``VX_EMU_LAUNCHER`` per kernel is appended before the build."""
        from .gpu.kernels import cache_key

        defines = [o for o in options if o.startswith("-D")]
        flags = [*BUILD_FLAGS, *defines]
        digest = cache_key(source, arch, self.compiler_version(), flags)[:20]
        lib = library_dir("emu") / f"{Path(name).stem}-{digest}.so"
        if not lib.exists():
            # the preprocessor reads the source from its standard input: no file to share
            pre = subprocess.run([self._cxx, "-E", "-P", "-x", "c++", "-std=c++17", "-DVX_EMULATE=1", *defines, "-"],
                                 input=source, capture_output=True, text=True)
            if pre.returncode != 0:
                raise CompileError("emu", name, pre.stderr)
            kernels = sorted(set(_KERNEL_DECL.findall(pre.stdout)))
            build_library(self._cxx, source + "\n" + "".join(f"VX_EMU_LAUNCHER({k})\n" for k in kernels), flags, lib,
                          name)
        return str(lib).encode()
