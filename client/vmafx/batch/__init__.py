"""``vmafxctl batch``: score a job list on this machine or across a Ray cluster.

- :mod:`.jobs` -- the job list (CSV / JSON Lines), job ids;
- :mod:`.results` -- the results file (JSON Lines journal, Parquet), ``--resume``;
- :mod:`.scorers` -- how one job is scored (a ``vmafxctl score`` subprocess, or a
  daemon through the client library) and its result record;
- :mod:`.scheduler` -- the driver loop and the local backend;
- :mod:`.ray_runner` -- the Ray backend: one actor a node, jobs fed as room appears;
- :mod:`.progress` -- the progress line;
- :mod:`.command` -- the ``batch`` subcommand.

Nothing here imports the daemon (vmafxd): jobs are scored through a daemon's
socket or by ``vmafxctl score`` subprocesses.
"""
