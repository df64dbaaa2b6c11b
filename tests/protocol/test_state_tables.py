"""The protocol's state machine as data: the tables, the one frame promise, and docs/protocol.md agreeing."""

import os
import re

import pytest

from vmafx.protocol import messages as m
from vmafx.protocol.errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from vmafx.protocol.limits import Limits
from vmafx.protocol.codec import encode
from vmafx.protocol.state import (
    CLIENT_SENDS, SERVER_SENDS, TRANSITIONS, ClientConnection, Event, FramePromise, Role, ServerConnection, State,
    check_send, next_state,
)

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "protocol.md")


def _doc_rows():
    text = open(DOC, encoding="utf-8").read()
    block = text.split("<!-- state-table:begin -->", 1)[1].split("<!-- state-table:end -->", 1)[0]
    rows = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or set(cells[0]) <= {"-"} or cells[0] in ("role", "sender"):
            continue
        rows.append(cells)
    return rows


def _names(cell):
    return set(re.findall(r"`([a-z_]+)`", cell))


def test_the_documented_transitions_are_the_codes():
    doc = {(Role(r), State(s.strip("`")), Event(e.strip("`"))): State(n.strip("`"))
           for r, s, e, n in (row for row in _doc_rows() if len(row) == 4)}
    code = {(role, s, e): n for role, table in TRANSITIONS.items() for (s, e), n in table.items()}
    assert doc == code


def test_the_documented_send_tables_are_the_codes():
    doc = {(Role(r), State(s.strip("`"))): _names(sends) for r, s, sends in (row for row in _doc_rows() if len(row) == 3)}
    code = {(role, s): {t.TYPE for t in msgs}
            for role, table in ((Role.CLIENT, CLIENT_SENDS), (Role.SERVER, SERVER_SENDS)) for s, msgs in table.items()}
    assert doc == code


def test_every_state_has_a_send_row_and_every_message_type_is_sent_by_someone():
    assert set(CLIENT_SENDS) == set(SERVER_SENDS) == set(State)
    sent = {t for table in (CLIENT_SENDS, SERVER_SENDS) for msgs in table.values() for t in msgs}
    assert {t.TYPE for t in sent} == set(m.MESSAGE_TYPES)


@pytest.mark.parametrize("role,state,event", [(r, s, e) for r, t in TRANSITIONS.items() for (s, e) in t])
def test_every_allowed_transition_is_answered_by_the_table(role, state, event):
    assert next_state(role, state, event) is TRANSITIONS[role][(state, event)]


@pytest.mark.parametrize("role,state,event", [
    (Role.SERVER, State.OPEN, Event.HELLO),  # a second hello
    (Role.SERVER, State.CLOSED, Event.HELLO),
    (Role.SERVER, State.AWAIT_HELLO, Event.CLOSING_ERROR),  # the server does not receive errors
    (Role.CLIENT, State.OPEN, Event.HELLO),
    (Role.CLIENT, State.ERROR, Event.HELLO),
    (Role.CLIENT, State.ERROR, Event.GOODBYE),  # ERROR is sticky: nothing is applied any more
])
def test_a_transition_the_table_lacks_is_refused(role, state, event):
    with pytest.raises(LocalProtocolError) as e:
        next_state(role, state, event)
    assert e.value.code is ErrorCode.E_STATE


def test_error_is_sticky_and_every_state_can_break():
    for role, table in TRANSITIONS.items():
        assert all(n is State.ERROR for (s, _), n in table.items() if s is State.ERROR)
        assert all(table.get((s, Event.PROTOCOL_ERROR)) is State.ERROR
                   for s in State if (s, Event.PROTOCOL_ERROR) in table)
    assert {s for (s, e) in TRANSITIONS[Role.CLIENT] if e is Event.PROTOCOL_ERROR} == set(State)


def test_check_send_refuses_what_a_side_may_not_send_now():
    check_send(Role.SERVER, State.OPEN, m.Result(session=1, index=0, metrics={}), LocalProtocolError)
    with pytest.raises(LocalProtocolError):
        check_send(Role.SERVER, State.AWAIT_HELLO, m.Result(session=1, index=0, metrics={}), LocalProtocolError)
    with pytest.raises(RemoteProtocolError):
        check_send(Role.SERVER, State.CLOSED, m.Result(session=1, index=0, metrics={}), RemoteProtocolError)
    with pytest.raises(RemoteProtocolError):
        check_send(Role.SERVER, State.ERROR, m.Released(buffer=1, session=1, index=0, role="ref"),
                   RemoteProtocolError)
    # after goodbye the daemon still answers the submits that crossed it (E_SHUTDOWN)
    check_send(Role.SERVER, State.CLOSED, m.Released(buffer=1, session=1, index=0, role="ref"), RemoteProtocolError)
    with pytest.raises(LocalProtocolError):
        check_send(Role.CLIENT, State.OPEN, m.Hello(seq=1, version=1), LocalProtocolError)


def test_the_server_connection_refuses_to_send_results_before_hello_and_after_an_error():
    sc = ServerConnection(Limits(), "t")
    with pytest.raises(LocalProtocolError):
        sc.send(m.Result(session=1, index=0, metrics={}))
    assert sc.state is State.AWAIT_HELLO  # a refused send changes nothing
    sc.send(m.Error(code="E_STATE", field="t", message="status before hello"))
    with pytest.raises(RemoteProtocolError):
        sc.receive(b"\xc1")  # msgpack's never-used byte: undecodable, fatal
    assert sc.state is State.ERROR
    sc.send(m.Error(code="E_PROTO", field="message", message="x"))  # the error that says why still goes
    with pytest.raises(LocalProtocolError):
        sc.send(m.Released(buffer=1, session=1, index=0, role="ref"))
    sc.send(m.Goodbye(reason="bye"))
    assert sc.state is State.ERROR  # sticky


def test_a_client_in_await_hello_refuses_a_result_and_moves_to_error():
    c = ClientConnection()
    c.send(m.Hello(seq=c.next_seq(), version=1))
    with pytest.raises(RemoteProtocolError):
        c.receive(encode(m.Result(session=1, index=0, metrics={}))[0])
    assert c.state is State.ERROR


def test_a_closing_error_closes_and_goodbye_after_it_is_fine():
    c = ClientConnection()
    c.send(m.Hello(seq=c.next_seq(), version=1))
    c.receive(encode(m.HelloReply(re=1, version=1, server="s", limits=Limits().to_wire()))[0])
    c.receive(encode(m.Error(code="E_SHUTDOWN", field="", message="stopping"))[0])
    assert c.state is State.CLOSED
    c.receive(encode(m.Goodbye(reason="stopping"))[0])
    assert c.state is State.CLOSED
    with pytest.raises(LocalProtocolError):
        c.send(m.Status(seq=c.next_seq()))


# -- the one frame promise ----------------------------------------------------------------


@pytest.mark.parametrize("breach", [LocalProtocolError, RemoteProtocolError])
def test_a_frame_promise_allows_one_outcome_and_one_release_per_role(breach):
    p = FramePromise("frame 3 of session 1")
    p.release("ref", breach)
    assert not p.kept
    p.answer(breach)
    with pytest.raises(breach) as e:
        p.answer(breach)
    assert e.value.code is ErrorCode.E_PROTO and "second outcome for frame 3 of session 1" in e.value.message
    with pytest.raises(breach):
        p.release("ref", breach)
    with pytest.raises(breach):
        p.release("luma", breach)
    p.release("dist", breach)
    assert p.kept and p.answered and not p.unreleased
