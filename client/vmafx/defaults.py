"""Where the daemon listens, and the client library's fixed bounds -- shared by the async client,
the blocking client and vmafxctl (kept apart so the blocking side never imports trio)."""

from __future__ import annotations

import os

__all__ = ["DEFAULT_SOCKET", "REASON_WAIT_S", "SEND_TIMEOUT_S", "default_socket_path"]

#: where the system service listens (systemd/vmafxd.socket)
DEFAULT_SOCKET = "/run/vmafx/vmafxd.sock"

#: how long one packet may wait for room in the socket before the connection is given up
SEND_TIMEOUT_S = 30.0

#: after a send the daemon refused (it closed the connection, EPIPE): how long the client reads on
#: for the reason the daemon may have sent first (its error, its goodbye), to raise that reason
REASON_WAIT_S = 0.5


def default_socket_path() -> str:
    """``$VMAFX_SOCKET`` or the system service's socket."""
    return os.environ.get("VMAFX_SOCKET") or DEFAULT_SOCKET
