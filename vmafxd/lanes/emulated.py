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
addresses); streams are synchronous, so an event is complete once recorded.
A memfd buffer imports zero-copy by mapping it.  It is slow (a ctypes call
per block) and meant for small pictures.
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import RuntimeCallError
from .runtime import (
    CompileError, DeviceInfo, DeviceTable, Event, HostRegistration, ImportedMemory, Module, OnePerProcess,
    RuntimeUnavailable, Stream,
)

__all__ = ["EmulatedRuntime", "load"]

_runtime = OnePerProcess(lambda: EmulatedRuntime())
#: One launch at a time in the whole process: a kernel library is loaded once
#: (dlopen shares it), so its blockIdx globals and its __shared__ statics are
#: shared by every thread; two devices' workers must not interleave blocks.
_launch_lock = threading.Lock()


def load() -> "EmulatedRuntime":
    """The process's CPU emulator of the GPU runtime (made once)."""
    return _runtime.get()


_CTYPES = {
    np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.float32): ctypes.c_float,
}


#: VMAFXD_EMU_IPC_EVENTS=1 lets the emulator take ``cuda_ipc_event`` fences (tests of a bad
#: handle among good ones in one batch): a handle starting with this prefix is a good one.
EMU_IPC_EVENT_PREFIX = b"vmafx-emu-ipc-event\0"


def _emu_ipc_events() -> bool:
    return os.environ.get("VMAFXD_EMU_IPC_EVENTS") == "1"


class _Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class _EmuDriver:
    """The driver table of the shared handle classes: streams are synchronous, so every
    call is done when it returns; an event is complete, recorded or not (R5's trap, as
    on HIP and CUDA: a never-recorded event answers "done")."""

    name = "emu"

    def _nothing_to_do(self, *handles) -> None:
        pass

    def _done(self, handle) -> bool:
        return True

    event_record = event_synchronize = event_destroy = _nothing_to_do
    stream_wait = stream_synchronize = stream_destroy = _nothing_to_do
    event_query = stream_query = _done

    def event_ipc_handle(self, event) -> bytes:
        raise RuntimeUnavailable("emu", "the emulator has no interprocess events")

    def module_function(self, module, name: str) -> "EmuFunction":
        return EmuFunction(module, name)

    def module_unload(self, module) -> None:
        # a loaded library stays loaded (dlclose under ctypes is not safe); the handle goes
        pass


_DRIVER = _EmuDriver()


class EmuFunction:
    def __init__(self, lib, name: str):
        self.lib = lib
        self.name = name
        self.fn = getattr(lib, name)
        self.fn.restype = None
        self._types: tuple | None = None
        self.block = _Dim3.in_dll(lib, "vx_emu_blockIdx")
        self.grid = _Dim3.in_dll(lib, "vx_emu_gridDim")


def _unregister_nothing(ptr: int) -> None:
    pass


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

    def scoped(self, fn):
        return fn  # one host: nothing to make current

    def make_current(self) -> None:
        pass

    def create_stream(self) -> Stream:
        return Stream(self, 0)

    def create_event(self, *, interprocess: bool = False) -> Event:
        return Event(self, object(), interprocess=interprocess)

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
        return Event(self, object(), owned=True, interprocess=True, recorded=True)

    # memory: 256-byte aligned numpy buffers keyed by their address
    def free_memory(self) -> int:
        """The emulated device's size less what it has allocated (the lane's budget, as on a GPU)."""
        return self.info.total_memory - self.allocated_bytes

    def alloc(self, nbytes: int) -> int:
        raw = np.zeros(max(1, nbytes) + 256, dtype=np.uint8)
        ptr = (raw.ctypes.data + 255) // 256 * 256
        self._buffers[ptr] = raw
        self.allocated_bytes += raw.nbytes
        return ptr

    def free(self, ptr: int) -> None:
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

    def copy_htod_async(self, dst: int, src: np.ndarray, nbytes: int, stream) -> None:
        ctypes.memmove(dst, src.ctypes.data, nbytes)

    def copy_dtoh_async(self, dst: np.ndarray, src: int, nbytes: int, stream) -> None:
        ctypes.memmove(dst.ctypes.data, src, nbytes)

    def copy_dtod_async(self, dst: int, src: int, nbytes: int, stream) -> None:
        ctypes.memmove(dst, src, nbytes)

    def copy_2d_async(self, dst, dst_pitch, src, src_pitch, width_bytes, rows, stream) -> None:
        for r in range(rows):
            ctypes.memmove(dst + r * dst_pitch, src + r * src_pitch, width_bytes)

    def memset_async(self, dst: int, value: int, nbytes: int, stream) -> None:
        ctypes.memset(dst, value, nbytes)

    def load_module(self, image: bytes) -> Module:
        # the "image" is the path of the compiled shared library
        return Module(self, ctypes.CDLL(image.decode()))

    def launch_packed(self, function: EmuFunction, grid: Sequence[int], block: Sequence[int], shared: int,
                      stream, args_address: int, types: Sequence[np.dtype] = ()) -> None:
        if not types:
            raise ValueError("the emulator needs the argument types")
        if function._types != tuple(types):
            function.fn.argtypes = [_CTYPES[np.dtype(t)] for t in types]
            function._types = tuple(types)
        record = np.ctypeslib.as_array((ctypes.c_uint64 * len(types)).from_address(
            int(np.ctypeslib.as_array((ctypes.c_uint64 * len(types)).from_address(args_address))[0])))
        values = [record[i:i + 1].view(np.dtype(t))[0].item() for i, t in enumerate(types)]
        gx, gy, gz = (list(grid) + [1, 1])[:3]
        with _launch_lock:
            function.grid.x, function.grid.y, function.grid.z = gx, gy, gz
            blk = function.block
            fn = function.fn
            for z in range(gz):
                blk.z = z
                for y in range(gy):
                    blk.y = y
                    for x in range(gx):
                        blk.x = x
                        fn(*values)

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


class EmulatedRuntime(DeviceTable):
    device_class = EmuDevice
    name = "emu"
    device_import_kinds: tuple[str, ...] = ()
    ipc_event_kind = None
    #: its device memory is host memory: a checked host mapping is read in place
    device_reads_host = True
    #: its "binary" is a library path in its own temp directory: never cache it on disk
    caches_binaries = False
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
        self._libdir = Path(tempfile.mkdtemp(prefix="vmafxd-emu-"))

    def device_count(self) -> int:
        return self._count

    def device(self, ordinal: int) -> EmuDevice:
        if not 0 <= ordinal < self._count:
            raise RuntimeUnavailable("emu", f"no device {ordinal}")
        return super().device(ordinal)

    def compiler_version(self) -> str:
        out = subprocess.run([self._cxx, "--version"], capture_output=True, text=True).stdout.splitlines()
        return out[0] if out else self._cxx

    def compile(self, source: str, name: str, arch: str, options: Sequence[str]) -> bytes:
        """Build a shared library; the 'binary' returned (and cached) is its path."""
        digest = hashlib.sha256(source.encode() + "\0".join(options).encode()).hexdigest()[:20]
        lib = self._libdir / f"{Path(name).stem}-{digest}.so"
        if not lib.exists():
            src = self._libdir / f"{Path(name).stem}-{digest}.cpp"
            src.write_text(source)
            defines = [o for o in options if o.startswith("-D")]
            cmd = [self._cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-fno-strict-aliasing",
                   "-DVX_EMULATE=1", *defines, "-o", str(lib), str(src)]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                raise CompileError("emu", name, res.stderr)
        return str(lib).encode()

