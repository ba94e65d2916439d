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
- ``check_builtin`` (PreToolUse of WebFetch or Bash): `Engine.decide_builtin` over the engine, after
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
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from bouncerd import wire
from bouncerd.core import builtin_tools
from bouncerd.core.engine import Engine
from bouncerd.core.model import ServerIdentity
from bouncerd.server import verdicts
from bouncerd.server.caller import Caller
from bouncerd.server.sessions import Session

# The hook sends at most this many ancestor keys. A client runs hooks through one shell and perhaps a
# wrapper or two; eight bounds what a peer can make the daemon look up.
MAX_CANDIDATES: Final = 8

CLIENT_IDENTITY: Final = ServerIdentity(builtin_tools.CLIENT_SERVER, ())


class Accept(Protocol):
    """`ObservationIndex.accept`: journal one output and queue it for indexing."""

    def __call__(
        self, *, session: str, server: str, instance: str | None, request: Mapping[str, Any], now: float
    ) -> int: ...


def session_for_hook(
    sessions: Mapping[str, Session], engine: Engine, fallback: str | None, candidates: Any
) -> str | None:
    """The session a hook's hello names: the first known candidate, else its own key."""
    if not isinstance(candidates, list):
        return fallback
    keys = [c for c in candidates[:MAX_CANDIDATES] if isinstance(c, str) and c]
    for key in keys:
        known = sessions.get(key)
        if known is not None and known.servers:
            return key
    for key in keys:
        if key in engine.sessions:
            return key
    return fallback or (keys[-1] if keys else None)


class HookOps:
    """Ops ``observe_text`` and ``check_builtin``. A verdict leaves through `path` (the daemon's one
    `VerdictPath`); `compact` lets the journal compact after an output is recorded."""

    def __init__(
        self,
        engine: Engine,
        accept: Accept,
        path: verdicts.VerdictPath,
        compact: Callable[[], None],
    ) -> None:
        self.engine = engine
        self.accept = accept
        self.path = path
        self.compact = compact

    def observe_text(self, caller: Caller, rid: int, msg: wire.ObserveTextRequest) -> dict[str, Any]:
        session = caller.require_session()
        tool = msg["tool"]
        if self.engine.output_is_trusted(CLIENT_IDENTITY, tool):
            return wire.reply(rid, recorded=False)
        request = {
            "seq": 0,  # a hook connection makes one request: there is nothing to deduplicate
            "kind": "result",
            "method": "tools/call",
            "tool": tool,
            "request_id": msg.get("request_id"),
            "payload": msg["text"].encode("utf-8"),
        }
        self.accept(
            session=session.key,
            server=builtin_tools.CLIENT_SERVER,
            instance=None,
            request=request,
            now=time.time(),
        )
        self.compact()
        return wire.reply(rid, recorded=True)

    def check_builtin(self, caller: Caller, rid: int, msg: wire.CheckBuiltinRequest) -> dict[str, Any]:
        session = caller.require_session()
        tool, tool_input = msg["tool"], msg["input"]
        now = time.time()
        verdict = self.engine.decide_builtin(session.key, tool, tool_input)
        judged = verdicts.Judged(
            session, builtin_tools.CLIENT_SERVER, msg.get("request_id"), tool, verdict, tool_input
        )
        return self.path.deliver(rid, judged, now, verdict.events)
