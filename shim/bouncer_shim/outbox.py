"""Server output on its way to the client, sans I/O: numbered, observed, released in order, replayed.

Theory of operation
-------------------
Every upstream line is an `Output`. `Outbox.emit` gives it the next sequence number; with the link
up (or syncing) it is sent to bouncerd as an ``observe`` (the raw bytes) and queued until that is
acknowledged (`acked`). A ``tools/list`` result is also sent as a ``tools`` op and waits for that ack
too. Observations are pipelined: nothing waits for one ack before sending the next, but outputs are
released to the client strictly in arrival order, each only once all its acks are in, so the client
never sees what the daemon has not recorded. Lines the shim made itself (`emit_made`) are not
observed; they wait their turn behind what came before.

While the link is CONNECTING outputs are queued unobserved; `resend` (on connect) observes them, and
first the ones kept for replay. When the link is `lost`, everything queued is released without its
acks, and what the daemon had not acknowledged is kept for replay; while it is DOWN each new output
is released at once and kept too. Replay is bounded (MAX_REPLAY_BYTES, MAX_REPLAY_MESSAGES): past the
bound, or when the daemon refuses an observation (`lose_observations`), `observations_lost` is set
for good, and the relay refuses every call from then on: the daemon has missed something and could
judge a call on a partial record.

Released lines become `SendClient` actions, in order; observations go through a `Requester`.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

from bouncer_shim.actions import Action, Diagnose, SendClient
from bouncer_shim.lines import MAX_LINE_BYTES
from bouncer_shim.sync import LinkState, Requester

# Outputs released while the daemon is down are kept for replay up to these bounds: one maximal line,
# or many small ones. A daemon away through more output than this has missed something for good.
MAX_REPLAY_BYTES: Final = MAX_LINE_BYTES
MAX_REPLAY_MESSAGES: Final = 10_000


class Output:
    """One upstream line on its way to the client."""

    __slots__ = ("kind", "line", "method", "request_id", "sent", "seq", "tool", "waiting")

    def __init__(self, line: bytes) -> None:
        self.line = line
        self.seq: int | None = None  # None: made by the shim, nothing to observe
        self.kind = "other"
        self.method: str | None = None
        self.tool: str | None = None
        self.request_id: str | int | None = None
        self.waiting = 0  # acks still needed before release
        self.sent = False  # observe sent on the current connection


class Outbox:
    __slots__ = (
        "_actions",
        "_next_seq",
        "_queue",
        "_replay",
        "_replay_bytes",
        "_request",
        "observations_lost",
        "unreleased_bytes",
    )

    def __init__(self, request: Requester, actions: list[Action]) -> None:
        self._request = request
        self._actions = actions  # where released lines (and diagnostics) go
        self._next_seq = 0
        self._queue: deque[Output] = deque()
        self.unreleased_bytes = 0  # queued bytes (the pump stops reading upstream past a bound)
        self._replay: dict[int, Output] = {}  # seq -> output released while down, not yet acked
        self._replay_bytes = 0
        self.observations_lost = False

    @property
    def is_flushed(self) -> bool:
        """Nothing is waiting to be released."""
        return not self._queue

    @property
    def replay_count(self) -> int:
        return len(self._replay)

    def emit(self, out: Output, tools: list[Any] | None, link: LinkState) -> None:
        """A new upstream line (`tools`: the tools of a tools/list result, sent as a ``tools`` op)."""
        out.seq = self._next_seq
        self._next_seq += 1
        if link is LinkState.DOWN:
            self._actions.append(SendClient(out.line))
            self._keep_for_replay(out)
            return
        self._queue.append(out)
        self.unreleased_bytes += len(out.line)
        if link is LinkState.CONNECTING:
            return
        out.waiting = 1
        if tools is not None and self._request("tools", out, {"tools": tools}):
            out.waiting += 1
        self._observe(out)

    def emit_made(self, line: bytes) -> None:
        """A line the shim made in the server's stead: not observed, released in its turn."""
        made = Output(line)
        made.sent = True
        self._queue.append(made)
        self.unreleased_bytes += len(line)
        self._release()

    def acked(self, out: Output) -> None:
        """The daemon answered a request about `out` (an observe or a tools op)."""
        if out.seq is not None and self._replay.pop(out.seq, None) is not None:
            self._replay_bytes -= len(out.line)
        if out.waiting:
            out.waiting -= 1
        self._release()

    def resend(self) -> None:
        """A new connection: observe what it has not seen (kept for replay first), as sync requests."""
        for out in list(self._replay.values()):  # one that cannot be encoded is acked (popped) at once
            self._observe(out, sync=True)
        for out in self._queue:
            if out.seq is not None and not out.sent:
                out.waiting = 1
                self._observe(out, sync=True)

    def lost(self) -> None:
        """The link is gone: release everything queued; keep what was not acknowledged for replay."""
        for out in self._queue:
            if out.seq is not None and (out.waiting or not out.sent):  # not acknowledged
                self._keep_for_replay(out)
            self._actions.append(SendClient(out.line))
        self._queue.clear()
        self.unreleased_bytes = 0

    def lose_observations(self) -> None:
        if not self.observations_lost:
            self.observations_lost = True
            self._actions.append(
                Diagnose("observations were lost; every tool call will be refused from now on")
            )

    def _observe(self, out: Output, *, sync: bool = False) -> None:
        out.sent = True
        fields = {
            "seq": out.seq,
            "kind": out.kind,
            "method": out.method,
            "tool": out.tool,
            "request_id": out.request_id,
            "payload": out.line,
        }
        if not self._request("observe", out, fields, sync=sync):
            self._actions.append(Diagnose("an observation could not be encoded for bouncerd"))
            self.lose_observations()
            self.acked(out)

    def _release(self) -> None:
        queue = self._queue
        while queue and queue[0].waiting == 0 and queue[0].sent:
            out = queue.popleft()
            self.unreleased_bytes -= len(out.line)
            self._actions.append(SendClient(out.line))

    def _keep_for_replay(self, out: Output) -> None:
        if out.seq is None or out.seq in self._replay:
            return
        if (
            self.observations_lost
            or len(self._replay) >= MAX_REPLAY_MESSAGES
            or self._replay_bytes + len(out.line) > MAX_REPLAY_BYTES
        ):
            self.lose_observations()
            return
        out.waiting = 1
        out.sent = False
        self._replay[out.seq] = out
        self._replay_bytes += len(out.line)
