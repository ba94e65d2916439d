"""The engine's journaled store: all state the daemon keeps, changed only by events.

Theory of operation
-------------------
Everything that must survive a crash (pins, taint, budget counts, approvals, vouched destinations)
changes only through *events*: plain dicts that msgpack and JSON can carry. A method that changes
state returns the events it produced *after* applying them; the daemon appends them to its journal
before it answers the shim. On start the daemon replays the journal through `apply`, and ends up in
the same state. `snapshot` returns a minimal event list that rebuilds the current state (compaction).

`apply` is a table from event name to handler (`APPLY`), as h11's transition table is: an event
with no row is an illegal move and raises, so a journal written by a newer bouncerd is refused
rather than half applied.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Protocol, TypeVar

from bouncerd.core import approvals as ap
from bouncerd.core import callnotes, names, onetimecode, pins, taint
from bouncerd.core.events import (
    ApprovalEvent,
    AttemptEvent,
    BlindEvent,
    EngineEvent,
    ListedEvent,
    SessionEndedEvent,
    TaintEvent,
    TaintEvictedEvent,
    TaintExpiredEvent,
    UnpinEvent,
    VouchEvent,
)
from bouncerd.core.pins import ServerPins, seen_event

Event = EngineEvent
_E = TypeVar("_E", bound=EngineEvent)

USER_SCOPE = "*user*"  # the taint scope key when taint_scope is `user`

# Taint records per snapshot event: at ~100 bytes a record this keeps an event near 10 MB, far below
# the journal frame limit (wire.MAX_FRAME_BYTES) even for an index at its full size.
SNAPSHOT_TAINT_CHUNK = 100_000


class TaintView(Protocol):
    """What a decision reads of one taint scope (`taint.TaintIndex` is one)."""

    def lookup(self, destination: str) -> taint.Hit | None: ...
    def seen_exactly(self, destination: str) -> bool: ...
    def host_hit(self, destination: str) -> taint.Hit | None: ...
    def key_hit(self, key: str) -> taint.Hit | None: ...


@dataclass
class SessionState:
    attempts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (server, tool) -> calls tried
    vouched: set[str] = field(default_factory=set)  # narrow keys of destinations the user typed
    listed: dict[str, str] = field(default_factory=dict)  # wide key -> the directory tool that listed it


class Store:
    def __init__(self) -> None:
        self.servers: dict[str, ServerPins] = {}
        self.sessions: dict[str, SessionState] = {}
        self.taint: dict[str, taint.TaintIndex] = {}  # scope key -> index
        self.approvals = ap.Approvals()
        self.blind: set[str] = set()  # taint scopes where an output could not be indexed
        self.notes = callnotes.CallNotes()  # recent calls, to read their outputs (not journalled)
        self.codes = onetimecode.Pending()  # acts a one-time code may confirm (not journalled)
        self.names = names.NameLedger()  # plain names seen in output (not journalled: unseen is asked)

    # ---- events -------------------------------------------------------------------------------

    def apply(self, ev: EngineEvent) -> None:
        """Change the state by one event; an event with no row in `APPLY` raises `ValueError`."""
        handler = APPLY.get(ev["ev"])
        if handler is None:
            raise ValueError(f"unknown engine event {ev['ev']!r}")
        handler(self, ev)

    def _emit(self, events: list[_E], ev: _E) -> None:
        self.apply(ev)
        events.append(ev)

    def snapshot(self, now: float = 0.0) -> list[Event]:
        out: list[Event] = []
        for key, sp in self.servers.items():
            for name, pin in sp.pins.items():
                out.append(pins.pin_snapshot(key, name, pin))
            for name, seen in sp.seen.items():
                out.append(seen_event(key, name, seen))
            out.extend(pins.window_snapshot(key, sp))
        for scope, index in self.taint.items():
            records = [taint.TokenRecord(tok, prov) for tok, prov in index.items()]
            for i in range(0, len(records), SNAPSHOT_TAINT_CHUNK):
                chunk = records[i : i + SNAPSHOT_TAINT_CHUNK]
                out.append(TaintEvent(ev="taint", scope=scope, data=taint.encode_records(chunk)))
            evicted = index.export_evicted()
            if evicted is not None:
                out.append(TaintEvictedEvent(ev="taint_evicted", scope=scope, filter=evicted))
        for sid, state in self.sessions.items():
            for (server, tool), n in state.attempts.items():
                out.append(AttemptEvent(ev="attempt", session=sid, server=server, tool=tool, n=n))
            if state.vouched:
                out.append(VouchEvent(ev="vouch", session=sid, keys=sorted(state.vouched)))
            by_source: dict[str, list[str]] = {}
            for key, source in state.listed.items():
                by_source.setdefault(source, []).append(key)
            for source, keys in by_source.items():
                out.append(ListedEvent(ev="listed", session=sid, source=source, keys=keys))
        out.extend(BlindEvent(ev="blind", scope=scope) for scope in sorted(self.blind))
        out.extend(self.approvals.snapshot(now))
        return out

    # ---- the life of a session ----------------------------------------------------------------

    def session_keys(self) -> set[str]:
        """Sessions with state that ends with them (budgets, vouched destinations, approvals)."""
        return set(self.sessions) | self.approvals.session_keys()

    def end_session(self, key: str) -> list[Event]:
        """The session's last shim left a grace period ago (the daemon's clock): drop what lasts a
        session. Its taint stays for `taint_retention` (`expire_taint`): a client that resumes under
        the same key (BOUNCER_SESSION), or `taint_scope: user`, still finds it."""
        events: list[Event] = []
        self._emit(events, SessionEndedEvent(ev="session_ended", session=key))
        return events

    def expire_taint(self, now: float, retention: float) -> list[Event]:
        """Forget taint first seen more than `retention` seconds before `now`, in every scope."""
        cutoff = now - retention
        events: list[Event] = []
        for scope in [s for s, index in self.taint.items() if index.oldest < cutoff]:
            self._emit(events, TaintExpiredEvent(ev="taint_expired", scope=scope, before=cutoff))
        return events

    def _drop_if_spent(self, scope: str) -> None:
        """A scope whose session ended and whose taint all expired is forgotten whole (its blind mark
        with it: the outputs it was about are past retention too)."""
        index = self.taint.get(scope)
        if index is None or len(index) or index.evicted or _scope_session(scope) in self.session_keys():
            return
        del self.taint[scope]
        self.blind.discard(scope)

    def session(self, key: str) -> SessionState:
        state = self.sessions.get(key)
        if state is None:
            state = self.sessions[key] = SessionState()
        return state

    def index(self, scope: str) -> taint.TaintIndex:
        idx = self.taint.get(scope)
        if idx is None:
            idx = self.taint[scope] = taint.TaintIndex()
        return idx


def _scope_session(scope: str) -> str | None:
    """The session a taint scope belongs to (None for the user scope)."""
    return None if scope == USER_SCOPE else scope.split("\x00", 1)[0]


def _server(store: Store, ev: Any) -> ServerPins:
    return store.servers.setdefault(ev["server"], ServerPins())


def _unpin(store: Store, ev: UnpinEvent) -> None:
    _server(store, ev).pins.pop(ev["tool"], None)


def _attempt(store: Store, ev: AttemptEvent) -> None:
    store.session(ev["session"]).attempts[(ev["server"], ev["tool"])] += ev.get("n", 1)


def _listed(store: Store, ev: ListedEvent) -> None:
    listed = store.session(ev["session"]).listed
    for key in ev["keys"]:
        listed.setdefault(key, ev["source"])


def _session_ended(store: Store, ev: SessionEndedEvent) -> None:
    key = ev["session"]
    store.sessions.pop(key, None)
    store.notes.forget(key)
    store.codes.forget(key)
    store.approvals.end_session(key)
    for scope in [s for s in store.taint if _scope_session(s) == key]:
        store._drop_if_spent(scope)
    for scope in [s for s in store.names.scopes() if _scope_session(s) == key]:
        store.names.forget(scope)
    store.names.forget_session(key)


def _taint_expired(store: Store, ev: TaintExpiredEvent) -> None:
    index = store.taint.get(ev["scope"])
    if index is not None:
        index.expire_before(ev["before"])
        store._drop_if_spent(ev["scope"])


def _approvals(store: Store, ev: ApprovalEvent) -> None:
    store.approvals.apply(ev)


# What each event does to the store: one row per event name of `events.EngineEvent` (a test checks
# that every name has one). The handler's argument is the event of that name.
APPLY: Final[Mapping[str, Callable[[Store, Any], object]]] = MappingProxyType(
    {
        "pin": lambda store, ev: _server(store, ev).apply_pin(ev),
        "pin_seen": lambda store, ev: _server(store, ev).apply_seen(ev),
        "unpin": _unpin,
        "pin_window": lambda store, ev: _server(store, ev).apply_window(ev),
        "taint": lambda store, ev: store.index(ev["scope"]).add(taint.decode_records(ev["data"])),
        "taint_evicted": lambda store, ev: store.index(ev["scope"]).import_evicted(ev["filter"]),
        "attempt": _attempt,
        "blind": lambda store, ev: store.blind.add(ev["scope"]),
        "vouch": lambda store, ev: store.session(ev["session"]).vouched.update(ev["keys"]),
        "listed": _listed,
        "session_ended": _session_ended,
        "taint_expired": _taint_expired,
        "approval_pending": _approvals,
        "approval_closed": _approvals,
        "grant": _approvals,
        "grant_used": _approvals,
        "nonce_used": _approvals,
        "wrong_code": _approvals,
    }
)
