"""The daemon's side of client hooks: whose session a hook speaks for, the outputs of the client's own
tools, and the verdict on its own network tools.

Theory of operation
-------------------
A client hook (`bouncerctl hook claude-code`) is a short-lived process the client starts for each
event, through a shell. It connects with role ``hook`` and makes one request:

- ``vouch`` (UserPromptSubmit, served by the daemon's `vouch`): destinations the person typed.
- ``observe_text`` (PostToolUse of a tool that is not an MCP tool): the tool's output, recorded as
  untrusted exactly like an upstream output of a shim: `ObservationIndex.accept` journals it before the
  reply, and the indexer adds its taint in arrival order, under the server name
  `builtin_tools.CLIENT_SERVER`. A verdict that arrives later, on any connection, waits for it. A tool
  the policy marks ``untrusted_output: false`` (under ``servers: claude-code: tools:``) is not recorded.
- ``check_builtin`` (PreToolUse of WebFetch or Bash): `builtin_tools.decide` over the engine, after
  the taint of every output accepted before it is indexed (the connection's lane waits, as for
  ``verdict``), audited like any verdict.

Which session. The hook's hello carries ``session`` (``BOUNCER_SESSION``, or the key of its nearest
ancestor that is not a shell or a wrapper such as ``env``/``timeout``: the client) and ``candidates``:
the keys of its ancestors from the nearest up to and including that one. The first candidate that
is a known session (one where a shim connected, or with journalled state) wins; if none is known yet,
``session`` does, and the client's shims will connect under the same key, since their parent is the
client. The walk stops at the client on purpose: a client started by another client's shell (an
agent running `claude -p "..."`) must never reach the outer client's session, or the inner prompt,
written by the outer agent, would vouch destinations for the outer agent.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

from bouncerd import wire
from bouncerd.core import builtin_tools
from bouncerd.core.approvals import arguments_digest
from bouncerd.core.model import ServerIdentity

if TYPE_CHECKING:
    from bouncerd.server.connection import Connection
    from bouncerd.server.daemon import Daemon

# The hook sends at most this many ancestor keys. A client runs hooks through one shell and perhaps a
# wrapper or two; eight bounds what a peer can make the daemon look up.
MAX_CANDIDATES: Final = 8

CLIENT_IDENTITY: Final = ServerIdentity(builtin_tools.CLIENT_SERVER, ())


def session_for_hook(daemon: Daemon, fallback: str | None, candidates: Any) -> str | None:
    """The session a hook's hello names: the first known candidate, else its own key."""
    if not isinstance(candidates, list):
        return fallback
    keys = [c for c in candidates[:MAX_CANDIDATES] if isinstance(c, str) and c]
    for key in keys:
        known = daemon.registry.sessions.get(key)
        if known is not None and known.servers:
            return key
    for key in keys:
        if key in daemon.engine.sessions:
            return key
    return fallback or (keys[-1] if keys else None)


def observe_text(daemon: Daemon, conn: Connection, rid: int, msg: dict[str, Any]) -> dict[str, Any]:
    session = conn.require_session()
    tool = msg["tool"]
    if daemon.engine.output_is_trusted(CLIENT_IDENTITY, tool):
        return wire.reply(rid, recorded=False)
    request = {
        "seq": 0,  # a hook connection makes one request: there is nothing to deduplicate
        "kind": "result",
        "method": "tools/call",
        "tool": tool,
        "request_id": msg.get("request_id"),
        "payload": msg["text"].encode("utf-8"),
    }
    daemon.observations.accept(
        session=session.key,
        server=builtin_tools.CLIENT_SERVER,
        instance=None,
        request=request,
        now=time.time(),
    )
    daemon.maybe_compact()
    return wire.reply(rid, recorded=True)


def check_builtin(daemon: Daemon, conn: Connection, rid: int, msg: dict[str, Any]) -> dict[str, Any]:
    session = conn.require_session()
    tool, tool_input = msg["tool"], msg["input"]
    now = time.time()
    verdict = builtin_tools.decide(daemon.engine, session.key, tool, tool_input)
    provenance = verdict.provenance.as_dict() if verdict.provenance is not None else None
    record: dict[str, Any] = {
        "session": session.key,
        "client": session.client.name,
        "server": builtin_tools.CLIENT_SERVER,
        "request_id": msg.get("request_id"),
        "tool": tool,
        "verdict": verdict.verdict,
        "rule": verdict.rule,
        "reason": verdict.reason,
        "destination": verdict.destination,
        "provenance": provenance,
    }
    if daemon.policy.base.settings.audit_arguments == "digest":
        record["arguments_sha256"] = arguments_digest(tool_input)
    else:
        record["arguments"] = tool_input
    daemon.audit.append(record, now)
    session.counts[verdict.verdict] += 1
    return wire.verdict_reply(
        rid,
        verdict=verdict.verdict,
        rule=verdict.rule,
        reason=verdict.reason,
        destination=verdict.destination,
        provenance=provenance,
    )
