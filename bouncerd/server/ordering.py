"""One connection's order, sans-I/O: frames in; dispatch, reply, deferred ack, pause, waits out.

Theory of operation
-------------------
`Ordering` is the machine that carries docs/how-it-works.md's "why a verdict sees every output the
agent could have read" for one peer connection. It never touches a socket, a task or a clock: the
protocol around it (bouncerd/server/connection.py) feeds it events (`FrameReceived`, `Answered`,
`RoomMade`, ...) and carries out the commands `handle` returns, in order (`Dispatch`, `Send`,
`PauseReading`, `AwaitBarrier`, ...). What it needs to know of the daemon (is there room in the index,
how far it is indexed, does this request read taint, which other connections have unread bytes) it
reads through `World`, a narrow view. The tests drive it as playbooks
(tests/unit/test_ordering_playbook.py): events in, commands out, in order.

Frames are taken one at a time, in arrival order. A `Dispatch` must be answered (`Answered`) before
the next event: the frames behind it wait in the machine, because the answer may change what the next
frame finds (an observation fills the index). The first frame must be ``hello``; anything else, or a
`ProtocolError` (a frame `wire.check_request` refuses, or `Broken` from the framing), ends the
connection after the replies already earned (`Close`). An op the caller's role may not send
(`wire.role_refusal`) gets an error reply and reaches no handler.

Each op's row in `wire.OP_TABLE` says how it is ordered:

- "observe" (``observe``, ``observe_text``): dispatched at once, so the observations of one connection
  are accepted in arrival order and a verdict behind one on the same connection finds it accepted.
  An ``observe``'s ack is deferred (`StartAckTimer`, ACK_DELAY_SECONDS): it leaves with the next reply
  on the connection, in the same `Send` and before it, or alone when the timer fires. If the index has
  no room the observation *stalls*: reading pauses, frames behind it wait, and `AwaitRoom` asks to be
  told (`RoomMade`) when it may be dispatched; then the frames behind it are taken.
- "lane" (``client``, ``tools``, ``verdict``, ``check_builtin``): a request that reads taint (its row
  says it may, `World.needs_taint` says this one does) takes the barrier at arrival: the positions
  other connections must have read and dispatched (`World.barrier`; bouncerd/server/unread.py). With
  marks, or while a restarted daemon settles, it waits (`AwaitBarrier` until `BarrierPassed`), then
  until every observation accepted by then is indexed (`AwaitIndexed` until `Indexed`). While one
  waits, later lane requests queue behind it, so a ``tools`` cannot overtake a ``verdict`` that came
  first; other frames go on. With the lane empty and nothing to wait for, it is dispatched at once.
- "async" (``reload``): `DispatchInBackground`; its answer may come after later requests'.
- "inline" (everything else): dispatched at once; changes nothing that orders with the above.

Reading pauses while an observation is stalled and while the peer does not read its replies
(`WritePaused`), but another connection's barrier may have it read on up to a position (`ReadThrough`),
and `reached` answers that barrier. After `EofReceived` the connection closes once nothing it asked for
is left unanswered (the peer may still read the replies).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from bouncerd import wire
from bouncerd.errors import ProtocolError

# How long an observe's ack may wait for a reply to travel with. Short against the shim's patience
# (10 s), long against the gap between a result and the agent's next call in a burst.
ACK_DELAY_SECONDS: Final = 0.01


class World(Protocol):
    """What ordering reads of the daemon: the observation index, the barrier and the ops."""

    @property
    def has_room(self) -> bool: ...
    @property
    def accepted_upto(self) -> int: ...
    @property
    def indexed_upto(self) -> int: ...
    @property
    def settling(self) -> bool:
        """A restarted daemon still gives reconnecting shims time to replay (unread.py)."""
        ...

    def needs_taint(self, op: str, message: Mapping[str, Any]) -> bool: ...
    def barrier(self) -> Sequence[object]:
        """The marks (other connection, position) not reached yet, for a request that just arrived."""
        ...


@dataclass(eq=False, slots=True)
class Request:
    """A request that passed `wire.check_request`. Playbooks compare requests by op and id."""

    op: str
    rid: int
    message: dict[str, Any]
    row: wire.Op

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Request) and (self.op, self.rid) == (other.op, other.rid)

    def __repr__(self) -> str:
        return f"{self.op}#{self.rid}"


# ---- events: what happened ------------------------------------------------------------------------


@dataclass(slots=True)
class DataReceived:
    nbytes: int


@dataclass(slots=True)
class FrameReceived:
    message: dict[str, Any]


@dataclass(slots=True)
class Broken:
    """The byte stream cannot be framed any more (or the protocol failed): after what came before it."""

    error: Exception


@dataclass(slots=True)
class Answered:
    """A dispatched request's reply; for hello, whether the connection is kept."""

    request: Request
    reply: dict[str, Any]
    keep: bool = True


