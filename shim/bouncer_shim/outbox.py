"""Server output on its way to the client, sans I/O: numbered, observed, released in order, replayed.

Theory of operation
-------------------
Every upstream line is an `Output`. `Outbox.emit` gives it the next sequence number; with the link
up (or syncing) it is sent to bouncerd as an ``observe`` (the raw bytes), and a ``tools/list`` result
also as a ``tools`` op. An output is released to the client, strictly in arrival order, as soon as
its observation is *sent*: the `SendClient` action comes after the `SendDaemon` frame, and the pump
never writes a client line before every daemon frame queued ahead of it is in the kernel (pump.py).
From there the daemon cannot miss it: this connection's later requests are read after it, and a
verdict on any other connection first reads everything already waiting on this one
(bouncerd/server/connection.py; the argument is in docs/how-it-works.md). So a call costs one round
trip to the daemon (its verdict), not two: the acknowledgement of an observation arrives off the
client's path. Until it does the output is kept (`unacked`), because a daemon that dies before
reading it would never have recorded it. Lines the shim made itself (`emit_made`) are not observed;
they wait their turn behind what came before. A daemon that does not say in its hello reply that
it reads other connections before a send (``release_on_write``: one older than this shim, still
running after an upgrade) gets the older order instead: each output waits for its acks
(`release_on_write` False).

While the link is CONNECTING outputs are queued unobserved; `resend` (on connect) observes them, and
first the ones kept for replay. When the link is `lost`, everything queued is released, and what the
daemon had not acknowledged is kept for replay; while it is DOWN each new output is released at once
and kept too. Replay is bounded (MAX_REPLAY_BYTES, MAX_REPLAY_MESSAGES): past the bound, or when the
daemon refuses an observation (`lose_observations`), `observations_lost` is set for good, and the
relay refuses every call from then on: the daemon has missed something and could judge a call on a
partial record.

A daemon that could not *record* an observation (its reply's code is ``io``: a full disk, an I/O
error) has not missed it for good: it said so, and it keeps no part of it (its dedup table is not
advanced). Such an output is kept (`unrecorded`) and observed again every `RERECORD_RETRY_SECONDS`
(`retry_unrecorded`), in sequence order, until the daemon records it; meanwhile, and for any verdict
asked before that, the relay refuses calls saying why. Once every one is recorded, calls are judged
again, in the same shim. Only if a *later* observation was recorded first (space came back between
the two) is the record not whole: the daemon would take the earlier one, sent again, for a duplicate,
so that is a loss for good as above.

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

# An observation the daemon could not record (a full disk) is sent again this often: often enough that
# calls resume within a second of space coming back, seldom enough to cost a full disk nothing.
RERECORD_RETRY_SECONDS: Final = 1.0


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
        self.waiting = 0  # acks (observe, tools) not yet in
        self.sent = False  # observe sent on the current connection: it may be released


class Outbox:
    __slots__ = (
        "_actions",
        "_next_seq",
        "_queue",
        "_replay",
        "_replay_bytes",
        "_request",
        "_unacked",
        "_unrecorded",
        "observations_lost",
        "release_on_write",
        "rerecord_due",
        "unacked_bytes",
        "unreleased_bytes",
    )

    def __init__(self, request: Requester, actions: list[Action]) -> None:
        self._request = request
        self._actions = actions  # where released lines (and diagnostics) go
        self._next_seq = 0
        self._queue: deque[Output] = deque()
        self.unreleased_bytes = 0  # queued bytes (the pump stops reading upstream past a bound)
        self._unacked: dict[int, Output] = {}  # seq -> observed on this connection, not yet acked
        self.unacked_bytes = 0
        self._replay: dict[int, Output] = {}  # seq -> released, to observe on the next connection
        self._replay_bytes = 0
        self.observations_lost = False
        # seq -> output the daemon could not record (not yet sent again, or sent again and not yet
        # acknowledged), and when to send those not in flight again
        self._unrecorded: dict[int, Output] = {}
        self.rerecord_due: float | None = None
        # Whether the daemon judges a send only after reading what other connections sent (its
        # hello reply says so); until it says so, and with one that does not, outputs wait for acks.
        self.release_on_write = False

    @property
    def is_released(self) -> bool:
        """Nothing is waiting to be released."""
        return not self._queue

    @property
    def is_flushed(self) -> bool:
        """Nothing is waiting to be released or acknowledged."""
        return not self._queue and not self._unacked

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
        if tools is not None and self._request("tools", out, {"tools": tools}):
            out.waiting += 1
        self._observe(out)
        self._release()

    def daemon_releases_on_write(self, yes: bool) -> None:
        """What the connection's hello reply said (see the module docstring); outputs waiting only
        for acks go out now if it said yes."""
        self.release_on_write = yes
        self._release()

    def emit_made(self, line: bytes) -> None:
        """A line the shim made in the server's stead: not observed, released in its turn."""
        made = Output(line)
        made.sent = True
        self._queue.append(made)
        self.unreleased_bytes += len(line)
        self._release()

    def acked(self, out: Output) -> None:
        """The daemon answered a request about `out` (an observe or a tools op)."""
        if out.waiting:
            out.waiting -= 1
        if not out.waiting and out.seq is not None and self._unacked.pop(out.seq, None) is not None:
            self.unacked_bytes -= len(out.line)
        if not self.release_on_write:
            self._release()

    def resend(self) -> None:
        """A new connection: observe what it has not seen (kept for replay first), as sync requests."""
        replay, self._replay, self._replay_bytes = self._replay, {}, 0
        for out in replay.values():
            self._observe(out, sync=True)
        for out in self._queue:
            if out.seq is not None and not out.sent:
                self._observe(out, sync=True)
        self._release()

    def lost(self) -> None:
        """The link is gone: release everything queued; keep what was not acknowledged for replay."""
        unacked, self._unacked, self.unacked_bytes = self._unacked, {}, 0
        for out in unacked.values():
            self._keep_for_replay(out)
        unrecorded, self._unrecorded = self._unrecorded, {}  # the next connection replays them first
        for out in unrecorded.values():
            self._keep_for_replay(out)
        for out in self._queue:
            if out.seq is not None and (out.waiting or not out.sent):  # not acknowledged
                self._keep_for_replay(out)
            self._actions.append(SendClient(out.line))
        self._queue.clear()
        self.unreleased_bytes = 0

    @property
    def unrecorded(self) -> int:
        """Outputs the daemon could not record and has not recorded since (calls wait for them)."""
        return len(self._unrecorded)

    def not_recorded(self, out: Output) -> None:
        """The daemon could not record `out`'s observation (a full disk): keep it to send again."""
        if out.seq is None or self.observations_lost:
            return
        if not self._unrecorded:
            self.rerecord_due = None  # timed from the pump's next turn (`retry_unrecorded`)
        self._unrecorded[out.seq] = out
        out.sent = False

    def recorded(self, out: Output) -> None:
        """The daemon recorded `out`'s observation."""
        if out.seq is None or not self._unrecorded:
            return
        if self._unrecorded.pop(out.seq, None) is None and out.seq > min(self._unrecorded):
            # A later output was recorded before an earlier one: the earlier would now be taken for
            # a duplicate. The record has a hole for good.
            self._actions.append(Diagnose("an observation bouncerd could not record was overtaken"))
            self._unrecorded.clear()
            self.lose_observations()

    def retry_unrecorded(self, now: float) -> None:
        """Send again, in order, the observations the daemon could not record, when due."""
        if not self._unrecorded or self.observations_lost:
            return
        if self.rerecord_due is None:
            self.rerecord_due = now + RERECORD_RETRY_SECONDS
            return
        if now < self.rerecord_due:
            return
        self.rerecord_due = now + RERECORD_RETRY_SECONDS
        for out in self._unrecorded.values():
            if not out.sent:
                self._observe(out)

    def lose_observations(self) -> None:
        if not self.observations_lost:
            self.observations_lost = True
            self._actions.append(
                Diagnose("observations were lost; every tool call will be refused from now on")
            )

    def _observe(self, out: Output, *, sync: bool = False) -> None:
        """Send `out`'s observation; it is unacknowledged (kept) until the daemon answers."""
        out.sent = True
        out.waiting += 1
        if out.seq is not None and out.seq not in self._unacked:
            self._unacked[out.seq] = out
            self.unacked_bytes += len(out.line)
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
        while queue and queue[0].sent and (self.release_on_write or queue[0].waiting == 0):
            out = queue.popleft()
            self.unreleased_bytes -= len(out.line)
            self._actions.append(SendClient(out.line))

    def _keep_for_replay(self, out: Output) -> None:
        if out.seq is None or out.seq in self._replay:
            return
        out.waiting = 0
        out.sent = False
        if (
            self.observations_lost
            or len(self._replay) >= MAX_REPLAY_MESSAGES
            or self._replay_bytes + len(out.line) > MAX_REPLAY_BYTES
        ):
            self.lose_observations()
            return
        self._replay[out.seq] = out
        self._replay_bytes += len(out.line)
