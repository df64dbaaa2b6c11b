"""The exporter's memory-object path (NVIDIA, PLATFORM.md): a CUDA VMM buffer imported into GL
(``GL_EXT_memory_object_fd``) and each plane read into it by ``glReadPixels`` (ALLOW_COPY)."""

from __future__ import annotations

import ctypes
import os

from ..frames import ALLOW_COPY, BorrowedFd, FrameBuffer
from ..protocol.messages import Plane
from .constants import (
    GL_COLOR_ATTACHMENT0, GL_DEDICATED_MEMORY_OBJECT_EXT, GL_HANDLE_TYPE_OPAQUE_FD_EXT, GL_PACK_ALIGNMENT,
    GL_PACK_IMAGE_HEIGHT, GL_PACK_LSB_FIRST, GL_PACK_ROW_LENGTH, GL_PACK_SKIP_IMAGES, GL_PACK_SKIP_PIXELS,
    GL_PACK_SKIP_ROWS, GL_PACK_SWAP_BYTES, GL_PIXEL_PACK_BUFFER, GL_READ_FRAMEBUFFER, GL_TEXTURE_2D,
)
from .egl_display import egl_display_info, require_same_device, same_pci
from .entry_points import _gl_check, _gl_errors, _GlContextInfo, _i, _Library, _u, _vp
from .errors import GlInvalid, GlNotSupported
from .frame import GlFrame