@dataclass(slots=True)
class RoomMade:
    """The index has room for the stalled observation."""


@dataclass(slots=True)
class BarrierPassed:
    """Every mark of the lane's head is reached, and the shims a restart waits for have replayed."""


@dataclass(slots=True)
class Indexed:
    """Everything accepted up to the lane head's target is indexed."""


@dataclass(slots=True)
class AckTimerFired:
    pass


@dataclass(slots=True)
class WritePaused:
    """The peer does not read its replies (the transport's buffer is full)."""


@dataclass(slots=True)
class WriteResumed:
    pass


@dataclass(slots=True)
class ReadThrough:
    """Another connection's barrier needs this one read up to `position`."""

    position: int


@dataclass(slots=True)
class EofReceived:
    pass


@dataclass(slots=True)
class ConnectionLost:
    pass


Event = (
    DataReceived
    | FrameReceived
    | Broken
    | Answered
    | RoomMade
    | BarrierPassed
    | Indexed
    | AckTimerFired
    | WritePaused
    | WriteResumed
    | ReadThrough
    | EofReceived
    | ConnectionLost
)

# ---- commands: what to do -------------------------------------------------------------------------


@dataclass(slots=True)
class Dispatch:
    """Run the request's handler now and answer with `Answered` before anything else."""

    request: Request


@dataclass(slots=True)
class DispatchInBackground:
    """Run the request's handler off the connection's path; `Answered` when done."""

    request: Request


@dataclass(slots=True)
class Send:
    """Write these replies, in this order, in one write."""

    replies: tuple[dict[str, Any], ...]


@dataclass(slots=True)
class StartAckTimer:
    seconds: float = ACK_DELAY_SECONDS


@dataclass(slots=True)
class CancelAckTimer:
    pass


@dataclass(slots=True)
class PauseReading:
    pass


@dataclass(slots=True)
class ResumeReading:
    pass


@dataclass(slots=True)
class AwaitRoom:
    """The observation found the index full: it is stalled (the barrier counts it) until `RoomMade`."""

    request: Request


@dataclass(slots=True)
class Unstalled:
    """The stalled observation is accepted: the barrier no longer counts this connection as stalled."""


@dataclass(slots=True)
class AwaitBarrier:
    """Settle (after a restart), wait until each mark is reached and for the barrier taken again, then
    `BarrierPassed`."""

    request: Request
    marks: tuple[object, ...]


@dataclass(slots=True)
class AwaitIndexed:
    """Wait until the index has indexed up to `upto`, then `Indexed`."""

    request: Request
    upto: int


@dataclass(slots=True)
class Close:
    """Read and answer nothing more; close once the replies sent so far are written. With `error`, the
    connection ended on it (a ProtocolError, a bug)."""

    error: Exception | None = None


Command = (
    Dispatch
    | DispatchInBackground
    | Send
    | StartAckTimer
    | CancelAckTimer
    | PauseReading
    | ResumeReading
    | AwaitRoom
    | Unstalled
    | AwaitBarrier
    | AwaitIndexed
    | Close
)


@dataclass(eq=False, slots=True)
class _Queued:
    """A lane request and what it waits for: `target` observations indexed, and the barrier's marks."""

    request: Request
    target: int
    marks: tuple[object, ...]
    waits: bool | None  # reads taint; None: ask when it is the head (a reload may come between)
    barrier_passed: bool = False
    indexed: bool = False
    waiting: bool = False  # a wait or its dispatch is under way


