"""The sessions registry: which clients and servers are (or were) connected, for `status`.

Theory of operation
-------------------
A session is one MCP client process, named by the key its shims compute (docs/how-it-works.md,
"Sessions"). A shim's ``hello`` registers its session and its server (name + upstream argv, the same
identity pins use) and counts one live connection; its disconnect counts it off. A session whose
last shim has gone stays listed, its servers shown as not connected, for a grace period
(`SESSION_GRACE_SECONDS`); then `ended` names it and the daemon archives it (`Daemon.sweep`: the
engine drops what lasts a session, the audit log keeps a `session.ended` record, the journal is
compacted) and `remove` forgets it here. Sessions the journal knows but no shim has said hello for since
the daemon started are `adopt`ed as idle from the start. Nothing here decides anything or needs to
survive a restart: it is what `bouncerctl status` shows, rebuilt as shims reconnect.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bouncerd.core.auditrecords import SessionEndedRecord
from bouncerd.core.model import ServerIdentity

log = logging.getLogger("bouncerd")

# How long a session outlives its last shim. A client that restarts its servers, or whose shims
# reconnect after a daemon restart, comes back within seconds to a minute and must find its taint,
# budgets and approvals; ten minutes covers that with room, and a day of client runs still ends its
# sessions hours before the next. BOUNCER_SESSION_GRACE_SECONDS overrides it (tests, bench/week.py).
SESSION_GRACE_SECONDS = 600.0
# An override longer than this is a typo: a session that outlives its client by a day is a leak.
MAX_SESSION_GRACE_SECONDS = 86400.0
GRACE_VARIABLE = "BOUNCER_SESSION_GRACE_SECONDS"
# Sessions are checked for their end this often at most; a shorter grace period checks sooner, a
# quarter of it, so a session ends at most a quarter late.
MAX_SWEEP_SECONDS = 60.0
MIN_SWEEP_SECONDS = 0.05


def sweep_interval(grace: float) -> float:
    return min(MAX_SWEEP_SECONDS, max(MIN_SWEEP_SECONDS, grace / 4))


def grace_seconds(environ: Mapping[str, str]) -> float:
    """The grace period: `SESSION_GRACE_SECONDS`, or a valid override (a bad one is logged, not used)."""
    text = environ.get(GRACE_VARIABLE)
    if text is None:
        return SESSION_GRACE_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= MAX_SESSION_GRACE_SECONDS:  # also refuses nan
        log.warning(
            "%s=%r is not a number of seconds from 0 to %g; using %g",
            GRACE_VARIABLE,
            text,
            MAX_SESSION_GRACE_SECONDS,
            SESSION_GRACE_SECONDS,
        )
        return SESSION_GRACE_SECONDS
    return value


@dataclass
class ClientInfo:
    name: str | None = None
    version: str | None = None
    protocol: str | None = None
    capabilities: dict[str, Any] | None = None

    def public(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "protocol": self.protocol}


@dataclass
class ServerEntry:
    identity: ServerIdentity
    tools: int | None = None  # size of the latest tools/list, None before the first
    connections: int = 0
    shim_pid: int | None = None
    connected_since: float | None = None
    client: ClientInfo = field(default_factory=ClientInfo)

    def public(self) -> dict[str, Any]:
        return {
            "name": self.identity.name,
            "upstream": list(self.identity.upstream),
            "tools": self.tools,
            "connected": self.connections > 0,
            "shim_pid": self.shim_pid,
        }


@dataclass
class Session:
    key: str
    started: float
    client: ClientInfo = field(default_factory=ClientInfo)
    servers: dict[str, ServerEntry] = field(default_factory=dict)  # ServerIdentity.key -> entry
    counts: Counter[str] = field(default_factory=Counter)  # verdict kind -> number since daemon start
    client_pid: int | None = None
    idle_since: float | None = None  # when the last live connection left (None while one is up)
    instances: set[str] = field(default_factory=set)  # shim instances seen (forgotten with the session)

    @property
    def connections(self) -> int:
        return sum(s.connections for s in self.servers.values())

    def ended_record(self, grace: float) -> SessionEndedRecord:
        """The audit record of its end: what the session was, before its state is dropped."""
        counts = ", ".join(f"{self.counts.get(k, 0)} {k}" for k in ("allow", "deny", "ask"))
        servers = ", ".join(sorted({s.identity.name for s in self.servers.values()})) or "none"
        return {
            "session": self.key,
            "client": self.client.name,
            "rule": "session.ended",
            "verdict": None,
            "reason": (
                f"session ended {grace:g}s after its last shim left and was archived (servers: "
                f"{servers}; verdicts since the daemon started: {counts}); its taint is kept for the "
                f"policy's taint_retention"
            ),
        }

    def public(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "client": self.client.public(),
            "client_pid": self.client_pid,  # the MCP client process the shims descend from, if known
            "started": self.started,
            "servers": [s.public() for s in self.servers.values()],
            "counts": {kind: self.counts.get(kind, 0) for kind in ("allow", "deny", "ask")},
        }


class Registry:
    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}

    def connect(
        self,
        key: str,
        identity: ServerIdentity | None,
        *,
        shim_pid: int | None,
        client_pid: int | None,
        now: float,
        instance: str | None = None,
    ) -> tuple[Session, ServerEntry | None]:
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = Session(key=key, started=now)
        if client_pid is not None:
            session.client_pid = client_pid
        if instance is not None:
            session.instances.add(instance)
        if identity is None:  # a hook or ctl: it holds no server, so the session idles as before
            if session.idle_since is None and not session.connections:
                session.idle_since = now
            return session, None
        session.idle_since = None
        entry = session.servers.get(identity.key)
        if entry is None:
            entry = session.servers[identity.key] = ServerEntry(identity)
        entry.connections += 1
        entry.shim_pid = shim_pid
        entry.connected_since = now
        return session, entry

    def disconnect(self, session: Session | None, entry: ServerEntry | None, now: float) -> None:
        if entry is not None and entry.connections > 0:
            entry.connections -= 1
        if session is not None and not session.connections and session.idle_since is None:
            session.idle_since = now

    def adopt(self, keys: Iterable[str], now: float) -> None:
        """Sessions the journal holds state for: idle since `now` until a shim of theirs says hello."""
        for key in keys:
            if key not in self.sessions:
                self.sessions[key] = Session(key=key, started=now, idle_since=now)

    def ended(self, now: float, grace: float) -> list[Session]:
        """Sessions with no live connection for `grace` seconds."""
        return [
            s
            for s in self.sessions.values()
            if s.idle_since is not None and not s.connections and now - s.idle_since >= grace
        ]

    def remove(self, key: str) -> None:
        self.sessions.pop(key, None)

    def public(self) -> list[dict[str, Any]]:
        return [s.public() for s in self.sessions.values()]
