"""result_many and released_many, sans I/O: the hello's negotiation, a run checked as the single
messages it stands for (the frame ledger's promises), and malformed runs named."""

import msgpack
import pytest

from vmafx.protocol import (
    ClientConnection, ErrorCode, Hello, HelloReply, Limits, LocalProtocolError, ReleasedMany, RemoteProtocolError,
    Result, ResultMany, ServerConnection, State, SubmitFrame, SubmitMany, decode, encode,
)


def _pair(ask: bool, offer: bool = True):
    """A client (submit_many, and outcome runs when ``ask``) and a server connection after the hello."""
    c, srv = ClientConnection("t"), ServerConnection(Limits(), "d")
    seq = c.next_seq()
    srv.receive(c.send(Hello(seq=seq, version=1, submit_many=True, outcome_runs=ask or None))[0])
    reply = HelloReply(re=seq, version=1, server="d", limits=srv.limits.to_wire(), submit_many=True,
                       outcome_runs=True if ask and offer else None)
    c.receive(encode(reply)[0])
    c.send(SubmitMany(session=1, frames=tuple(SubmitFrame(i, 7, 8) for i in range(3))))
    return c, srv


def _packed(t, **fields):
    return msgpack.packb({"t": t, **fields}, use_bin_type=True)


def test_the_hello_negotiates_runs_and_a_run_keeps_the_frames_promises():
    c, srv = _pair(ask=True)
    assert c.outcome_runs and srv.outcome_runs
    data, _ = srv.send(ReleasedMany(session=1, indices=(0, 1, 2), ref=(7, 7, 7), dist=(8, 8, 8)))
    c.receive_packet(data)
    assert c.ledger.unreleased() == 0 and len(c.ledger.unanswered()) == 3
    data, _ = srv.send(ResultMany(session=1, indices=(0, 1), metrics={"a": [1.0, None]}))
    (run,) = c.receive_packet(data)
    assert run.results() == [Result(session=1, index=0, metrics={"a": 1.0}), Result(session=1, index=1,
                                                                                    metrics={"a": None})]
    assert c.ledger.unanswered() == [(1, 2)]
    # a frame answered twice (a run naming frame 1 again) breaks the one-outcome promise
    with pytest.raises(RemoteProtocolError) as e:
        c.receive_packet(srv.send(ResultMany(session=1, indices=(1, 2), metrics={"a": [1.0, 2.0]}))[0])
    assert e.value.code is ErrorCode.E_PROTO and c.state is State.ERROR


def test_runs_are_never_sent_unasked_and_refused_when_they_come_unasked():
    c, srv = _pair(ask=False)
    assert not c.outcome_runs and not srv.outcome_runs
    with pytest.raises(LocalProtocolError):
        srv.send(ResultMany(session=1, indices=(0,), metrics={}))
    with pytest.raises(RemoteProtocolError) as e:
        c.receive_packet(_packed("result_many", session=1, indices=[0], metrics={}))
    assert (e.value.code, e.value.field) == (ErrorCode.E_PROTO, "t") and c.state is State.ERROR
    c, _ = _pair(ask=True, offer=False)  # an older daemon: no word of runs in its reply
    assert not c.outcome_runs
    with pytest.raises(RemoteProtocolError):
        c.receive_packet(_packed("released_many", session=1, indices=[0], ref=[7], dist=[8]))


@pytest.mark.parametrize("t, fields, field", [
    ("result_many", dict(session=1, indices=[0, 1], metrics={"a": [1.0]}), "metrics.a"),
    ("result_many", dict(session=1, indices=[], metrics={}), "indices"),
    ("result_many", dict(session=1, indices=[0, -1], metrics={}), "indices"),
    ("result_many", dict(session=1, indices=[0], metrics={"a": ["x"]}), "metrics.a"),
    ("result_many", dict(session=1, indices=[0], metrics={"a": 1.0}), "metrics.a"),
    ("released_many", dict(session=1, indices=[0, 1], ref=[7, 7], dist=[8]), "dist"),
    ("released_many", dict(session=1, indices=[0], ref=[7], dist=[1 << 32]), "dist"),
    ("released_many", dict(session=1, indices=[0], ref=[7]), "dist"),
])
def test_a_malformed_run_is_a_protocol_error_naming_the_field(t, fields, field):
    c, _ = _pair(ask=True)
    with pytest.raises(RemoteProtocolError) as e:
        c.receive_packet(_packed(t, **fields))
    assert e.value.field == field and c.state is State.ERROR


def test_integer_metrics_in_a_run_read_as_numbers():
    msg = decode(_packed("result_many", session=1, indices=[0, 1], metrics={"a": [1, None]}))
    assert msg.metrics == {"a": [1.0, None]} and type(msg.metrics["a"][0]) is float
