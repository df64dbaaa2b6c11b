"""One exported frame: the buffer the client registers, and how the exporter made it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..frames import FrameBuffer
from ..transport import ClosedOnExit


@dataclass
class GlFrame:
    """One exported frame: the buffer to register (once: ``new_buffer``) and how it was made."""

    buffer: FrameBuffer
    #: "dmabuf" or "memory_object"
    path: str
    #: a GPU copy was made (a blit to linear, or glReadPixels into the VMM buffer)
    copied: bool
    #: the first time this buffer is returned: register it; later frames reuse the registration
    new_buffer: bool
    #: per plane, the modifier the driver exported (dma-buf path), else None
    exported_modifiers: tuple[int, ...] | None = None
    #: set by :func:`export_texture_planes`: the GlFrameExporter this frame owns
    owner: ClosedOnExit | None = field(default=None, repr=False)

    def close(self) -> None:
        """Close the owning exporter (one-shot exports); a frame of a long-lived exporter leaves it open."""
        if self.owner is not None:
            self.owner.close()
