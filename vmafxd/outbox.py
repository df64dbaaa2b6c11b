"""A session's outcomes, in the order their frames were submitted.

The protocol promises outcomes in index order within a session.  Frames do
not finish in that order: motion's one-frame lag makes frame *i*'s result
final only once frame *i + 1* was extracted (or at close), while a frame
refused on arrival, or failed by a fence timeout, has its ``frame_error`` at
once.  Each decoded ``submit`` of a session therefore reserves a
:class:`Slot` when it arrives; outcomes fill slots in any order and leave in
slot order, so a ``frame_error`` for *i + 1* never overtakes the still
pending result of *i*.  The session's ``session_closed`` leaves after the
last slot *and* once no hold is left: the session holds the outbox for every
frame whose release entry is pending (:meth:`OrderedOutbox.hold`), so every
``released`` of the session goes out before its ``session_closed`` -- a
producer may read "closed" as "no buffer of this session is held".  The rule
lives here, where the final message is sent, so no path (a lane that reports
an outcome before its release event completes, a shutdown that fails the
last frames) can send ``session_closed`` early.

Filling a slot twice is a bug in the daemon (exactly one outcome per frame)
and raises.
"""

from __future__ import annotations

from collections import deque
from typing import Callable

from vmafx.protocol import Message

__all__ = ["Slot", "OrderedOutbox"]


class Slot:
    __slots__ = ("index", "msg", "accepted")

    def __init__(self, index: int):
        self.index = index
        self.msg: Message | None = None
        #: the frame was accepted for scoring (counts against max_frames_in_flight)
        self.accepted = False

    @property
    def filled(self) -> bool:
        return self.msg is not None


class OrderedOutbox:
    def __init__(self, emit: Callable[[Message, Slot | None], None]):
        #: called with (message, its slot) for outcomes and (message, None) for the final one
        self._emit = emit
        self._slots: deque[Slot] = deque()
        self._final: Callable[[], Message] | None = None
        #: pending releases the final message waits for (see hold)
        self._holds = 0
        self.closed = False

    def __len__(self) -> int:
        return len(self._slots)

    def reserve(self, index: int) -> Slot:
        if self.closed or self._final is not None:
            raise RuntimeError("reserve after the outbox was closed")
        slot = Slot(index)
        self._slots.append(slot)
        return slot

    def fill(self, slot: Slot, msg: Message) -> None:
        if slot.msg is not None:
            raise RuntimeError(f"frame {slot.index}: a second outcome")
        slot.msg = msg
        self._flush()

    def hold(self) -> None:
        """Something the final message must wait for (a frame's pending release) began."""
        self._holds += 1

    def unhold(self) -> None:
        """One :meth:`hold` ended; the final message leaves if it was the last thing it waited for."""
        if self._holds <= 0:
            raise RuntimeError("unhold without a hold")
        self._holds -= 1
        self._flush()

    def unfilled(self) -> list[Slot]:
        return [s for s in self._slots if s.msg is None]

    def close(self, final: Callable[[], Message]) -> None:
        """``final()`` is built and leaves after every slot and every hold; nothing may be reserved any more."""
        self._final = final
        self._flush()

    def _flush(self) -> None:
        while self._slots and self._slots[0].msg is not None:
            slot = self._slots.popleft()
            self._emit(slot.msg, slot)
        if not self._slots and not self._holds and self._final is not None and not self.closed:
            self.closed = True
            final, self._final = self._final, None
            self._emit(final(), None)
