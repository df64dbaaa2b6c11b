"""GL producers: hand the textures of an EGL context to vmafxd without a host copy.

Capture tools (OBS) and compositors hold frames as GL textures, one texture per
stored plane (``R8``, ``GR88``, ``R16``, ``GR1616``).  :class:`GlFrameExporter`
(or the one-shot :func:`export_texture_planes`) turns the textures of the EGL
context current on the calling thread into a :class:`~vmafx.frames.FrameBuffer`
the client registers, by one of two paths:

``dmabuf`` -- the decision of ADR-2132 and design rule R11, every point:
  each texture is exported through ``EGL_MESA_image_dma_buf_export`` (absent:
  ``E_NOTSUP`` naming the extension); the context's display is resolved to its
  DRM render node (``EGL_EXT_device_query``; a display without a DRM device is
  *refused*, the check is never skipped); the render node's PCI location
  (``/sys/dev/char/MAJ:MIN/device``) must be the daemon device's (the
  ``pci`` of ``hello_reply``'s lanes), else ``E_NOTSUP`` naming ``device``.
  A linear export is read in place; a tiled or ``DRM_FORMAT_MOD_INVALID``
  export (radeonsi exports its own tiling and says INVALID: 97 % of samples
  read wrong as linear rows, ADR-2132) is copied on the GPU by one
  ``glBlitFramebuffer`` per plane inside the producer's context into a linear
  dma-buf allocated with GBM on that render node and bound as a renderbuffer
  through an EGL image -- only with ``ALLOW_COPY`` (else ``E_NOTSUP`` naming
  ``flags``).  After the export each dma-buf's implicit fences (the GL
  driver's pending writes) are waited for, at most 1 s, by polling its fd.

``memory_object`` -- the measured NVIDIA alternative (R11's last sentence,
  PLATFORM.md): on the H200 the display advertises the dma-buf export but has
  no DRM device (the export fails ``EGL_BAD_MATCH``), and CUDA cannot import a
  dma-buf anyway.  So a CUDA VMM buffer (:class:`~vmafx.cuda_frames.VmmFrameBuffer`,
  the zero-copy kind the cuda lane imports) is exported as a POSIX fd and
  imported into GL (``GL_EXT_memory_object_fd``: ``glCreateMemoryObjectsEXT``,
  ``GL_DEDICATED_MEMORY_OBJECT_EXT``, ``glImportMemoryFdEXT`` of a ``dup``,
  ``glNamedBufferStorageMemEXT``); per plane ``glReadPixels`` of the texture
  writes its linear rows into that buffer bound as ``GL_PIXEL_PACK_BUFFER``
  at the plane's offset and pitch, and a GL fence is waited for (bounded) so
  the rows are written before the daemon reads.  It is a GPU copy, so it
  needs ``ALLOW_COPY`` too.  The same VMM buffer is reused frame after frame:
  :meth:`GlFrameExporter.export` refuses (``E_BUSY`` naming ``buffer``) to
  write it again before :meth:`GlFrameExporter.mark_released` says the
  daemon released the previous frame.

In both paths the GL sync acquire is checked on the host first
(:func:`check_sync_acquire`: ``glClientWaitSync(sync, 0, 0)``, or
``eglClientWaitSyncKHR`` for an :class:`EglSync`; unsignalled is ``E_BUSY`` and
the caller retries, :func:`wait_sync_acquire` is that retry loop with a
deadline), and **the producer's GL state is restored** -- framebuffer
bindings (draw, read), renderbuffer binding, scissor test, colour mask,
pixel-pack buffer binding and pack state, read buffer, the 2-D texture
binding -- after success and after every refusal (:func:`gl_state_snapshot`
returns that state so tests compare before and after).

Why the package resolves its own entry points (``eglGetProcAddress`` on
``libEGL.so.1``, GBM through ``libgbm.so.1``) instead of calling through
PyOpenGL's wrappers, as the ADR's C code does: PyOpenGL calls ``glGetError``
after every call (which would eat errors the *producer* has pending and hide
which of our calls failed), converts and allocates arrays (``glReadPixels``
into a pack buffer needs the raw offset form), and picks its GL library by
``PYOPENGL_PLATFORM`` -- which in a producer such as OBS need not be the
loader of the context that is actually current.  The GL entry points we get
from EGL are the ones of the current EGL context's dispatch (GLVND or Mesa).
Tests and ``scripts/gl_score.py`` *are* PyOpenGL producers (the ``gl``
extra); they render with it and hand their texture names here.

Every fd has one owner: exported dma-bufs and GBM buffers are
:class:`~vmafx.transport.OwnedFd` objects of the exporter (the
:class:`~vmafx.frames.FrameBuffer` it returns borrows them); the ``dup``
given to ``glImportMemoryFdEXT`` belongs to GL once the import succeeded
(EXT_external_objects_fd) and is closed by us when it failed.

The package, bottom up: ``errors`` and ``constants``; ``plane_formats``; ``entry_points``
(EGL, GL and GBM resolved at run time, the GL error flags, the context's version);
``egl_display`` (the current display, its device and DRM nodes, R11's device checks);
``syncs`` (the producer's acquire); ``producer_state`` (the GL state kept across every call);
``exporter`` with its two paths, ``dmabuf_path`` and ``memory_object_path``; ``offscreen``
(a context of its own, for tests and ``scripts/gl_score.py``).
"""

from __future__ import annotations

from .constants import DRM_FORMAT_MOD_LINEAR, DRM_FORMAT_MOD_INVALID, IMPLICIT_FENCE_TIMEOUT_S
from .egl_display import (
    DaemonDevice, EglDisplayInfo, current_egl, display_render_node, egl_display_info, pci_location_of_char_device,
    render_node_pci, require_dma_buf_export, require_same_device, same_pci,
)
from .errors import GlExportError, GlNotSupported, GlBusy, GlTimeout, GlWrongState, GlInvalid
from .exporter import GlFrameExporter, export_texture_planes
from .frame import GlFrame
from .offscreen import EglOffscreenContext
from .plane_formats import PlaneFormat, PLANE_FORMATS, plane_formats
from .producer_state import gl_state_snapshot
from .syncs import EglSync, check_sync_acquire, wait_sync_acquire

__all__ = [
    "GlExportError", "GlNotSupported", "GlBusy", "GlTimeout", "GlWrongState", "GlInvalid",
    "PlaneFormat", "PLANE_FORMATS", "plane_formats", "DaemonDevice",
    "EglSync", "check_sync_acquire", "wait_sync_acquire", "gl_state_snapshot",
    "current_egl", "EglDisplayInfo", "egl_display_info", "require_dma_buf_export", "display_render_node",
    "render_node_pci", "pci_location_of_char_device", "require_same_device", "same_pci",
    "GlFrame", "GlFrameExporter", "export_texture_planes", "EglOffscreenContext",
    "DRM_FORMAT_MOD_LINEAR", "DRM_FORMAT_MOD_INVALID", "IMPLICIT_FENCE_TIMEOUT_S",
]
