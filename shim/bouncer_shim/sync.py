"""The daemon link as the relay sees it, sans I/O: its state, its requests in flight, its resync.

Theory of operation
-------------------
Every request to bouncerd goes through `LinkSync.request`: it gets the next id, becomes one
`SendDaemon` frame, and is remembered (`Pending`: the op, what it is about, whether it is part of the
resync) until `replied` hands its reply's entry back to the relay. Requests are pipelined: none waits
for another's reply, and replies may come in any order. A request msgpack cannot carry sends nothing
and uses no id. Every request but a verdict and a ``fastpath`` should be answered within
milliseconds (a ``fastpath`` request waits until the set changes): `awaiting_acks` tells the pump
whether one is outstanding. `tools_sent` counts the tools lists reported (a fast-path set is good
for one count), `tools_unanswered` those not answered yet. A verdict may wait in the daemon for
earlier outputs to be indexed, but not without bound: each is given `VERDICT_WAIT_SECONDS` from the
first turn of the pump after it was sent (`verdicts_overdue`, the clock passed in), and the pump
gives up on a daemon that lets one pass (the connection is dropped, so the verdict can never arrive
later and release the call).

The link has four states (`LinkState`):

- CONNECTING (start-up, perhaps while autostarting a daemon): nothing is sent.
- SYNCING (`connected`): a new connection knows nothing, so it is told again what the relay told the
  last one: hello, the client's info and the last tools list (`remember_tools`, all its pages); the
  relay adds every observation not yet acknowledged. All of those are *sync* requests, and the link
  is UP once each has been answered (`sync_replied`, `check_synced`), so the daemon knows everything
  the client has seen before it judges a call.
- UP: verdicts are requested as calls come.
- DOWN (`lost`): the requests in flight are forgotten (their replies will never come) and returned,
  so the relay can refuse the calls that waited on them.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Mapping
from typing import Any, Final, Protocol

from bouncer_shim.actions import Action, SendDaemon, daemon_frame

# Tools remembered from the last tools/list (all its pages) to resend after a reconnect.
MAX_REMEMBERED_TOOLS: Final = 10_000

# How long a verdict may take. The daemon answers in milliseconds, or in seconds when the verdict
# waits for a large output to be indexed or for restarted shims to replay theirs (2.5 s); the same
# bound as for every other reply (pump.DAEMON_ACK_TIMEOUT_SECONDS), well inside an MCP client's own
# request timeout, so a person is told the daemon is not answering before the client gives up.
VERDICT_WAIT_SECONDS: Final = 10.0


# Requests whose replies may take long: a verdict may wait for a person, a fastpath request waits
# in the daemon until the set changes. The others should be answered within milliseconds.
_LONG_OPS: Final = frozenset({"verdict", "fastpath"})

# Requests whose replies only acknowledge: nothing waits on them but the shim's own bookkeeping (an
# output kept for replay, a record kept until bouncerd has it). While these are the only replies in
# flight (besides a parked ``fastpath`` request), the pump need not be woken for them (`wake_for_replies`).
_QUIET_OPS: Final = frozenset({"observe", "forwarded"})


class LinkState(enum.Enum):
    CONNECTING = "connecting"
    SYNCING = "syncing"
    UP = "up"
    DOWN = "down"


class Requester(Protocol):
    """`LinkSync.request`, for the machines that ask bouncerd for something."""

    def __call__(self, op: str, target: object, fields: Mapping[str, Any], *, sync: bool = False) -> bool: ...


class Pending:
    """A request to the daemon awaiting its reply."""

    __slots__ = ("op", "rid", "sync", "target")

    def __init__(self, op: str, target: object, sync: bool, rid: int = -1) -> None:
        self.op = op
        self.target = target  # what the reply is about (a held call, an output), or None
        self.sync = sync  # part of the after-connect resend that verdicts wait for
        self.rid = rid


class LinkSync:
    __slots__ = (
        "_acks_pending",
        "_actions",
        "_hello",
        "_next_rid",
        "_parked",
        "_pending",
        "_quiet",
        "_sync_left",
        "_tools",
        "_unstamped",
        "_verdict_dues",
        "_verdicts",
        "state",
        "tools_sent",
        "tools_unanswered",
    )

    def __init__(self, hello: Mapping[str, Any], actions: list[Action]) -> None:
        self._actions = actions  # where SendDaemon frames go (the relay's action list)
        self._hello = dict(hello)
        self.state = LinkState.CONNECTING
        self._tools: list[Any] | None = None  # the last tools list, to resend after a reconnect
        self._next_rid = 0
        self._pending: dict[int, Pending] = {}
        self.tools_sent = 0  # tools lists reported, ever (a fast-path set is only good for one count)
        self.tools_unanswered = 0  # tools lists reported on this connection and not answered yet
        self._acks_pending = 0  # entries of _pending that are not verdicts
        self._verdicts = 0  # entries of _pending that are verdicts
        self._quiet = 0  # entries of _pending whose op is in _QUIET_OPS
        self._parked = 0  # entries of _pending that are fastpath requests
        self._sync_left = 0  # sync requests not yet answered
        self._unstamped: list[int] = []  # verdicts sent since the last `verdicts_overdue`
        self._verdict_dues: deque[tuple[float, int]] = deque()  # (due, rid) in the order sent

    @property
    def awaiting_acks(self) -> bool:
        """Whether a request other than a verdict awaits the daemon's reply."""
        return self._acks_pending > 0

    @property
    def awaiting_verdict(self) -> bool:
        """Whether a verdict request awaits the daemon's reply."""
        return self._verdicts > 0

    @property
    def wake_for_replies(self) -> bool:
        """Whether the pump should wake for the daemon's next reply: unless every request in flight
        is an acknowledgement nothing waits on (`_QUIET_OPS`) or a parked ``fastpath`` request, and
        no resync is under way (calls wait for it). Then the pump reads the replies when it next
        wakes for something else, before it handles it."""
        quiet = self._quiet
        return quiet == 0 or self._sync_left > 0 or len(self._pending) - quiet - self._parked > 0

    def request(
        self, op: str, target: object, fields: Mapping[str, Any], *, sync: bool = False, lazy: bool = False
    ) -> bool:
        """Send op `op`; its reply's entry carries `target`. False if msgpack cannot carry it. A `lazy`
        frame may wait for the next one (`SendDaemon.lazy`)."""
        rid = self._next_rid
        frame = daemon_frame({"op": op, "id": rid, **fields})  # wire.request's message, built once
        if frame is None:
            return False
        self._next_rid += 1
        self._pending[rid] = Pending(op, target, sync, rid)
        if op not in _LONG_OPS:
            self._acks_pending += 1
        if op in _QUIET_OPS:
            self._quiet += 1
        elif op == "fastpath":
            self._parked += 1
        elif op == "verdict":
            self._verdicts += 1
            self._unstamped.append(rid)
        if op == "tools":
            self.tools_sent += 1
            self.tools_unanswered += 1
        if sync:
            self._sync_left += 1
        self._actions.append(SendDaemon(frame, lazy=lazy))
        return True

    def replied(self, rid: Any) -> Pending | None:
        """The request a reply with id `rid` answers (forgotten now), or None if it answers nothing."""
        entry = self._pending.pop(rid, None) if isinstance(rid, int) else None
        if entry is not None and entry.op not in _LONG_OPS:
            self._acks_pending -= 1
        if entry is not None and entry.op == "tools":
            self.tools_unanswered -= 1
        if entry is not None and entry.op in _QUIET_OPS:
            self._quiet -= 1
        elif entry is not None and entry.op == "fastpath":
            self._parked -= 1
        elif entry is not None and entry.op == "verdict":
            self._verdicts -= 1
        return entry

    def verdicts_overdue(self, now: float) -> bool:
        """Whether a verdict has waited `VERDICT_WAIT_SECONDS`. Verdicts sent since the last call are
        timed from `now` (the pump calls this every turn, and `verdict_deadline` makes that turn come)."""
        if not self._verdicts:  # none in flight: whatever is listed was answered
            self._unstamped.clear()
            self._verdict_dues.clear()
            return False
        for rid in self._unstamped:
            self._verdict_dues.append((now + VERDICT_WAIT_SECONDS, rid))
        self._unstamped.clear()
        due = self._oldest_due()
        return due is not None and due <= now

    def verdict_deadline(self) -> float | None:
        """When the oldest verdict waiting is overdue (0 for one not yet timed), or None."""
        if not self._verdicts:
            return None
        return 0.0 if self._unstamped else self._oldest_due()

    def _oldest_due(self) -> float | None:
        dues = self._verdict_dues
        while dues and dues[0][1] not in self._pending:  # answered (ids are never reused)
            dues.popleft()
        return dues[0][0] if dues else None

    def remember_tools(self, tools: list[Any], paged: bool) -> list[Any]:
        """A tools/list result: a later page (`paged`) adds to the list, a first page replaces it. The
        list so far is returned: bouncerd is told every page listed, not only the last one."""
        self._tools = [*self._tools, *tools] if paged and self._tools is not None else list(tools)
        del self._tools[MAX_REMEMBERED_TOOLS:]
        return self._tools

    def connected(self, client: Mapping[str, Any] | None) -> None:
        """A new connection: start the resync with hello, the client's info and the tools list."""
        self.state = LinkState.SYNCING
        self._sync_left = 0
        self.request("hello", None, self._hello, sync=True)
        if client is not None:
            self.request("client", None, client, sync=True)
        if self._tools is not None:
            self.request("tools", None, {"tools": self._tools}, sync=True)

    def sync_replied(self) -> bool:
        """A sync request was answered; True if that made the link UP."""
        self._sync_left -= 1
        return self.check_synced()

    def check_synced(self) -> bool:
        """Whether the resync just finished (the link is UP now: request the waiting verdicts)."""
        if self.state is LinkState.SYNCING and self._sync_left == 0:
            self.state = LinkState.UP
            return True
        return False

    def lost(self) -> list[Pending]:
        """The connection is gone: the link is DOWN; the requests that were in flight."""
        pending, self._pending = self._pending, {}
        self.state = LinkState.DOWN
        self._acks_pending = 0
        self._verdicts = self._quiet = self._parked = 0
        self.tools_unanswered = 0
        self._sync_left = 0
        self._unstamped.clear()
        self._verdict_dues.clear()
        return list(pending.values())
