"""One peer connection: frames in, ordered dispatch to the ops, replies out (any order).

Theory of operation
-------------------
A connection is an `asyncio.BufferedProtocol` on the accepted socket (the daemon runs on anyio's
asyncio backend). The event loop reads straight into the connection's
`bouncerd.server.reader.FrameBuffer` (wire's framing and decoder, one msgpack decode per frame, a
10 MB observation read into place without intermediate copies) and calls `buffer_updated`, which
decodes, validates (`wire.check_request`) and dispatches every whole frame at once, in that same turn
of the loop: a request answered inline costs no task switch, no future and no extra turn, only its
op and one ``send`` (the transport writes at once when its buffer is empty). The first request must
be ``hello``; anything else, or any `ProtocolError` (garbage, an oversized frame, an unknown op or
field), ends the connection without further replies. A bad peer costs its own connection, never the
daemon.

Order. Requests are pipelined (each carries an id; replies may come back in any order), but state
changes happen in arrival order:

- ``observe`` (and a hook's ``observe_text``) is handled inline: journalled, then acked. So
  observations of one connection are accepted in the order they arrived, and an ack is never delayed
  by a verdict that is waiting. The shim released the output when it wrote the observation, so an
  ``observe``'s ack is off the client's path: it waits up to ACK_DELAY_SECONDS to leave with the
  next reply on the connection (in the common case the next call's verdict), in the same write,
  instead of costing a write and a wake-up of the shim of its own. A refusal is sent at once, and
  waiting acks always leave before any later reply. Back-pressure: while more raw observations
  wait to be indexed than the index holds (`ObservationIndex.has_room`), the connection stops
  reading, and the observation that found no room is accepted by a task once there is (then
  reading resumes, in order).
- ``client``, ``tools``, ``verdict`` and a hook's ``check_builtin`` go through the connection's
  *lane*. A verdict (or a ``check_builtin``) that reads taint must first wait until every other
  connection has read and dispatched what it had been sent when the verdict arrived (unread.py: the
  shims release an output once its observation is written, before the ack), then until every
  observation accepted by then has been indexed for taint.
  While a request waits in the lane, later lane requests queue behind it (so a ``tools`` cannot
  overtake a ``verdict`` that arrived first); when the lane is empty and nothing needs waiting, the
  request is handled inline, which is the common case. The lane's task answers the others.
- ``status``, ``ping`` and the rest change nothing that orders with the above and are answered inline.
- ``reload`` (`Ops.async_handlers`) waits on a worker thread: a task of the connection answers it
  when it is done, while everything else, this connection's requests included, goes on.

Replies go through the transport, which keeps them whole and in the order written. A peer that does
not read its replies stops being read (the transport's pause_writing), so it cannot grow the daemon.
When the peer shuts down its sending side, the connection stays open until the lane is empty: the
peer may still read the replies.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol, cast

import anyio
import anyio.abc

from bouncerd import wire
from bouncerd.errors import ProtocolError
from bouncerd.server.caller import AsyncHandler, Caller, Handler, RefusedError
from bouncerd.server.peer import PeerCred
from bouncerd.server.reader import FrameBuffer
from bouncerd.server.unread import Peer, Peers

log = logging.getLogger("bouncerd")

# How long an observe's ack may wait for a reply to travel with (see Order above). Short against the
# shim's patience (10 s), long against the gap between a result and the agent's next call in a burst.
ACK_DELAY_SECONDS = 0.01


class ObservationGate(Protocol):
    """What ordering needs of the observation index (bouncerd/server/observations.py)."""

    @property
    def has_room(self) -> bool: ...
    @property
    def accepted_upto(self) -> int: ...
    @property
    def indexed_upto(self) -> int: ...
    async def wait_for_room(self) -> None: ...
    async def wait_indexed(self, n: int) -> None: ...


class Ops(Protocol):
    """What a connection dispatches to (bouncerd/server/daemon.py)."""

    @property
    def handlers(self) -> Mapping[str, Handler]:
        """Every op but hello and those of `async_handlers`, by name (see `Daemon.handlers`)."""
        ...

    @property
    def async_handlers(self) -> Mapping[str, AsyncHandler]:
        """Ops answered by a task once their work off the event loop is done."""
        ...

    def hello(self, caller: Caller, rid: int, msg: wire.HelloRequest) -> tuple[dict[str, Any], bool]:
        """The reply to hello and whether to keep the connection; fills in `caller`."""
        ...

    def needs_taint(self, caller: Caller, op: str, msg: Mapping[str, Any]) -> bool:
        """Whether a request must wait until every earlier output is indexed."""
        ...


LaneEntry = tuple[str, int, dict[str, Any], int, list[tuple[Peer, int]]]


class Connection(asyncio.BufferedProtocol):
    def __init__(
        self,
        ops: Ops,
        observations: ObservationGate,
        stream: anyio.abc.SocketStream,
        cred: PeerCred,
        peers: Peers,
    ) -> None:
        self.ops = ops
        self.observations = observations
        self.cred = cred
        self.peers = peers
        self.caller = Caller()  # what hello established: role, session, server
        self._sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)  # noqa: S610 - anyio, not Django
        self._fd = self._sock.fileno()
        self._frames = FrameBuffer()
        self.received = 0  # bytes read from the socket
        self._read_to = 0  # read up to here even while writes are paused (a barrier needs it)
        self._gone = False
        self._transport: asyncio.Transport | None = None
        self._greeted = False  # hello answered and accepted
        self._lane: deque[LaneEntry] = deque()
        self._lane_wakeup = anyio.Event()
        self._stalled: tuple[str, int, dict[str, Any]] | None = None  # an observation waiting for room
        self._write_paused = False
        self._eof = False
        self._closed = anyio.Event()
        self._failure: Exception | None = None
        self._ended = False  # nothing more is read or answered (a failure, a refused hello)
        self._batch: list[bytes] | None = None  # replies of the frames being dispatched, sent together
        self._acks: list[bytes] = []  # observe acks waiting for a reply to travel with
        self._ack_timer: asyncio.TimerHandle | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._async_pending = 0  # ops of `async_handlers` not answered yet

    # ---- the connection's life ----------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until it closes; re-raise what ended it (ProtocolError, a bug)."""
        loop = asyncio.get_running_loop()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await loop.connect_accepted_socket(lambda: self, self._sock)
                tg.start_soon(self._run_lane)
                await self._closed.wait()
                tg.cancel_scope.cancel()  # queued work has no reader
        finally:
            self._left()
            if self._transport is not None and not self._transport.is_closing():
                self._transport.abort()  # off the event loop before the stream closes the socket
        if self._failure is not None:
            raise self._failure

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self.peers.add(self._fd, self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._left()
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        self._closed.set()

    def _left(self) -> None:
        """Out of the barrier's sight, before the socket closes (its number may be reused)."""
        if not self._gone:
            self._gone = True
            self.peers.remove(self._fd, self)

    # ---- the barrier's view (unread.py) -------------------------------------------------------

    def reached(self, position: int) -> bool:
        return self._gone or self._ended or (self.received >= position and self._stalled is None)

    def read_through(self, position: int) -> None:
        if position > self._read_to:
            self._read_to = position
            self._update_reading()

    def eof_received(self) -> bool:
        self._eof = True
        self._maybe_finish()
        return True  # keep the sending side open: lane replies may still be due

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if (self._write_paused and self.received >= self._read_to) or self._stalled is not None:
            transport.pause_reading()
        else:
            transport.resume_reading()

    def _maybe_finish(self) -> None:
        """After the peer's EOF: close once everything it asked for is answered."""
        if (
            self._eof
            and not self._lane
            and self._stalled is None
            and not self._async_pending
            and self._transport is not None
        ):
            self._flush_acks()
            self._transport.close()

    def _fail(self, exc: Exception | None) -> None:
        """Read and answer nothing more, and close once the replies already earned are sent (those of
        the frames before a bad one, a refused hello's). With `exc` (a ProtocolError, a bug), `run`
        raises it when the connection is closed."""
        self._ended = True
        self._lane.clear()
        self.peers.progressed()
        if self._failure is None:
            self._failure = exc
        if self._transport is not None:
            self._flush_acks()
            self._flush_batch()
            self._transport.close()

    # ---- reading ------------------------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._frames.updated(nbytes)
        self.received += nbytes
        self._drain()
        if self._write_paused and self.received >= self._read_to:
            self._update_reading()  # a barrier had it read on; it has what it needed
        self.peers.progressed()

    def _drain(self) -> None:
        """Dispatch every whole frame received, in order, until done or an observation finds no room.
        The replies of one read leave together in one ``send``: a burst of observations is acked at once."""
        self._batch = []
        try:
            while self._stalled is None and not self._ended:
                msg = self._frames.next_message()
                if msg is None:
                    break
                self._dispatch(msg)
        except Exception as exc:  # ProtocolError or a bug: this connection ends, the daemon goes on
            self._fail(exc)
        self._flush_batch()
        self._batch = None

    def _flush_batch(self) -> None:
        batch = self._batch
        if batch:
            self._batch = []
            if self._transport is not None and not self._transport.is_closing():
                self._transport.write(batch[0] if len(batch) == 1 else b"".join(batch))

    def _dispatch(self, msg: dict[str, Any]) -> None:
        op, rid = wire.check_request(msg)
        if not self._greeted:
            if op != "hello":
                raise ProtocolError(f"the first request must be hello, not {op}")
            reply, keep = self.ops.hello(self.caller, rid, cast(wire.HelloRequest, msg))
            self._write(reply)
            if keep:
                self._greeted = True
            else:
                self._fail(None)  # refused: the reply goes out, then the connection closes
            return
        row = wire.OP_TABLE[op]
        refusal = wire.role_refusal(op, self.caller.role)
        if refusal is not None:
            self._write(wire.error_reply(rid, *refusal))
            return
        observations = self.observations
        if row.order == "observe":
            if observations.has_room:
                reply = self._call(op, rid, msg)
                if op == "observe" and reply.get("ok") is True:
                    self._defer_ack(reply)
                else:
                    self._write(reply)
            else:
                self._stalled = (op, rid, msg)
                self.peers.stalled.add(self)
                self._update_reading()
                assert self._tg is not None
                self._tg.start_soon(self._unstall)
        elif row.order == "lane":
            target = observations.accepted_upto
            waits = row.reads_taint and self.ops.needs_taint(self.caller, op, msg)
            marks = self.peers.barrier(self) if waits else []
            held = bool(marks) or (waits and self.peers.settling)
            if not self._lane and not held and (not waits or observations.indexed_upto >= target):
                self._write(self._call(op, rid, msg))
            else:
                self._lane.append((op, rid, msg, target, marks))
                self._lane_wakeup.set()
        elif row.order == "first":
            raise ProtocolError("hello sent twice")
        elif row.order == "async":
            assert self._tg is not None
            self._async_pending += 1
            self._tg.start_soon(self._call_async, op, rid, msg)
        else:
            self._write(self._call(op, rid, msg))

    async def _unstall(self) -> None:
        await self.observations.wait_for_room()
        stalled = self._stalled
        if stalled is None or self._ended:
            return
        op, rid, msg = stalled
        self._write(self._call(op, rid, msg))
        self._stalled = None
        self.peers.stalled.discard(self)
        self.peers.progressed()
        self._update_reading()
        self._drain()  # frames that arrived behind it
        self._maybe_finish()

    async def _run_lane(self) -> None:
        observations = self.observations
        while True:
            if not self._lane:
                await self._lane_wakeup.wait()
                self._lane_wakeup = anyio.Event()
                continue
            op, rid, msg, target, marks = self._lane[0]
            if wire.OP_TABLE[op].reads_taint and self.ops.needs_taint(self.caller, op, msg):
                if marks or self.peers.settling:
                    # What other connections had been sent when this arrived (and, after a restart,
                    # what reconnecting shims replay): read it, then wait until it is indexed.
                    await self.peers.settle()
                    await self.peers.wait([*marks, *self.peers.barrier(self)])
                    target = observations.accepted_upto
                await observations.wait_indexed(target)
            if not self._lane:  # the connection failed while this waited
                continue
            reply = self._call(op, rid, msg)
            self._lane.popleft()  # only now: until its state change is done, later requests queue
            self._write(reply)
            self._maybe_finish()

    def _call(self, op: str, rid: int, msg: dict[str, Any]) -> dict[str, Any]:
        """Run one op synchronously; every failure becomes an error reply, never a dropped daemon."""
        handler = self.ops.handlers.get(op)
        try:
            if handler is None:
                return wire.error_reply(rid, "unknown_op", f"op {op!r} is not served")
            return handler(self.caller, rid, msg)
        except RefusedError as exc:
            return wire.error_reply(rid, exc.code, str(exc))
        except OSError as exc:
            log.error("%s failed: %s", op, exc)
            return wire.error_reply(
                rid, "io", f"bouncerd could not record the request: {exc.strerror or exc}"
            )
        except Exception:
            log.exception("%s failed", op)
            return wire.error_reply(rid, "internal", f"bouncerd failed on {op}; see its log")

    async def _call_async(self, op: str, rid: int, msg: dict[str, Any]) -> None:
        """Run one op of `async_handlers`, then reply, with the error replies of `_call`."""
        try:
            reply = await self.ops.async_handlers[op](self.caller, rid, msg)
        except RefusedError as exc:
            reply = wire.error_reply(rid, exc.code, str(exc))
        except OSError as exc:
            log.error("%s failed: %s", op, exc)
            why = exc.strerror or exc
            reply = wire.error_reply(rid, "io", f"bouncerd could not record the request: {why}")
        except Exception:
            log.exception("%s failed", op)
            reply = wire.error_reply(rid, "internal", f"bouncerd failed on {op}; see its log")
        self._async_pending -= 1
        if not self._ended:
            self._write(reply)
            self._maybe_finish()

    # ---- writing ------------------------------------------------------------------------------

    def _write(self, message: dict[str, Any]) -> None:
        frame = wire.encode(message)
        if self._acks:  # older acks first, in the same write
            frame = b"".join([*self._take_acks(), frame])
        if self._batch is not None:
            self._batch.append(frame)
            return
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(frame)

    def _defer_ack(self, reply: dict[str, Any]) -> None:
        self._acks.append(wire.encode(reply))
        if self._ack_timer is None:
            self._ack_timer = asyncio.get_running_loop().call_later(ACK_DELAY_SECONDS, self._flush_acks)

    def _take_acks(self) -> list[bytes]:
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        acks, self._acks = self._acks, []
        return acks

    def _flush_acks(self) -> None:
        """Send the waiting acks now (their time is up, or the connection is closing)."""
        acks = self._take_acks()
        transport = self._transport
        if acks and transport is not None and not transport.is_closing():
            transport.write(b"".join(acks))
