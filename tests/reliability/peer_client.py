"""A client run as a subprocess (tests/reliability): optionally as another uid, it scores one frame.

    python -m tests.reliability.peer_client SOCKET [UID [list]]

Prints one JSON line: ``{"uid": ..., "outcome": "scored", "psnr_y": ...}`` or
``{"uid": ..., "outcome": "error", "code": ..., "field": ..., "message": ...}``.
With UID, it drops to that uid (and its gid) before connecting: the tests
run as root and need a second user to show per-uid fairness and E_PERM.
With ``list`` it also reports what ``list_sessions`` and ``status`` show it
(``"listed"``: the uids of the sessions listed; ``"status"``: the reply).
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    path = sys.argv[1]
    # Everything is imported before the privileges go: the interpreter's own files may not be
    # readable by the other user (a pyenv under /root).
    import numpy as np

    from vmafx.formats import Subsampling
    from vmafx.protocol import Error, Hello, ListSessions, Result, SessionsReply, Status
    from vmafxd.core.picture import Picture

    from tests.daemon.rawclient import RawClient, frame_memfd

    if len(sys.argv) > 2 and int(sys.argv[2]) != os.getuid():
        uid = int(sys.argv[2])
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    def picture(value: int) -> Picture:
        y = np.full((64, 64), value, np.uint8)
        c = np.full((32, 32), 128, np.uint8)
        return Picture((y, c, c.copy()), 8, Subsampling.S420)

    out: dict = {"uid": os.getuid()}
    try:
        c = RawClient(path, name="peer")
        c.send(Hello(seq=c.conn.next_seq(), version=1, client="peer", bundles=True))
        first = c.recv(timeout=10)  # the hello_reply, or the daemon's refusal
        if isinstance(first, Error):
            raise RuntimeError(first)
        ref, dist = frame_memfd(picture(100)), frame_memfd(picture(110))
        rid, did = c.register_ok(ref), c.register_ok(dist)
        s = c.open_ok(width=64, height=64, features=["psnr"]).session
        c.submit(s, 0, rid, did)
        res = c.outcome(s, 0)
        if isinstance(res, Result):
            out.update(outcome="scored", psnr_y=res.metrics["psnr_y"])
        else:
            out.update(outcome="error", code=res.code, field=res.field, message=res.message)
        if "list" in sys.argv[3:]:
            listed = c.request(ListSessions(seq=c.conn.next_seq()))
            assert isinstance(listed, SessionsReply), listed
            out["listed"] = [row.get("uid") for row in listed.sessions]
            out["status"] = c.request(Status(seq=c.conn.next_seq())).status
        c.close()
    except RuntimeError as e:
        err = e.args[0]
        out.update(outcome="error", code=err.code, field=err.field, message=err.message)
    except Exception as e:  # noqa: BLE001 -- reported to the test, which asserts on it
        out.update(outcome="exception", error=f"{type(e).__name__}: {e}")
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
