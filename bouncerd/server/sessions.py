"""The sessions registry: which clients and servers are (or were) connected, for `status`.

Theory of operation
-------------------
A session is one MCP client process, named by the key its shims compute (docs/how-it-works.md,
"Sessions"). A shim's ``hello`` registers its session and its server (name + upstream argv, the same
identity pins use) and counts one live connection; its disconnect counts it off. A session whose
last shim has gone stays listed with its servers shown as not connected; archiving old sessions comes
with the engine's session lifecycle. Nothing here decides anything or needs to survive a restart: it is what
`bouncerctl status` shows, rebuilt as shims reconnect.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bouncerd.core.model import ServerIdentity


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
    ) -> tuple[Session, ServerEntry | None]:
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = Session(key=key, started=now)
        if client_pid is not None:
            session.client_pid = client_pid
        if identity is None:
            return session, None
        entry = session.servers.get(identity.key)
        if entry is None:
            entry = session.servers[identity.key] = ServerEntry(identity)
        entry.connections += 1
        entry.shim_pid = shim_pid
        entry.connected_since = now
        return session, entry

    def disconnect(self, entry: ServerEntry | None) -> None:
        if entry is not None and entry.connections > 0:
            entry.connections -= 1

    def public(self) -> list[dict[str, Any]]:
        return [s.public() for s in self.sessions.values()]
