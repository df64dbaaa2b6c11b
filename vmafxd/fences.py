"""Acquire fences, checked on the host with a bounded wait.

A producer that hands over a frame still being written (by a GPU, a video
decoder, a camera) attaches an *acquire fence*: an fd that becomes readable
when the write is done.  The daemon never imports it as a GPU semaphore
(R2: the research note found that import unreliable); it polls the fd on the
host, with a bound (``Limits.fence_timeout_ms``).  A fence that does not
signal in time fails the frame with ``E_TIMEOUT`` naming the fence field,
and the frame's buffers are released at once -- the daemon never read them.

Kinds:

* ``sync_file`` -- what DRM drivers and Vulkan export (``anon_inode:sync_file``);
  polls readable once its fence signals.
* ``eventfd`` -- the stand-in on machines without sync_file
  (PLATFORM.md): polls readable once written, exactly like a signalled
  sync_file.  The daemon only polls it and never reads the counter.
* ``cuda_ipc_event`` / ``hip_ipc_event`` carry no fd; they are the GPU lanes'
  business (waited on the library stream).  The CPU lane refuses them.

A fence fd is *consumed*: :class:`AcquireFence` owns it and closes it exactly
once, after telling trio (``notify_closing``) so that no task is left
waiting on a number the kernel may hand out again.

R8: a dma-buf submitted without a fence may still be written by another
engine; the daemon waits for its implicit write fences by polling the
dma-buf fd for ``POLLIN`` (readable = no pending write fence), bounded by
``implicit_fence_timeout_ms``, and says so when it gives up.  A memfd has no
implicit fences (and always polls readable), so it is not waited for.
"""

from __future__ import annotations

import os

import trio

from vmafx.field_error import FieldError
from vmafx.protocol import ErrorCode, Fence, RemoteProtocolError
from vmafx.transport import OwnedFd

from .core.fdkinds import FdKind, inspect_fd

__all__ = ["AcquireFence", "FD_FENCE_KINDS", "wait_implicit_fences"]

#: fence kinds carried as fds and checked on the host (R2)
FD_FENCE_KINDS = {"sync_file": FdKind.SYNC_FILE, "eventfd": FdKind.EVENTFD}


class AcquireFence:
    """A consumed fence fd (sync_file or eventfd) of one frame role."""

    def __init__(self, fd: OwnedFd, kind: str, field: str):
        self._fd = fd
        self.kind = kind
        #: ``ref_fence`` or ``dist_fence``
        self.field = field

    @classmethod
    def take(cls, fence: Fence, fd: OwnedFd, field: str) -> "AcquireFence":
        """Adopt ``fd`` (ours now, whatever happens) after checking it is what ``fence.kind`` says.

        The kind is verified on the fd itself: an fd that is not an eventfd
        declared as one, or a memfd declared as a sync_file, is refused with
        ``E_INVAL`` naming ``field`` -- a wrong kind would poll readable at
        once (a memfd always does) and let the frame through unfenced.
        """
        try:
            want = FD_FENCE_KINDS.get(fence.kind)
            if want is None:
                raise RemoteProtocolError(ErrorCode.E_INVAL, f"{field}.kind", f"{fence.kind} is not an fd fence")
            try:
                info = inspect_fd(fd.fileno(), f"{field}.fd")
            except FieldError as e:
                raise RemoteProtocolError(ErrorCode.E_INVAL, e.field, e.reason) from None
            if info.kind is not want:
                raise RemoteProtocolError(
                    ErrorCode.E_INVAL, f"{field}.fd",
                    f"declared {fence.kind} but the fd is {info.describe()}",
                )
        except BaseException:
            fd.close()
            raise
        return cls(fd, fence.kind, field)

    @property
    def closed(self) -> bool:
        return self._fd.closed

    async def wait(self, timeout_s: float) -> bool:
        """True once the fence has signalled; False if ``timeout_s`` passed first."""
        fd = self._fd.fileno()
        with trio.move_on_after(timeout_s):
            await trio.lowlevel.wait_readable(fd)
            return True
        return False

    def close(self) -> None:
        """Close the fence fd (idempotent).  Trio thread only."""
        if not self._fd.closed:
            # A task blocked in wait_readable on this number must be woken
            # before the number can be reused by the kernel.
            trio.lowlevel.notify_closing(self._fd.fileno())
            self._fd.close()


async def wait_implicit_fences(dmabuf_fd: int, timeout_s: float) -> bool:
    """Wait until a dma-buf has no pending write fences (R8).  True if it has none in time.

    Polls a private ``dup()``: trio refuses two tasks waiting on one fd
    number, and two sessions may submit the same buffer at once (R14).
    """
    fd = OwnedFd(os.dup(dmabuf_fd))
    try:
        with trio.move_on_after(timeout_s):
            await trio.lowlevel.wait_readable(fd.fileno())
            return True
        return False
    finally:
        trio.lowlevel.notify_closing(fd.fileno())
        fd.close()
