"""A producer process the tests kill with SIGKILL while it has frames in flight.

    python -m tests.daemon.child_producer SOCKET

Registers buffers, opens a full-VMAF session and submits frames: some behind
eventfd fences it never signals (stuck in the daemon's fence wait), the rest
unfenced (queued on a CPU worker).  Prints ``SUBMITTED`` and sleeps.
"""

from __future__ import annotations

import os
import sys
import time

from tests.reference import vendored_pairs

from .rawclient import RawClient, frame_memfd


def main(path: str) -> None:
    pair = next(p for p in vendored_pairs() if p.id.startswith("p01"))
    refs, dists = pair.pictures()
    c = RawClient(path, "doomed")
    c.hello()
    bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(4)]
    ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
    s = c.open_ok().session
    second = c.open_ok(features=["psnr"]).session
    fence = os.eventfd(0)
    # Fenced frames of the second session wait for the fence in the daemon...
    c.submit(second, 0, *ids[0], ref_fence=os.dup(fence))
    # ... while unfenced ones of the first queue up on a worker.
    for i in range(12):
        c.submit(s, i, *ids[i % 4])
    print("SUBMITTED", flush=True)
    time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1])
