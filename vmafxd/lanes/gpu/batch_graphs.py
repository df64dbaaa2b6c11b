"""A batch's feature work as one device graph: one launch call instead of one call a kernel.

A batch of vmaf_v0.6.1 is about fifteen stream calls after its gather (the
statistics' memset, VIF's four launches, ADM's six, motion's SAD and its two
copies, the statistics' copy back), each a Python call into the driver.  At
a few frames a batch those calls, not the device, set the pace and the
latency.  So a scorer whose every feature says its work can be captured
(``graph_key``) records that work once per *key* -- the batch size, the
host slot, each feature's own key -- as a graph, and launches the graph for
every later batch of that key: the same work, in the same order, on the
same stream.

What a graph fixes when captured: every kernel argument and copy address.
So the batches that use graphs share one device block (:class:`BatchGraphs`
owns it; it grows to the largest batch seen, and the graphs made on a block
go with it), not a block from the pool per batch; the batch's staging, its
scratch and the statistics are always at the same addresses.  A feature key
holds whatever else its work depends on (motion: how many leading frames
have no score yet).  The capture runs on a stream of its own, so nothing the
worker or a reader enqueues elsewhere can join it.  A capture that fails
turns graphs off for the scorer, and that batch (and every later one) is
enqueued call by call.

Inside a capture the features' work forks: each feature enqueues on a branch
stream of its own (:meth:`BatchGraphs.fork`, which waits on the capture
stream's work so far) and the capture stream waits on every branch before the
statistics go back (:meth:`BatchGraphs.join`).  The graph then holds each
feature's launches as a chain of their own, so the device runs the features
side by side: the tail of one kernel, the gap before the next one and the small
launches of the coarse scales overlap another feature's work.  Each feature
gets a scratch region of its own for that (engine.py's ``_BatchPlan``).

``VMAFXD_GPU_GRAPHS=0`` turns graphs off everywhere (the direct path, as on a
device without graphs: HIP).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Hashable

from ..runtime import drops_deferred

__all__ = ["BatchGraphs", "graphs_enabled"]

log = logging.getLogger("vmafxd.lanes.gpu")


def graphs_enabled(device) -> bool:
    """Whether batches on ``device`` go through graphs: the device has them, and the
    environment does not say ``VMAFXD_GPU_GRAPHS=0``."""
    return bool(getattr(device, "graphs", False)) and os.environ.get("VMAFXD_GPU_GRAPHS", "1") != "0"


class BatchGraphs:
    """One scorer's graphs and the device block they address.

    ``key(n, slot, keys)`` is the graph key of a batch (None: not through a graph);
    ``block(nbytes, stream)`` the batch's device memory; ``run(key, stream, enqueue)``
    launches the key's graph, capturing ``enqueue(stream)`` first when there is none.
    """

    #: graphs kept at least (a session sees its batch sizes times its slots, ``keys`` below;
    #: the keys past the bound are captured again when they come back)
    LIMIT = 128

    def __init__(self, device, keys: int = 0):
        self.device = device
        self.limit = max(self.LIMIT, keys)
        self.on = graphs_enabled(device)
        self._graphs: dict[Hashable, Any] = {}
        self._capture_stream = None
        #: the branch streams of a capture's forks, and the events that fork and join them
        self._branches: list = []
        self._fork_event = None
        self._join_events: list = []
        self._block = 0
        self._block_bytes = 0
        #: batches launched through a graph, and captures made (benchmarks and tests read them)
        self.launches = 0
        self.captures = 0

    def block(self, nbytes: int, most: int, stream) -> int:
        """The device block every graph addresses, at least ``nbytes`` long.  A larger need
        replaces it and its graphs (the old block freed in stream order, after the work
        enqueued on it), by twice the size, up to ``most`` (a full batch's need): a session's
        batches, growing from one frame, replace it a few times, not at every size."""
        if nbytes > self._block_bytes:
            dev = self.device
            size = max(nbytes, min(2 * self._block_bytes, most))
            if self._block:
                dev.free_async(self._block, stream)
                self._drop_graphs()
                self._block, self._block_bytes = 0, 0
            self._block = dev.alloc_async(size, stream)
            self._block_bytes = size
        return self._block

    def run(self, key: Hashable, stream, enqueue: Callable[[Any], None]) -> bool:
        """Launch ``key``'s graph on ``stream``, capturing ``enqueue`` into it the first time.

        False when the capture failed: graphs are then off for this scorer, nothing was
        enqueued, and the caller enqueues the batch itself."""
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._capture(enqueue)
            if graph is None:
                return False
            if len(self._graphs) >= self.limit:
                self._drop_graphs()
            self._graphs[key] = graph
        graph.launch(stream)
        self.launches += 1
        return True

    def fork(self, stream, k: int) -> list:
        """``k`` streams for ``k`` branches of the capture on ``stream``: ``stream`` itself, then
        ``k - 1`` branch streams that wait on the work enqueued on ``stream`` so far.  Each
        branch must come back through :meth:`join` before the capture ends."""
        dev = self.device
        while len(self._branches) < k - 1:
            self._branches.append(dev.create_stream())
            self._join_events.append(dev.create_event())
        if self._fork_event is None:
            self._fork_event = dev.create_event()
        self._fork_event.record(stream)
        for branch in self._branches[:k - 1]:
            branch.wait_event(self._fork_event)
        return [stream, *self._branches[:k - 1]]

    def join(self, stream, branches: list) -> None:
        """``stream`` waits on every branch :meth:`fork` gave (but itself, the first)."""
        for branch, ev in zip(branches[1:], self._join_events):
            ev.record(branch)
            stream.wait_event(ev)

    def _capture(self, enqueue: Callable[[Any], None]):
        with drops_deferred():  # no safety-net destroy on this thread while it captures
            return self._capture_now(enqueue)

    def _capture_now(self, enqueue: Callable[[Any], None]):
        dev = self.device
        try:
            if self._capture_stream is None:
                self._capture_stream = dev.create_stream()
            cap = self._capture_stream
            dev.begin_capture(cap)
        except Exception as e:  # the device has no capture after all: call by call from now on
            log.warning("graphs off for this session: %s", e)
            self.on = False
            return None
        try:
            enqueue(cap)
        except BaseException as e:
            dev.end_capture(cap, keep=False)
            if not isinstance(e, Exception):
                raise
            log.warning("graphs off for this session: capturing a batch failed: %s", e)
            self.on = False
            return None
        try:
            graph = dev.end_capture(cap)
        except Exception as e:
            log.warning("graphs off for this session: %s", e)
            self.on = False
            return None
        self.captures += 1
        return graph

    def _drop_graphs(self) -> None:
        graphs, self._graphs = list(self._graphs.values()), {}
        for g in graphs:
            g.close()

    def close(self, stream) -> None:
        """Free the graphs, the block (in ``stream`` order), the capture and branch streams and
        their events; a second call does nothing."""
        self._drop_graphs()
        if self._block:
            block, self._block, self._block_bytes = self._block, 0, 0
            self.device.free_async(block, stream)
        cap, self._capture_stream = self._capture_stream, None
        handles = [cap, *self._branches, self._fork_event, *self._join_events]
        self._branches, self._fork_event, self._join_events = [], None, []
        for h in handles:
            if h is not None:
                h.close()
