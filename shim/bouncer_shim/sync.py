"""The daemon link as the relay sees it, sans I/O: its state, its requests in flight, its resync.

Theory of operation
-------------------
Every request to bouncerd goes through `LinkSync.request`: it gets the next id, becomes one
`SendDaemon` frame, and is remembered (`Pending`: the op, what it is about, whether it is part of the
resync) until `replied` hands its reply's entry back to the relay. Requests are pipelined: none waits
for another's reply, and replies may come in any order. A request msgpack cannot carry sends nothing
and uses no id. Every request but a verdict and a ``fastpath`` should be answered within
milliseconds (a verdict may wait for a person, a ``fastpath`` request waits until the set changes):
`awaiting_acks` tells the pump whether one is outstanding. `tools_sent` counts the tools lists
reported (a fast-path set is good for one count), `tools_unanswered` those not answered yet.

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
from collections.abc import Mapping
from typing import Any, Final, Protocol

from bouncer_shim.actions import Action, SendDaemon, daemon_frame
from bouncerd import wire

# Tools remembered from the last tools/list (all its pages) to resend after a reconnect.
MAX_REMEMBERED_TOOLS: Final = 10_000


# Requests whose replies may take long: a verdict may wait for a person, a fastpath request waits
# in the daemon until the set changes. The others should be answered within milliseconds.
_LONG_OPS: Final = frozenset({"verdict", "fastpath"})


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

    __slots__ = ("op", "sync", "target")

    def __init__(self, op: str, target: object, sync: bool) -> None:
        self.op = op
        self.target = target  # what the reply is about (a held call, an output), or None
        self.sync = sync  # part of the after-connect resend that verdicts wait for


class LinkSync:
    __slots__ = (
        "_acks_pending",
        "_actions",
        "_hello",
        "_next_rid",
        "_pending",
        "_sync_left",
        "_tools",
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
        self._sync_left = 0  # sync requests not yet answered

    @property
    def awaiting_acks(self) -> bool:
        """Whether a request other than a verdict awaits the daemon's reply."""
        return self._acks_pending > 0

    def request(self, op: str, target: object, fields: Mapping[str, Any], *, sync: bool = False) -> bool:
        """Send op `op`; its reply's entry carries `target`. False if msgpack cannot carry it."""
        rid = self._next_rid
        frame = daemon_frame(wire.request(op, rid, **fields))
        if frame is None:
            return False
        self._next_rid += 1
        self._pending[rid] = Pending(op, target, sync)
        if op not in _LONG_OPS:
            self._acks_pending += 1
        if op == "tools":
            self.tools_sent += 1
            self.tools_unanswered += 1
        if sync:
            self._sync_left += 1
        self._actions.append(SendDaemon(frame))
        return True

    def replied(self, rid: Any) -> Pending | None:
        """The request a reply with id `rid` answers (forgotten now), or None if it answers nothing."""
        entry = self._pending.pop(rid, None) if isinstance(rid, int) else None
        if entry is not None and entry.op not in _LONG_OPS:
            self._acks_pending -= 1
        if entry is not None and entry.op == "tools":
            self.tools_unanswered -= 1
        return entry

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
        self.tools_unanswered = 0
        self._sync_left = 0
        return list(pending.values())
