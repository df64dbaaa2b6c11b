"""Producer side on NVIDIA: frame buffers in CUDA VMM memory, exported as POSIX fds.

A producer (encoder, decoder, test rig) allocates its frames here, fills them
from numpy or on the GPU, and hands the daemon the VMM fd — the zero-copy
path between processes on NVIDIA (dma-buf import into CUDA is not supported
there; ../shared/docs/PLATFORM.md).  The acquire fence is an interprocess
CUDA event recorded on the producer's stream after its writes; the daemon
waits on it on its library stream.

Needs the ``cuda`` extra (cuda-bindings).  The daemon's CUDA binding is in
``vmafxd/lanes/cuda.py``; this module is the client's own, deliberately
small, copy of the few calls a producer makes.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .formats import PixelFormat, parse_pixel_format, storage_planes
from .transport import OwnedFd

__all__ = ["CudaProducer", "VmmFrameBuffer", "CudaUnavailable"]


class CudaUnavailable(RuntimeError):
    pass


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise CudaUnavailable(f"cuda-bindings is not installed ({e}); install vmafxd[cuda]") from None
    try:
        err = driver.cuInit(0)
    except Exception as e:
        raise CudaUnavailable(f"no CUDA driver ({type(e).__name__}: {e})") from None
    err = err[0] if isinstance(err, tuple) else err
    if err != driver.CUresult.CUDA_SUCCESS:
        raise CudaUnavailable(f"cuInit failed ({err})")
    return driver


def _ck(d, call, res):
    err, rest = (res[0], res[1:]) if isinstance(res, tuple) else (res, ())
    if err != d.CUresult.CUDA_SUCCESS:
        name = d.cuGetErrorName(err)[1]
        raise RuntimeError(f"cuda: {call} failed with {name.decode() if isinstance(name, bytes) else name}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


class CudaProducer:
    """A producer's CUDA context and stream on one device."""

    def __init__(self, device: int = 0):
        self.d = d = _driver()
        self.device = device
        self._dev = _ck(d, "cuDeviceGet", d.cuDeviceGet(device))
        self._ctx = _ck(d, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(self._dev))
        _ck(d, "cuCtxSetCurrent", d.cuCtxSetCurrent(self._ctx))
        self.stream = _ck(d, "cuStreamCreate", d.cuStreamCreate(d.CUstream_flags.CU_STREAM_NON_BLOCKING))
        prop = self._prop()
        self.granularity = int(_ck(d, "cuMemGetAllocationGranularity", d.cuMemGetAllocationGranularity(
            prop, d.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM)))

    def _prop(self):
        d = self.d
        prop = d.CUmemAllocationProp()
        prop.type = d.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = self.device
        prop.requestedHandleTypes = d.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        return prop

    def make_current(self) -> None:
        _ck(self.d, "cuCtxSetCurrent", self.d.cuCtxSetCurrent(self._ctx))

    def synchronize(self) -> None:
        _ck(self.d, "cuStreamSynchronize", self.d.cuStreamSynchronize(self.stream))

    def interprocess_event(self) -> "IpcEvent":
        d = self.d
        flags = d.CUevent_flags.CU_EVENT_DISABLE_TIMING | d.CUevent_flags.CU_EVENT_INTERPROCESS
        return IpcEvent(self, _ck(d, "cuEventCreate", d.cuEventCreate(flags)))

    def close(self) -> None:
        d = self.d
        if self.stream is not None:
            d.cuStreamDestroy(self.stream)
            self.stream = None
            d.cuDevicePrimaryCtxRelease(self._dev)


class IpcEvent:
    """An interprocess event: record after the writes, send its handle as the acquire fence."""

    def __init__(self, producer: CudaProducer, handle):
        self._p = producer
        self.handle = handle
        h = _ck(producer.d, "cuIpcGetEventHandle", producer.d.cuIpcGetEventHandle(handle))
        self.ipc_handle = ctypes.string_at(h.getPtr(), 64)

    def record(self, stream=None) -> bytes:
        _ck(self._p.d, "cuEventRecord", self._p.d.cuEventRecord(self.handle, stream or self._p.stream))
        return self.ipc_handle

    def close(self) -> None:
        h, self.handle = self.handle, None
        if h is not None:
            self._p.d.cuEventDestroy(h)


@dataclass(frozen=True)
class PlaneSpec:
    offset: int
    pitch: int
    width_bytes: int
    rows: int