class MemoryObjectPath:
    """GlFrameExporter's memory-object path (a mixin: the state it uses is the exporter's)."""

    def _setup_memory_object(self, gl: _Library, info: _GlContextInfo) -> None:
        if not self.flags & ALLOW_COPY:
            raise GlNotSupported("flags", "the memory-object path copies each texture on the GPU (glReadPixels into "
                                 "the VMM buffer): it needs ALLOW_COPY (R11)")
        for ext in ("GL_EXT_memory_object", "GL_EXT_memory_object_fd"):
            if ext not in info.extensions:
                raise GlNotSupported(ext, f"the context ({info.renderer}) does not offer {ext}, so it cannot import "
                                     "a CUDA VMM fd")
        self._trace("GL_EXT_memory_object_fd: present")
        memory = self._memory_arg
        if memory is None:
            memory = self._make_vmm_buffer()
        self._check_memory(memory)
        self._memory = memory
        self._import_memory(gl, memory)

    def _make_vmm_buffer(self):
        try:
            from .cuda_frames import CudaProducer, CudaUnavailable, VmmFrameBuffer
        except ImportError as e:  # numpy or the module itself missing
            raise GlNotSupported("producer", f"the CUDA producer side cannot be imported ({e})") from None
        producer = self._producer_arg
        try:
            if producer is None:
                producer = self._own_producer = CudaProducer(self._cuda_ordinal())
            mem = self._own_memory = VmmFrameBuffer(producer, self.width, self.height, self.pixel_format,
                                                    self.bitdepth, pitch_align=256)
        except CudaUnavailable as e:
            raise GlNotSupported("producer", f"no CUDA here ({e}): the memory-object path writes into a CUDA VMM "
                                 "buffer") from None
        except RuntimeError as e:
            raise GlNotSupported("producer", f"allocating the VMM buffer failed ({e})") from None
        self._trace(f"VMM buffer: {mem.size} bytes on CUDA device {producer.device}, fd {mem.fd.fileno()}, planes "
                    f"{[(p.offset, p.pitch) for p in mem.planes]}")
        return mem

    def _cuda_ordinal(self) -> int:
        """The CUDA ordinal at the daemon device's PCI location (ordinals can differ between processes,
        e.g. under another CUDA_VISIBLE_DEVICES)."""
        from .cuda_frames import _ck, _driver

        d = _driver()
        if not self.device.pci:
            return self.device.index
        found = []
        for k in range(int(_ck(d, "cuDeviceGetCount", d.cuDeviceGetCount()))):
            bus = _ck(d, "cuDeviceGetPCIBusId", d.cuDeviceGetPCIBusId(32, _ck(d, "cuDeviceGet", d.cuDeviceGet(k))))
            bus = bus.split(b"\0")[0].decode() if isinstance(bus, (bytes, bytearray)) else str(bus)
            found.append(bus)
            if same_pci(bus, self.device.pci):
                self._trace(f"CUDA device {k} is at {bus}, the daemon device's PCI location")
                return k
        raise GlNotSupported("device", f"no CUDA device of this process is at the daemon device's PCI location "
                             f"{self.device.pci} (this process sees {found})")

    def _check_memory(self, memory) -> None:
        reg = memory.registration() if hasattr(memory, "registration") else {}
        for what in ("fd", "size", "planes"):
            if not hasattr(memory, what):
                raise GlInvalid("memory", f"{type(memory).__name__} has no {what}")
        if len(memory.planes) != len(self.planes):
            raise GlInvalid("memory.planes", f"the buffer has {len(memory.planes)} planes, the format "
                            f"{len(self.planes)}")
        for i, (spec, (shape, pf)) in enumerate(zip(memory.planes, self.planes)):
            # GL_PACK_ROW_LENGTH counts pixels and a pack-buffer offset must be a multiple of the
            # sample size: the layout has to fit glReadPixels' arithmetic exactly.
            if spec.pitch % pf.bytes_per_pixel or spec.pitch < shape.row_bytes:
                raise GlInvalid(f"memory.planes[{i}].pitch", f"{spec.pitch} must be a multiple of {pf.name}'s "
                                f"{pf.bytes_per_pixel}-byte pixels and at least the row's {shape.row_bytes} bytes")
            if spec.offset % pf.bytes_per_sample:
                raise GlInvalid(f"memory.planes[{i}].offset", f"{spec.offset} is not {pf.bytes_per_sample}-aligned")
            if spec.offset + spec.pitch * (shape.height - 1) + shape.row_bytes > memory.size:
                raise GlInvalid(f"memory.planes[{i}].offset", "the plane ends beyond the buffer")
        producer = getattr(memory, "producer", None)
        dev_pci = self._producer_pci(producer) if producer is not None else None
        if dev_pci is not None:
            require_same_device(dev_pci, self.device, what="the VMM buffer's CUDA device")
            self._trace(f"VMM buffer on PCI {dev_pci} = daemon device {self.device.lane}:{self.device.index}")
        info = egl_display_info(self.display)
        if info.cuda_device is not None and producer is not None and info.cuda_device != producer.device:
            raise GlNotSupported("display", f"the EGL display is CUDA device {info.cuda_device}, the VMM buffer is on "
                                 f"CUDA device {producer.device}: GL cannot import another GPU's memory")
        if reg:
            self._trace(f"memory registers as {reg.get('kind')} on device {reg.get('device')}")

    @staticmethod
    def _producer_pci(producer) -> str | None:
        d = getattr(producer, "d", None)
        dev = getattr(producer, "_dev", None)
        if d is None or dev is None:
            return None
        try:
            bus = d.cuDeviceGetPCIBusId(32, dev)[1]
        except Exception:  # noqa: BLE001 -- a binding without it: no check possible, said in the trace
            return None
        return bus.split(b"\0")[0].decode() if isinstance(bus, (bytes, bytearray)) else str(bus)

    def _import_memory(self, gl: _Library, memory) -> None:
        mo = _u(0)
        gl.glCreateMemoryObjectsEXT(1, ctypes.byref(mo))
        _gl_check(gl, "glCreateMemoryObjectsEXT", "GL_EXT_memory_object")
        self._memory_object = mo.value
        # A dedicated allocation: the VMM handle is a whole cuMemCreate allocation (NVIDIA
        # requires the flag to match how the memory was made).
        gl.glMemoryObjectParameterivEXT(mo.value, GL_DEDICATED_MEMORY_OBJECT_EXT, ctypes.byref(_i(1)))
        _gl_check(gl, "glMemoryObjectParameterivEXT(GL_DEDICATED_MEMORY_OBJECT_EXT)", "GL_EXT_memory_object")
        dup = os.dup(memory.fd.fileno())
        gl.glImportMemoryFdEXT(mo.value, memory.size, GL_HANDLE_TYPE_OPAQUE_FD_EXT, dup)
        errs = _gl_errors(gl)
        if errs or not gl.glIsMemoryObjectEXT(mo.value):
            os.close(dup)  # a failed import leaves the fd ours (EXT_external_objects_fd)
            raise GlNotSupported("GL_EXT_memory_object_fd", f"glImportMemoryFdEXT of the {memory.size}-byte buffer "
                                 f"failed ({', '.join(errs) or 'no memory object'})")
        # From here the dup belongs to GL: deleting the memory object closes it.
        self._trace(f"GL memory object {mo.value} imported the fd (size {memory.size})")
        buf = _u(0)
        gl.glGenBuffers(1, ctypes.byref(buf))
        self._pack_buffer = buf.value
        gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, buf.value)  # creates the object; the guard restores the binding
        gl.glNamedBufferStorageMemEXT(buf.value, memory.size, mo.value, 0)
        _gl_check(gl, "glNamedBufferStorageMemEXT", "GL_EXT_memory_object")
        self._trace(f"GL buffer {buf.value} backed by the memory object")
        reg = memory.registration() if hasattr(memory, "registration") else {}
        self._vmm_buffer = FrameBuffer(
            reg.get("kind", "cuda_vmm"), self.width, self.height, self.pixel_format, self.bitdepth,
            [Plane(0, p.offset, p.pitch) for p in memory.planes], [BorrowedFd(memory.fd.fileno())],
            size=memory.size, modifier=0, flags=self.flags, device=reg.get("device"))

    def _export_memory_object(self, gl: _Library, texs: tuple[int, ...]) -> GlFrame:
        memory = self._memory
        gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, self._pack_buffer)
        gl.glPixelStorei(GL_PACK_ALIGNMENT, 1)
        for p in (GL_PACK_SKIP_ROWS, GL_PACK_SKIP_PIXELS, GL_PACK_SKIP_IMAGES, GL_PACK_IMAGE_HEIGHT,
                  GL_PACK_SWAP_BYTES, GL_PACK_LSB_FIRST):
            gl.glPixelStorei(p, 0)  # a producer's SWAP_BYTES would byte-swap 16-bit planes
        gl.glBindFramebuffer(GL_READ_FRAMEBUFFER, self._read_fbo)
        for i, (tex, (shape, pf), spec) in enumerate(zip(texs, self.planes, memory.planes)):
            gl.glFramebufferTexture2D(GL_READ_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, tex, 0)
            gl.glReadBuffer(GL_COLOR_ATTACHMENT0)
            self._require_complete(gl, i, tex)
            gl.glPixelStorei(GL_PACK_ROW_LENGTH, spec.pitch // pf.bytes_per_pixel)
            gl.glReadPixels(0, 0, shape.width, shape.height, pf.gl_format, pf.gl_type, _vp(spec.offset))
            _gl_check(gl, f"glReadPixels of texture {tex} into the VMM buffer at offset {spec.offset}", f"planes[{i}]")
        gl.glFramebufferTexture2D(GL_READ_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, 0, 0)
        self._wait_copy_fence(gl)
        self._trace(f"read {len(texs)} planes into the VMM buffer")
        assert self._vmm_buffer is not None
        return GlFrame(self._vmm_buffer, "memory_object", True, False, None)
