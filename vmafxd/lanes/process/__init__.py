"""A GPU lane in worker processes: one child process per device, the lane interface unchanged.

:mod:`.proxy` is the lane the daemon holds (``lane_process = true``), :mod:`.worker`
a worker process as the daemon sees it, :mod:`.child` the worker process's main,
:mod:`.wire` what crosses between them.  See
docs/architecture.md ("The lane's worker processes").
"""