class VmmFrameBuffer:
    """One frame in VMM device memory, exportable as a POSIX fd.

    Planes are laid out one after another with row pitches aligned to
    ``pitch_align`` bytes (a plane offset can be any multiple of it); the
    allocation is rounded up to the device's VMM granularity.
    """

    def __init__(self, producer: CudaProducer, width: int, height: int, pixel_format: str | PixelFormat,
                 bitdepth: int = 8, pitch_align: int = 256, extra_offset: int = 0):
        d = producer.d
        self.producer = producer
        self.width, self.height = width, height
        self.pixel_format = pixel_format if isinstance(pixel_format, PixelFormat) else parse_pixel_format(pixel_format)
        self.bitdepth = self.pixel_format.fixed_bitdepth() or bitdepth
        self.planes: list[PlaneSpec] = []
        off = extra_offset
        for s in storage_planes(self.pixel_format, width, height, self.bitdepth):
            pitch = (s.row_bytes + pitch_align - 1) // pitch_align * pitch_align
            self.planes.append(PlaneSpec(off, pitch, s.row_bytes, s.height))
            off += pitch * s.height
            off = (off + pitch_align - 1) // pitch_align * pitch_align
        g = producer.granularity
        self.size = (off + g - 1) // g * g
        producer.make_current()
        self._handle = _ck(d, "cuMemCreate", d.cuMemCreate(self.size, producer._prop(), 0))
        self.ptr = int(_ck(d, "cuMemAddressReserve", d.cuMemAddressReserve(self.size, 0, 0, 0)))
        _ck(d, "cuMemMap", d.cuMemMap(self.ptr, self.size, 0, self._handle, 0))
        desc = d.CUmemAccessDesc()
        desc.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        desc.location.id = producer.device
        desc.flags = d.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        _ck(d, "cuMemSetAccess", d.cuMemSetAccess(self.ptr, self.size, [desc], 1))
        fd = _ck(d, "cuMemExportToShareableHandle", d.cuMemExportToShareableHandle(
            self._handle, d.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0))
        self.fd = OwnedFd(int(fd))

    def write(self, planes: Sequence[np.ndarray], stream=None) -> None:
        """Upload stored planes (as vmafx.io.video yields them) with 2-D copies on the producer's stream."""
        d = self.producer.d
        if len(planes) != len(self.planes):
            raise ValueError(f"{self.pixel_format.value} has {len(self.planes)} planes, got {len(planes)}")
        self._keep = []
        for spec, arr in zip(self.planes, planes):
            a = np.ascontiguousarray(arr)
            if a.shape[0] != spec.rows or a.strides[0] != spec.width_bytes:
                raise ValueError(f"plane of shape {a.shape} does not match {spec}")
            self._keep.append(a)
            p = d.CUDA_MEMCPY2D()
            p.srcMemoryType = d.CUmemorytype.CU_MEMORYTYPE_HOST
            p.srcHost = a.ctypes.data
            p.srcPitch = spec.width_bytes
            p.dstMemoryType = d.CUmemorytype.CU_MEMORYTYPE_DEVICE
            p.dstDevice = self.ptr + spec.offset
            p.dstPitch = spec.pitch
            p.WidthInBytes = spec.width_bytes
            p.Height = spec.rows
            _ck(d, "cuMemcpy2DAsync", d.cuMemcpy2DAsync(p, stream or self.producer.stream))

    def fill(self, value: int, stream=None) -> None:
        """Overwrite the whole buffer on the device (a canary's garbage)."""
        d = self.producer.d
        _ck(d, "cuMemsetD8Async", d.cuMemsetD8Async(self.ptr, value & 0xFF, self.size, stream or self.producer.stream))

    def registration(self, *, flags: int = 0) -> dict:
        """The register_buffer fields for this buffer (its one fd is fd index 0)."""
        return dict(
            kind="cuda_vmm", width=self.width, height=self.height, pixel_format=self.pixel_format.value,
            bitdepth=self.bitdepth, size=self.size, modifier=0, flags=flags, device=self.producer.device,
            planes=[{"fd": 0, "offset": p.offset, "pitch": p.pitch} for p in self.planes],
        )

    def close(self) -> None:
        if self.ptr:
            d = self.producer.d
            self.producer.make_current()
            d.cuMemUnmap(self.ptr, self.size)
            d.cuMemAddressFree(self.ptr, self.size)
            d.cuMemRelease(self._handle)
            self.ptr = 0
        self.fd.close()
