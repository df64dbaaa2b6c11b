"""Where the daemon listens, and the client library's one fixed bound -- shared by the async client,
the blocking client and vmafxctl (kept apart so the blocking side never imports trio)."""

from __future__ import annotations

import os

__all__ = ["DEFAULT_SOCKET", "SEND_TIMEOUT_S", "default_socket_path"]

#: where the system service listens (systemd/vmafxd.socket)
DEFAULT_SOCKET = "/run/vmafx/vmafxd.sock"

#: how long one packet may wait for room in the socket before the connection is given up
SEND_TIMEOUT_S = 30.0


def default_socket_path() -> str:
    """``$VMAFX_SOCKET`` or the system service's socket."""
    return os.environ.get("VMAFX_SOCKET") or DEFAULT_SOCKET