class Ordering:
    def __init__(self, world: World) -> None:
        self.world = world
        self.received = 0  # bytes read from the socket
        self.role: str | None = None
        self._read_to = 0  # read up to here even while writes are paused (a barrier needs it)
        self._reading = True
        self._write_paused = False
        self._greeted = False
        self._ended = False  # nothing more is taken or answered (a failure, a refused hello)
        self._closing = False
        self._gone = False
        self._eof = False
        self._frames: deque[dict[str, Any] | Exception] = deque()  # received, not taken yet
        self._busy: Request | None = None  # dispatched; its answer is due before the next event
        self._stalled: Request | None = None  # an observation waiting for room
        self._lane: deque[_Queued] = deque()
        self._background = 0  # requests dispatched in the background, not answered yet
        self._acks: list[dict[str, Any]] = []  # observe acks waiting for a reply to travel with
        self._timer = False
        self._out: list[Command] = []

    # ---- the machine's interface --------------------------------------------------------------

    def handle(self, event: Event) -> list[Command]:
        """Take one event; the commands to carry out, in order."""
        out = self._out = []
        _ON[type(event)](self, event)
        return out

    def reached(self, position: int) -> bool:
        """Whether every frame wholly before `position` has been dispatched (or nothing more will be)."""
        return self._gone or self._ended or (self.received >= position and self._stalled is None)

    @property
    def ended(self) -> bool:
        return self._ended

    # ---- events -------------------------------------------------------------------------------

    def _on_data_received(self, event: DataReceived) -> None:
        self.received += event.nbytes
        self._update_reading()

    def _on_frame_received(self, event: FrameReceived) -> None:
        if self._frames or self._busy is not None or self._stalled is not None:
            self._frames.append(event.message)  # behind what is waiting
            self._take()
        elif not self._ended:
            try:
                self._take_frame(event.message)
            except Exception as exc:  # as in `_take`
                self._fail(exc)

    def _on_broken(self, event: Broken) -> None:
        self._frames.append(event.error)  # the frames before it are still served
        self._take()

    def _on_answered(self, event: Answered) -> None:
        request, reply = event.request, event.reply
        if request is self._busy:
            self._busy = None
            self._settle(request, reply, event.keep)
        elif request.row.order == "async":
            self._background -= 1
            if not self._ended:
                self._send(reply)
        if self._frames:
            self._take()
        if self._eof:
            self._maybe_finish()

    def _on_room_made(self, event: RoomMade) -> None:
        if self._stalled is not None and not self._ended:
            self._dispatch(self._stalled)

    def _on_barrier_passed(self, event: BarrierPassed) -> None:
        if self._lane and not self._ended:
            head = self._lane[0]
            head.barrier_passed, head.waiting = True, False
            head.target = self.world.accepted_upto  # what the reached marks brought in
            self._advance_lane()

    def _on_indexed(self, event: Indexed) -> None:
        if self._lane and not self._ended:
            head = self._lane[0]
            head.indexed, head.waiting = True, False
            self._advance_lane()

    def _on_ack_timer_fired(self, event: AckTimerFired) -> None:
        self._timer = False
        if self._acks:
            acks, self._acks = tuple(self._acks), []
            self._out.append(Send(acks))

    def _on_write_paused(self, event: WritePaused) -> None:
        self._write_paused = True
        self._update_reading()

    def _on_write_resumed(self, event: WriteResumed) -> None:
        self._write_paused = False
        self._update_reading()

    def _on_read_through(self, event: ReadThrough) -> None:
        if event.position > self._read_to:
            self._read_to = event.position
            self._update_reading()

    def _on_eof_received(self, event: EofReceived) -> None:
        self._eof = True
        self._maybe_finish()

    def _on_connection_lost(self, event: ConnectionLost) -> None:
        self._gone = True

    # ---- taking frames ------------------------------------------------------------------------

    def _take(self) -> None:
        """Take the frames received, in order, until one must be answered or waits for room."""
        frames = self._frames
        while frames and self._busy is None and self._stalled is None and not self._ended:
            frame = frames.popleft()
            try:
                if isinstance(frame, Exception):
                    raise frame
                self._take_frame(frame)
            except Exception as exc:  # ProtocolError or a bug: this connection ends, the daemon goes on
                self._fail(exc)

    def _take_frame(self, message: dict[str, Any]) -> None:
        op, rid = wire.check_request(message)
        row = wire.OP_TABLE[op]
        request = Request(op, rid, message, row)
        if not self._greeted:
            if op != "hello":
                raise ProtocolError(f"the first request must be hello, not {op}")
            self._dispatch(request)
            return
        if self.role not in row.roles:
            refusal = wire.role_refusal(op, self.role)
            assert refusal is not None
            self._send(wire.error_reply(rid, *refusal))
            return
        _TAKE[row.order](self, request)

    def _take_observe(self, request: Request) -> None:
        if self.world.has_room:
            self._dispatch(request)
        else:
            self._stalled = request
            self._update_reading()
            self._out.append(AwaitRoom(request))

    def _take_lane(self, request: Request) -> None:
        world = self.world
        target = world.accepted_upto
        waits = request.row.reads_taint and world.needs_taint(request.op, request.message)
        marks = tuple(world.barrier()) if waits else ()
        held = bool(marks) or (waits and world.settling)
        if not self._lane and not held and (not waits or world.indexed_upto >= target):
            self._dispatch(request)
        else:
            self._lane.append(_Queued(request, target, marks, waits if not self._lane else None))
            self._advance_lane()

    def _take_async(self, request: Request) -> None:
        self._background += 1
        self._out.append(DispatchInBackground(request))

    def _dispatch(self, request: Request) -> None:
        self._busy = request
        self._out.append(Dispatch(request))

    # ---- answers ------------------------------------------------------------------------------

    def _settle(self, request: Request, reply: dict[str, Any], keep: bool) -> None:
        """What a dispatched request's reply does."""
        if not self._greeted:
            self._send(reply)
            if keep:
                self._greeted = True
                self.role = request.message["role"]
            else:
                self._fail(None)  # refused: the reply goes out, then the connection closes
        elif request is self._stalled:
            self._send(reply)
            self._stalled = None
            self._out.append(Unstalled())
            self._update_reading()
        elif request.op == "observe" and reply.get("ok") is True:
            self._acks.append(reply)
            if not self._timer:
                self._timer = True
                self._out.append(StartAckTimer())
        elif self._lane and self._lane[0].request is request:
            self._lane.popleft()  # only now: until its state change is done, later requests queue
            self._send(reply)
            self._advance_lane()
        else:
            self._send(reply)

    def _advance_lane(self) -> None:
        """Start the lane's head on what it waits for, or dispatch it."""
        if not self._lane or self._busy is not None:
            return
        head = self._lane[0]
        if head.waiting:
            return
        request, world = head.request, self.world
        if head.waits is None:
            head.waits = request.row.reads_taint and world.needs_taint(request.op, request.message)
        if head.waits:
            if not head.barrier_passed and (head.marks or world.settling):
                head.waiting = True
                self._out.append(AwaitBarrier(request, head.marks))
                return
            if not head.indexed and world.indexed_upto < head.target:
                head.waiting = True
                self._out.append(AwaitIndexed(request, head.target))
                return
        head.waiting = True
        self._dispatch(request)

    # ---- replies and the end ------------------------------------------------------------------

    def _send(self, reply: dict[str, Any]) -> None:
        """One reply, after every ack still waiting (older acks first, in the same write)."""
        if self._acks:
            replies = (*self._acks, reply)
            self._acks = []
            if self._timer:
                self._timer = False
                self._out.append(CancelAckTimer())
            self._out.append(Send(replies))
        else:
            self._out.append(Send((reply,)))

    def _flush_acks(self) -> None:
        if self._acks:
            acks, self._acks = tuple(self._acks), []
            self._out.append(Send(acks))
        if self._timer:
            self._timer = False
            self._out.append(CancelAckTimer())

    def _update_reading(self) -> None:
        paused = (self._write_paused and self.received >= self._read_to) or self._stalled is not None
        if paused == self._reading:
            self._reading = not paused
            self._out.append(PauseReading() if paused else ResumeReading())

    def _maybe_finish(self) -> None:
        """After the peer's EOF: close once everything it asked for is answered."""
        if (
            self._eof
            and not self._closing
            and not self._ended
            and not self._lane
            and not self._frames
            and self._busy is None
            and self._stalled is None
            and not self._background
        ):
            self._closing = True
            self._flush_acks()
            self._out.append(Close())

    def _fail(self, error: Exception | None) -> None:
        """Take and answer nothing more; close once the replies already earned are sent (those of the
        frames before a bad one, a refused hello's)."""
        self._ended = True
        self._lane.clear()
        self._frames.clear()
        self._busy = None
        if not self._closing:
            self._closing = True
            self._flush_acks()
            self._out.append(Close(error))


_ON: Final[Mapping[type, Callable[[Ordering, Any], None]]] = {
    DataReceived: Ordering._on_data_received,
    FrameReceived: Ordering._on_frame_received,
    Broken: Ordering._on_broken,
    Answered: Ordering._on_answered,
    RoomMade: Ordering._on_room_made,
    BarrierPassed: Ordering._on_barrier_passed,
    Indexed: Ordering._on_indexed,
    AckTimerFired: Ordering._on_ack_timer_fired,
    WritePaused: Ordering._on_write_paused,
    WriteResumed: Ordering._on_write_resumed,
    ReadThrough: Ordering._on_read_through,
    EofReceived: Ordering._on_eof_received,
    ConnectionLost: Ordering._on_connection_lost,
}

_TAKE: Final[Mapping[str, Callable[[Ordering, Request], None]]] = {
    "first": lambda machine, request: machine._fail(ProtocolError("hello sent twice")),
    "observe": Ordering._take_observe,
    "lane": Ordering._take_lane,
    "async": Ordering._take_async,
    "inline": Ordering._dispatch,
}
