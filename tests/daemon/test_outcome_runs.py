"""Runs of outcomes through a real daemon (``outcome_runs`` in the hello): ``result_many`` and
``released_many`` stand for exactly the single messages a client that did not ask gets, in the same
order, frame errors in between included; a client that did not ask never sees one."""

from vmafx.protocol import FrameError, Released, ReleasedMany, Result, ResultMany, SubmitFrame, SubmitMany

from .rawclient import RawClient, frame_memfd

N = 24


def _run(daemon, p01, runs: bool):
    """Frames 0..N-1 of p01 (psnr) in submit_many packets of 8, frame 9's ref a buffer that does not
    exist (a frame_error amid the results); every message as it came, and the close's summary."""
    _, refs, dists = p01
    c = RawClient(daemon.socket, submit_many=True, outcome_runs=runs, expand_runs=False)
    reply = c.hello()
    assert reply.outcome_runs is (True if runs else None)
    bufs = [(frame_memfd(refs[i % len(refs)]), frame_memfd(dists[i % len(dists)])) for i in range(N)]
    ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
    s = c.open_ok(features=["psnr"], models=[], width=refs[0].width, height=refs[0].height).session
    for first in range(0, N, 8):
        frames = tuple(SubmitFrame(i, 999 if i == 9 else ids[i][0], ids[i][1]) for i in range(first, first + 8))
        c.send(SubmitMany(session=s, frames=frames))
    closed = c.close_session(s)
    msgs = [m for m in c.inbox if isinstance(m, (Result, ResultMany, FrameError, Released, ReleasedMany))]
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0  # every promise checked
    c.close()
    for r, d in bufs:
        r.close()
        d.close()
    return msgs, closed


def _singles(msgs):
    """The runs as the single messages they stand for."""
    out = []
    for m in msgs:
        out += m.results() if type(m) is ResultMany else m.released() if type(m) is ReleasedMany else [m]
    return out


def test_runs_stand_for_the_single_messages_in_their_order(daemon, p01):
    singles, closed_singles = _run(daemon, p01, runs=False)
    runs, closed_runs = _run(daemon, p01, runs=True)
    assert not any(type(m) in (ResultMany, ReleasedMany) for m in singles)  # never unasked
    def outcomes(msgs):  # (index, metrics or the error), in order (the sessions' ids differ)
        return [(m.index, m.metrics if isinstance(m, Result) else (m.code, m.field))
                for m in msgs if not isinstance(m, Released)]

    assert outcomes(_singles(runs)) == outcomes(singles)  # the same values, the same order
    # releases: the same (frame, role, buffer) set, each frame's ref before its dist
    key = lambda m: (m.index, m.role, m.buffer)  # noqa: E731
    assert sorted(map(key, (m for m in _singles(runs) if isinstance(m, Released)))) == \
        sorted(map(key, (m for m in singles if isinstance(m, Released))))
    results = [m for m in runs if type(m) is ResultMany]
    assert results and max(len(m.indices) for m in results) > 1  # frames went as runs
    assert any(type(m) is ReleasedMany and len(m.indices) > 1 for m in runs)
    assert sum(len(m.indices) for m in results) + sum(type(m) is Result for m in runs) == N - 1
    errors = [m for m in runs if type(m) is FrameError]
    assert [(e.index, e.code, e.field) for e in errors] == [(9, "E_NOENT", "ref")]
    assert (closed_runs.frames, closed_runs.failed) == (closed_singles.frames, closed_singles.failed) == (N - 1, 1)
    assert closed_runs.pooled == closed_singles.pooled
