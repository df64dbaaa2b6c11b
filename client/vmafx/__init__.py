"""vmafx: the client library of vmafxd (VMAF as a system service).

The common names are importable from here (``vmafx.Client``,
``vmafx.BlockingClient``, ``vmafx.memfd_buffer``, ...).  They are loaded on
first use, so ``import vmafx.protocol`` stays free of trio and numpy (a
test checks that) and blocking code never imports trio.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "Client": "client", "Session": "client", "BufferHandle": "client", "open_client": "client",
    "DEFAULT_SOCKET": "defaults",
    "BlockingClient": "blocking", "BlockingSession": "blocking", "BlockingBufferHandle": "blocking",
    "FrameResult": "tracking", "Summary": "tracking", "ServerInfo": "tracking",
    "FrameBuffer": "frames", "memfd_buffer": "frames", "memfd_buffer_from_planes": "frames",
    "from_y4m_frame": "frames", "wrap_dmabuf": "frames", "plane_layout": "frames", "ALLOW_COPY": "frames",
    "BufferFlags": "frames", "EventFdFence": "frames", "SyncFileFence": "frames",
    "VmafxError": "exceptions", "DaemonError": "exceptions", "ConnectionClosed": "exceptions",
    "DaemonUnavailable": "exceptions", "ProtocolViolation": "exceptions", "LayoutError": "exceptions",
    "FenceTimeout": "exceptions", "ConnectionRefused": "exceptions",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'vmafx' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value
