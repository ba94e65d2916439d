"""One peer connection: frames in, ordered dispatch to the daemon's ops, replies out (any order).

Theory of operation
-------------------
A connection reads frames with `bouncerd.server.reader.FrameReader` (wire's framing and decoder, one
msgpack decode per frame, a 10 MB observation read into place without intermediate copies) and
validates each with `wire.check_request`. The first request must be ``hello``; anything else, or any
`ProtocolError` (garbage, an oversized frame, an unknown op or field), ends the connection without
further replies. A bad peer costs its own connection, never the daemon.

Order. Requests are pipelined (each carries an id; replies may come back in any order), but state
changes happen in arrival order:

- ``observe`` (and a hook's ``observe_text``) is handled inline in the read loop: journalled, then
  acked. So observations of one connection are accepted in the order they arrived, and an ack is
  never delayed by a verdict that is waiting.
- ``client``, ``tools``, ``verdict`` and a hook's ``check_builtin`` go through the connection's
  *lane*. A verdict (or a ``check_builtin``) must first wait until every observation accepted before
  it arrived (on any connection) has been indexed for taint.
  While a request waits in the lane, later lane requests queue behind it (so a ``tools`` cannot
  overtake a ``verdict`` that arrived first); when the lane is empty and nothing needs waiting, the
  request is handled inline, which is the common case and costs no task switch.
- ``status`` and ``ping`` change nothing and are answered inline.

Replies share one send lock, because inline replies and lane replies interleave.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from bouncerd import wire
from bouncerd.errors import BouncerError, ProtocolError
from bouncerd.server.peer import PeerCred
from bouncerd.server.reader import FrameReader
from bouncerd.server.sessions import ServerEntry, Session

if TYPE_CHECKING:
    from bouncerd.server.daemon import Daemon

log = logging.getLogger("bouncerd")

_LANE_OPS = frozenset({"client", "tools", "verdict", "check_builtin"})
# Lane ops that decide on taint: they wait until every observation accepted before them is indexed.
_WAITS_FOR_TAINT = frozenset({"verdict", "check_builtin"})
# Ops that accept an output: journalled and acked inline, in arrival order, with backpressure.
_OBSERVE_OPS = frozenset({"observe", "observe_text"})


class RefusedError(BouncerError):
    """A well-formed request this connection may not make (e.g. a verdict before a shim hello)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Connection:
    def __init__(self, daemon: Daemon, stream: anyio.abc.SocketStream, cred: PeerCred) -> None:
        self.daemon = daemon
        self.stream = stream
        self.cred = cred
        self.role: str | None = None
        self.instance: str | None = None
        self.session: Session | None = None
        self.server: ServerEntry | None = None
        self.policy_path: str | None = None  # the shim's --policy, layered over the user's policy
        self._reader = FrameReader(stream.extra(anyio.abc.SocketAttribute.raw_socket))  # noqa: S610 - anyio
        self._send_lock = anyio.Lock()
        self._lane: deque[tuple[str, int, dict[str, Any], int]] = deque()
        self._lane_wakeup: anyio.Event | None = None
        self._lane_idle: anyio.Event | None = None  # set when the lane empties, if someone waits for it

    # ---- what ops may ask of the connection ---------------------------------------------------

    def require_session(self) -> Session:
        if self.session is None:
            raise RefusedError("no_session", "this op needs a session: send hello with a session key")
        return self.session

    def require_server(self) -> tuple[Session, ServerEntry]:
        session = self.require_session()
        if self.server is None:
            raise RefusedError("no_server", "this op needs a server: send hello with role shim and a server")
        return session, self.server

    # ---- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        first = await self._next_message()
        if first is None:
            return
        op, rid = wire.check_request(first)
        if op != "hello":
            raise ProtocolError(f"the first request must be hello, not {op}")
        reply, keep = self.daemon.hello(self, rid, first)
        await self._send(reply)
        if not keep:
            return
        failure: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._run_lane)
            try:
                await self._read_loop()
                if self._lane:  # the peer finished sending; it may still read the replies
                    self._lane_idle = anyio.Event()
                    await self._lane_idle.wait()
            except Exception as exc:  # re-raised below, outside the task group, unwrapped
                failure = exc
            tg.cancel_scope.cancel()  # the peer broke the protocol or is gone: queued work has no reader
        if failure is not None:
            raise failure

    async def _read_loop(self) -> None:
        observations = self.daemon.observations
        while (msg := await self._next_message()) is not None:
            op, rid = wire.check_request(msg)
            if op in _OBSERVE_OPS:
                await observations.wait_for_room()
                await self._send(self._call(op, rid, msg))
            elif op in _LANE_OPS:
                target = observations.accepted_upto
                waits = op in _WAITS_FOR_TAINT and self.daemon.needs_taint(self, op, msg)
                if not self._lane and (not waits or observations.indexed_upto >= target):
                    await self._send(self._call(op, rid, msg))
                else:
                    self._lane.append((op, rid, msg, target))
                    if self._lane_wakeup is not None:
                        self._lane_wakeup.set()
            elif op == "hello":
                raise ProtocolError("hello sent twice")
            else:
                await self._send(self._call(op, rid, msg))

    async def _run_lane(self) -> None:
        observations = self.daemon.observations
        while True:
            if not self._lane:
                self._lane_wakeup = anyio.Event()
                await self._lane_wakeup.wait()
                self._lane_wakeup = None
                continue
            op, rid, msg, target = self._lane[0]
            if op in _WAITS_FOR_TAINT and self.daemon.needs_taint(self, op, msg):
                await observations.wait_indexed(target)
            reply = self._call(op, rid, msg)
            self._lane.popleft()  # only now: until its state change is done, later requests queue
            try:
                await self._send(reply)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
                self._lane.clear()  # the peer is gone: nobody reads the rest
            if not self._lane and self._lane_idle is not None:
                self._lane_idle.set()

    def _call(self, op: str, rid: int, msg: dict[str, Any]) -> dict[str, Any]:
        """Run one op synchronously; every failure becomes an error reply, never a dropped daemon."""
        daemon = self.daemon
        try:
            if op == "observe":
                return daemon.observe(self, rid, msg)
            if op == "verdict":
                return daemon.verdict(self, rid, msg)
            if op == "tools":
                return daemon.tools(self, rid, msg)
            if op == "client":
                return daemon.client(self, rid, msg)
            if op == "status":
                return daemon.status(rid)
            if op == "reload":
                return daemon.reload_op(rid)
            if op == "pins":
                return daemon.pins(rid, msg)
            if op == "pins_accept":
                return daemon.pins_accept(rid, msg)
            if op == "vouch":
                return daemon.vouch(self, rid, msg)
            if op == "observe_text":
                return daemon.observe_text(self, rid, msg)
            if op == "check_builtin":
                return daemon.check_builtin(self, rid, msg)
            if op == "answer":
                return daemon.approvals.answer(self, rid, msg)
            if op == "pending":
                return daemon.approvals.pending(self, rid)
            if op == "approve_show":
                return daemon.approvals.approve_show(self, rid, msg)
            if op == "approve":
                return daemon.approvals.approve(self, rid, msg)
            if op == "ping":
                return wire.reply(rid)
            return wire.error_reply(rid, "unknown_op", f"op {op!r} is not served")
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

    # ---- framing ------------------------------------------------------------------------------

    async def _next_message(self) -> dict[str, Any] | None:
        return await self._reader.next_message()

    async def _send(self, message: dict[str, Any]) -> None:
        frame = wire.encode(message)
        async with self._send_lock:
            await self.stream.send(frame)
