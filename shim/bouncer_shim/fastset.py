"""Calls the shim may forward before it asks, sans I/O: the set bouncerd granted, and the records owed.

Theory of operation
-------------------
bouncerd computes, for this shim's server, the tools whose verdict is a plain allow whatever the
history (bouncerd/core/fastpath.py) and grants them with an epoch in the reply to a ``fastpath``
request. `allows` says whether a call is covered: the tool is in the set and every argument it
carries is one the set names for it. The relay then forwards the call at once and `record`s it:
a ``forwarded`` op with the epoch, kept (`unacked`) until bouncerd answers it and sent again, as a
sync request, on every new connection (`resend`), so a daemon that dies before reading it still
gets it. Nothing waits for that reply.

The set is asked for once the link is UP and the daemon said ``fast_path`` in its hello reply;
after a grant the shim asks again at once, holding its epoch, and that request waits in the daemon
until something changes: its reply is a withdrawal (then the shim drops the set and asks afresh) or
a new grant. The relay drops the set itself (`drop`) whenever the server's tools may have changed
(a tools/list result, ``notifications/tools/list_changed``) and while the link is not up
(`link_lost`), and asks again only when every tools list it reported has been answered: a grant is
then computed from a state that has seen the list. Replies to requests other than the latest are
ignored. While bouncerd is behind (BEHIND_SECONDS without an answer, or MAX_UNACKED_RECORDS records
unanswered), calls take the round trip again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bouncer_shim.jsonrpc import id_json, wire_id
from bouncer_shim.sync import LinkState, LinkSync

# Calls stop taking the fast path while bouncerd is behind: it has answered nothing for
# BEHIND_SECONDS while records or outputs wait (the pump tells, `FastSet.behind`), or this many
# records wait unanswered. An agent's calls, even a burst of them, never come near either: bouncerd
# answers within milliseconds. A call that takes the round trip then waits behind the backlog on its
# connection, so no shim runs ahead of a busy bouncerd. Without this, a hundred shims forwarding reads
# on a loaded machine left bouncerd so far behind that its answers took over
# DAEMON_ACK_TIMEOUT_SECONDS (pump.py): the shims reconnected and replayed, adding work, and calls
# were refused as unreachable (bench/scale.py).
BEHIND_SECONDS: Final = 0.5
MAX_UNACKED_RECORDS: Final = 64


class Record:
    """The verdict record of one forwarded call, until bouncerd has it."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields


class Ask:
    """A ``fastpath`` request; only the latest one's reply counts."""

    __slots__ = ("listed",)

    def __init__(self, listed: int) -> None:
        self.listed = listed  # tools lists reported before it (all of them answered)


class FastSet:
    __slots__ = (
        "_asking",
        "_epoch",
        "_listed",
        "_next_seq",
        "_sync",
        "_tools",
        "_unacked",
        "behind",
        "supported",
    )

    def __init__(self, sync: LinkSync) -> None:
        self._sync = sync
        self.supported = False  # the daemon's hello reply said it answers fastpath and forwarded
        self._tools: dict[str, frozenset[str]] | None = None
        self._epoch = 0
        self._listed = -1  # the set is good while exactly this many tools lists have been reported
        self._asking: Ask | None = None
        self._next_seq = 0
        self._unacked: dict[int, Record] = {}
        self.behind = False  # bouncerd has answered nothing for BEHIND_SECONDS (set by the pump)

    @property
    def held(self) -> bool:
        return self._tools is not None

    @property
    def unacked(self) -> int:
        return len(self._unacked)

    def allows(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Whether this call may be forwarded before bouncerd is asked."""
        tools = self._tools
        sync = self._sync
        if tools is None or sync.state is not LinkState.UP or sync.tools_sent != self._listed:
            return False  # no set, or the server's tools were reported since it was granted
        if self.behind or len(self._unacked) >= MAX_UNACKED_RECORDS:
            return False  # bouncerd is behind: the round trip waits for it
        names = tools.get(tool)
        return names is not None and all(name in names for name in arguments)

    def record(self, request_id: Any, line: bytes, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Send the record of a call about to be forwarded; False (nothing sent) if it cannot be
        encoded: then the call must take the round trip."""
        fields = {
            "request_id": wire_id(request_id),
            "request_id_json": id_json(request_id, line),
            "tool": tool,
            "arguments": dict(arguments),
            "epoch": self._epoch,
            "seq": self._next_seq,
        }
        record = Record(fields)
        if not self._sync.request("forwarded", record, fields, lazy=True):
            return False
        self._unacked[self._next_seq] = record
        self._next_seq += 1
        return True

    def recorded(self, record: Record) -> None:
        self._unacked.pop(record.fields["seq"], None)

    def resend(self) -> None:
        """A new connection: every record not yet answered goes again, before any verdict."""
        for record in self._unacked.values():
            self._sync.request("forwarded", record, record.fields, sync=True)

    # ---- the set -------------------------------------------------------------------------------

    def link_up(self) -> None:
        self._ask(None)

    def link_lost(self) -> None:
        self.drop()

    def drop(self) -> None:
        """The server's tools may have changed (or the link is gone): stop using the set; a new one
        is asked for once bouncerd has answered every tools list reported (`listing_answered`)."""
        self._tools = None
        self._asking = None

    def listing_answered(self) -> None:
        """A tools list was answered: ask for a set computed after it, unless one is being asked."""
        if self._tools is not None and self._sync.tools_sent != self._listed:
            self.drop()
        if self._asking is None and self._tools is None:
            self._ask(None)

    def replied(self, ask: Ask, ok: bool, message: Mapping[str, Any]) -> str | None:
        """A reply to a fastpath request; a diagnostic for the relay, or None."""
        if ask is not self._asking:
            return None  # superseded, or the set was dropped since
        self._asking = None
        tools = message.get("tools")
        epoch = message.get("epoch")
        if not ok:
            self._tools = None
            return "bouncerd refused the fast-path request; every call waits for its verdict"
        if tools is None or not isinstance(epoch, int):
            self._tools = None
            self._ask(None)
            return None
        parsed = _parse_tools(tools)
        if parsed is None:
            self._tools = None
            return "bouncerd sent a fast-path set this shim cannot read; every call waits for its verdict"
        if ask.listed != self._sync.tools_sent:  # computed before a list it has not answered yet
            self._tools = None
            self._ask(None)
            return None
        self._tools, self._epoch, self._listed = parsed, epoch, ask.listed
        self._ask(epoch)
        return None

    def _ask(self, holding: int | None) -> None:
        sync = self._sync
        if not self.supported or sync.state is not LinkState.UP or sync.tools_unanswered:
            return
        ask = Ask(sync.tools_sent)
        if sync.request("fastpath", ask, {"holding": holding}):
            self._asking = ask


def _parse_tools(tools: Any) -> dict[str, frozenset[str]] | None:
    if not isinstance(tools, dict):
        return None
    out: dict[str, frozenset[str]] = {}
    for name, names in tools.items():
        if not isinstance(name, str) or not isinstance(names, list):
            return None
        if not all(isinstance(n, str) for n in names):
            return None
        out[name] = frozenset(names)
    return out
