"""One peer connection: the thin asyncio protocol around `bouncerd.server.ordering.Ordering`.

Theory of operation
-------------------
The order of a connection's requests (observations before verdicts, the lane, deferred acks, stalls,
the barrier across connections) is decided by `Ordering`, a sans-I/O machine: see its module for the
argument, and tests/unit/test_ordering_playbook.py for each step of it. This module only carries it
out on a socket.

A connection is an `asyncio.BufferedProtocol` on the accepted socket, which asyncio alone owns from
accept to close (the daemon runs on anyio's asyncio backend; anyio runs the tasks). The event loop
reads straight into the connection's `bouncerd.server.reader.FrameBuffer` (wire's framing and
decoder, one msgpack decode per frame, a 10 MB observation read into place without intermediate
copies) and calls `buffer_updated`, which feeds `Ordering` the byte count and every whole frame at
once, in that same turn of the loop. The machine's commands are carried out as they come:

- `Dispatch`: the op's handler runs here and now (`Ops.handlers`, or `Ops.hello`), and its reply goes
  back as `Answered` before anything else; every failure of a handler becomes an error reply, never a
  dropped daemon. A request answered inline thus costs no task switch, no future and no extra turn.
- `AwaitBarrier`, `AwaitIndexed`: the connection's lane task (one for its life) awaits it and feeds
  the machine `BarrierPassed` or `Indexed`. `DispatchInBackground` (``reload``) and `AwaitRoom`: a
  task of their own awaits it and feeds `Answered` or `RoomMade`.
- `Send`: the replies are written through the transport, which keeps them whole and in the order
  written; the replies of one read (and of one event from a task) leave together in one ``send``.
- `PauseReading`, `ResumeReading`, the ack timer and `Close` go to the transport and the loop.

The transport's `pause_writing` (a peer that does not read its replies), `eof_received` and
`connection_lost` are events of the machine too. The connection is a `bouncerd.server.unread.Peer`:
the barrier reads its position and may have it read on.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, cast

import anyio
import anyio.abc

from bouncerd import wire
from bouncerd.errors import BouncerError
from bouncerd.server import ordering
from bouncerd.server.caller import AsyncHandler, Caller, Handler, RefusedError
from bouncerd.server.ordering import ACK_DELAY_SECONDS, Ordering, Request
from bouncerd.server.peer import PeerCred
from bouncerd.server.reader import FrameBuffer
from bouncerd.server.unread import Peer, Peers

__all__ = ["ACK_DELAY_SECONDS", "Connection", "ObservationGate", "Ops", "check_handler_table"]

log = logging.getLogger("bouncerd")


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


def check_handler_table(handlers: Mapping[str, Handler], async_handlers: Mapping[str, AsyncHandler]) -> None:
    """Raise BouncerError unless every op of `wire.OP_TABLE` but hello has exactly one handler, in
    `async_handlers` if its order is "async", in `handlers` otherwise (a daemon that cannot serve an op
    it accepts must not start)."""
    wrong: list[str] = []
    for op, row in wire.OP_TABLE.items():
        sync, deferred = op in handlers, op in async_handlers
        expected = (False, False) if row.order == "first" else (row.order != "async", row.order == "async")
        if (sync, deferred) != expected:
            wrong.append(f"{op} (order {row.order}: handler {sync}, async handler {deferred})")
    wrong += [f"{op} (not an op of the wire)" for op in {*handlers, *async_handlers} - set(wire.OP_TABLE)]
    if wrong:
        listed = "; ".join(sorted(wrong))
        raise BouncerError(f"the daemon's handler table disagrees with wire.OP_TABLE: {listed}")


class Connection(asyncio.BufferedProtocol):
    def __init__(
        self, ops: Ops, observations: ObservationGate, sock: socket.socket, cred: PeerCred, peers: Peers
    ) -> None:
        self.ops = ops
        self.observations = observations
        self.cred = cred
        self.peers = peers
        self.caller = Caller()  # what hello established: role, session, server
        self.order = Ordering(self)
        self._sock = sock
        self._fd = sock.fileno()
        self._frames = FrameBuffer()
        self._transport: asyncio.Transport | None = None
        self._gone = False
        self._closed = anyio.Event()
        self._failure: Exception | None = None
        self._batch: list[bytes] | None = None  # replies of the event being handled, sent together
        self._ack_timer: asyncio.TimerHandle | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._lane_wait: ordering.AwaitBarrier | ordering.AwaitIndexed | None = None  # for `_run_lane`
        self._lane_wakeup = anyio.Event()
        self._broken = False  # carrying out a command failed: nothing more is fed to the machine

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
            if self._transport is None:
                self._sock.close()
            elif not self._transport.is_closing():
                self._transport.abort()
        if self._failure is not None:
            raise self._failure

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self.peers.add(self._fd, self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._left()
        self.order.handle(ordering.ConnectionLost())
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        self._closed.set()

    def _left(self) -> None:
        """Out of the barrier's sight, before the socket closes (its number may be reused)."""
        if not self._gone:
            self._gone = True
            self.peers.remove(self._fd, self)

    # ---- what the machine reads (ordering.World) ----------------------------------------------

    @property
    def has_room(self) -> bool:
        return self.observations.has_room

    @property
    def accepted_upto(self) -> int:
        return self.observations.accepted_upto

    @property
    def indexed_upto(self) -> int:
        return self.observations.indexed_upto

    @property
    def settling(self) -> bool:
        return self.peers.settling

    def needs_taint(self, op: str, message: Mapping[str, Any]) -> bool:
        return self.ops.needs_taint(self.caller, op, message)

    def barrier(self) -> Sequence[object]:
        return self.peers.barrier(self)

    # ---- the barrier's view (unread.Peer) -----------------------------------------------------

    @property
    def received(self) -> int:
        return self.order.received

    def reached(self, position: int) -> bool:
        return self.order.reached(position)

    def read_through(self, position: int) -> None:
        self._feed(ordering.ReadThrough(position))

    # ---- the transport's events ---------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._frames.updated(nbytes)
        self._batch = []
        self._handle(ordering.DataReceived(nbytes))
        frames, order = self._frames, self.order
        while not order.ended and not self._broken:
            try:
                message = frames.next_message()
            except Exception as exc:  # ProtocolError: the frames before it are still answered
                self._handle(ordering.Broken(exc))
                break
            if message is None:
                break
            self._handle(ordering.FrameReceived(message))
        self._flush_batch()
        self._batch = None
        self.peers.progressed()

    def eof_received(self) -> bool:
        self._feed(ordering.EofReceived())
        return True  # keep the sending side open: lane replies may still be due

    def pause_writing(self) -> None:
        self._feed(ordering.WritePaused())

    def resume_writing(self) -> None:
        self._feed(ordering.WriteResumed())

    # ---- carrying out the machine's commands ---------------------------------------------------

    def _feed(self, event: ordering.Event) -> None:
        """One event from outside a read (a task, the timer, the transport): its replies in one send."""
        if self._batch is not None:
            self._handle(event)
            return
        self._batch = []
        try:
            self._handle(event)
        finally:
            self._flush_batch()
            self._batch = None

    def _handle(self, event: ordering.Event) -> None:
        if self._broken:
            return
        try:
            for command in self.order.handle(event):  # a Dispatch comes last: answered within it
                _DO[type(command)](self, command)
        except Exception as exc:  # a bug (or a reply too big to frame): this connection ends, not the daemon
            self._broken = True
            self._close(ordering.Close(exc))

    def _dispatch(self, command: ordering.Dispatch) -> None:
        request = command.request
        if request.op == "hello":
            hello = cast(wire.HelloRequest, request.message)
            reply, keep = self.ops.hello(self.caller, request.rid, hello)
            self._handle(ordering.Answered(request, reply, keep))
        else:
            self._handle(ordering.Answered(request, self._call(request)))

    def _dispatch_in_background(self, command: ordering.DispatchInBackground) -> None:
        self._start(self._call_async, command.request)

    def _send(self, command: ordering.Send) -> None:
        replies = command.replies
        frame = wire.encode(replies[0]) if len(replies) == 1 else b"".join(map(wire.encode, replies))
        if self._batch is not None:
            self._batch.append(frame)
            return
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(frame)

    def _flush_batch(self) -> None:
        batch = self._batch
        if batch:
            self._batch = []
            if self._transport is not None and not self._transport.is_closing():
                self._transport.write(batch[0] if len(batch) == 1 else b"".join(batch))

    def _start_ack_timer(self, command: ordering.StartAckTimer) -> None:
        if self._ack_timer is None:
            loop = asyncio.get_running_loop()
            self._ack_timer = loop.call_later(command.seconds, self._ack_timer_fired)

    def _ack_timer_fired(self) -> None:
        self._ack_timer = None
        self._feed(ordering.AckTimerFired())

    def _cancel_ack_timer(self, command: ordering.CancelAckTimer) -> None:
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None

    def _pause_reading(self, command: ordering.PauseReading) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def _resume_reading(self, command: ordering.ResumeReading) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def _await_room(self, command: ordering.AwaitRoom) -> None:
        self.peers.stalled.add(self)
        self._start(self._room, command.request)

    def _unstalled(self, command: ordering.Unstalled) -> None:
        self.peers.stalled.discard(self)
        self.peers.progressed()

    def _await_barrier(self, command: ordering.AwaitBarrier) -> None:
        self._lane_wait = command
        self._lane_wakeup.set()

    def _await_indexed(self, command: ordering.AwaitIndexed) -> None:
        self._lane_wait = command
        self._lane_wakeup.set()

    def _close(self, command: ordering.Close) -> None:
        """Read and answer nothing more; close once the replies already earned are sent. With an
        error (a ProtocolError, a bug), `run` raises it when the connection is closed."""
        if self._failure is None:
            self._failure = command.error
        self.peers.progressed()
        if self._transport is not None:
            self._flush_batch()
            self._transport.close()

    # ---- the connection's tasks ----------------------------------------------------------------

    def _start(self, work: Callable[[Any], Any], argument: Any) -> None:
        assert self._tg is not None
        self._tg.start_soon(work, argument)

    async def _room(self, request: Request) -> None:
        await self.observations.wait_for_room()
        self._feed(ordering.RoomMade())

    async def _run_lane(self) -> None:
        """The lane's waits, one at a time (only the lane's head waits), in one task for the
        connection's life: waking it costs less than starting a task per wait."""
        while True:
            await self._lane_wakeup.wait()
            self._lane_wakeup = anyio.Event()
            wait, self._lane_wait = self._lane_wait, None
            if isinstance(wait, ordering.AwaitBarrier):
                # What other connections had been sent when the request arrived (and, after a restart,
                # what reconnecting shims replay): read it; the machine then waits until it is indexed.
                await self.peers.settle()
                marks = cast("list[tuple[Peer, int]]", list(wait.marks))  # what `barrier` gave the machine
                await self.peers.wait([*marks, *self.peers.barrier(self)])
                self._feed(ordering.BarrierPassed())
            elif wait is not None:
                await self.observations.wait_indexed(wait.upto)
                self._feed(ordering.Indexed())

    def _call(self, request: Request) -> dict[str, Any]:
        """Run one op synchronously; every failure becomes an error reply, never a dropped daemon."""
        op, rid = request.op, request.rid
        handler = self.ops.handlers.get(op)
        try:
            if handler is None:
                return wire.error_reply(rid, "unknown_op", f"op {op!r} is not served")
            return handler(self.caller, rid, request.message)
        except RefusedError as exc:
            return wire.error_reply(rid, exc.code, str(exc))
        except OSError as exc:
            log.error("%s failed: %s", op, exc)
            why = exc.strerror or exc
            return wire.error_reply(rid, "io", f"bouncerd could not record the request: {why}")
        except Exception:
            log.exception("%s failed", op)
            return wire.error_reply(rid, "internal", f"bouncerd failed on {op}; see its log")

    async def _call_async(self, request: Request) -> None:
        """Run one op of `async_handlers`, then answer, with the error replies of `_call`."""
        op, rid = request.op, request.rid
        try:
            reply = await self.ops.async_handlers[op](self.caller, rid, request.message)
        except RefusedError as exc:
            reply = wire.error_reply(rid, exc.code, str(exc))
        except OSError as exc:
            log.error("%s failed: %s", op, exc)
            why = exc.strerror or exc
            reply = wire.error_reply(rid, "io", f"bouncerd could not record the request: {why}")
        except Exception:
            log.exception("%s failed", op)
            reply = wire.error_reply(rid, "internal", f"bouncerd failed on {op}; see its log")
        self._feed(ordering.Answered(request, reply))


_DO: Final[Mapping[type, Callable[[Connection, Any], None]]] = {
    ordering.Dispatch: Connection._dispatch,
    ordering.DispatchInBackground: Connection._dispatch_in_background,
    ordering.Send: Connection._send,
    ordering.StartAckTimer: Connection._start_ack_timer,
    ordering.CancelAckTimer: Connection._cancel_ack_timer,
    ordering.PauseReading: Connection._pause_reading,
    ordering.ResumeReading: Connection._resume_reading,
    ordering.AwaitRoom: Connection._await_room,
    ordering.Unstalled: Connection._unstalled,
    ordering.AwaitBarrier: Connection._await_barrier,
    ordering.AwaitIndexed: Connection._await_indexed,
    ordering.Close: Connection._close,
}
