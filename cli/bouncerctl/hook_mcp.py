"""The hook path for MCP tools no shim fronts: Claude Code's ``mcp__<server>__<tool>`` calls.

Theory of operation
-------------------
Claude Code fires PreToolUse and PostToolUse for every MCP tool, remote ones included, and for the
servers an organisation hands out in managed settings, which no wrapper can front. For a server that
runs behind `bouncer-shim` the shim already gates every call and records every output, so the hook
says nothing (a call is never gated twice). For any other server the hook does what the shim would:

- PreToolUse: the daemon's verdict on the call (op ``verdict``, as a shim asks it), mapped onto the
  hook's answers: deny as ``permissionDecision: deny`` (the reason goes to the model), ask as
  ``permissionDecision: ask`` (Claude Code's own prompt asks the person), allow as nothing (Claude
  Code's own permission rules still apply). If the daemon cannot be reached or answers an error,
  the call is denied, as a network tool's is.
- PostToolUse: the ``tool_response`` is recorded as the server's untrusted output (op ``observe``),
  before Claude sees it, so an address planted in it is known to every later verdict of the session.

How. The hook connects with role ``hook`` (so the daemon picks the session from its ancestors, as
for every hook event) *and* a server: the Claude Code server name, with the upstream
``[HOOK_UPSTREAM, TOOL]``. Whether a shim fronts the server is read from the daemon's ``status``
first: a connected server of that name in the hook's session whose upstream is not the hook's own.

Pins. A hook never sees the server's tool list, only the calls, so there are no description pins
on this path: each tool is listed to the daemon as the hook sees it (its name) under an identity of
its own, which pins it on first sight; a rug pull in a description cannot be seen from here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from bouncerd.core.builtin_tools import MCP_PREFIX

if TYPE_CHECKING:
    from bouncerd.client import Client

# The upstream a hook names for the server it speaks for (the tool is the second element).
HOOK_UPSTREAM: Final = "claude-code-hook"

ConnectAs = Callable[..., "Client"]


def split_name(tool_name: str) -> tuple[str, str] | None:
    """``mcp__<server>__<tool>`` as (server, tool); None if it is not that shape."""
    if not tool_name.startswith(MCP_PREFIX):
        return None
    server, sep, tool = tool_name[len(MCP_PREFIX) :].partition("__")
    if not sep or not server or not tool:
        return None
    return server, tool


def shimmed(status: Mapping[str, Any], keys: Sequence[str], server: str) -> bool:
    """Whether a shim for `server` is connected in the session the hook speaks for.

    The session is chosen as the daemon chooses a hook's (`bouncerd.server.hooks.session_for_hook`):
    the first of `keys` that is a session with a server connected."""
    sessions = {s.get("key"): s for s in status.get("sessions") or [] if isinstance(s, dict)}
    for key in keys:
        found = sessions.get(key)
        if found is None or not any(srv.get("connected") for srv in found.get("servers") or []):
            continue
        return any(
            srv.get("name") == server
            and srv.get("connected")
            and (srv.get("upstream") or [None])[0] != HOOK_UPSTREAM
            for srv in found.get("servers") or []
        )
    return False


def _fronted(connect: ConnectAs, keys: Sequence[str], server: str) -> bool:
    with connect() as client:
        return shimmed(client.request("status"), keys, server)


def _as_server(connect: ConnectAs, server: str, tool: str) -> Client:
    return connect(server=server, upstream=[HOOK_UPSTREAM, tool])


def verdict(
    connect: ConnectAs,
    keys: Sequence[str],
    server: str,
    tool: str,
    tool_input: Mapping[str, Any],
    call_id: Any,
) -> dict[str, Any] | None:
    """The daemon's verdict reply on one call, or None when a shim fronts the server."""
    if _fronted(connect, keys, server):
        return None
    with _as_server(connect, server, tool) as client:
        client.request("tools", tools=[{"name": tool, "inputSchema": {"type": "object"}}])
        return client.request(
            "verdict",
            tool=tool,
            arguments=dict(tool_input),
            request_id=call_id if isinstance(call_id, str) else None,
        )


def observe(
    connect: ConnectAs, keys: Sequence[str], server: str, tool: str, response: Any, call_id: Any
) -> bool:
    """Record one output as the server's untrusted output; False when a shim fronts the server."""
    if _fronted(connect, keys, server):
        return False
    result = response if isinstance(response, dict) and "content" in response else _as_result(response)
    line = json.dumps({"jsonrpc": "2.0", "id": call_id, "result": result}, ensure_ascii=False)
    with _as_server(connect, server, tool) as client:
        client.request(
            "observe",
            seq=0,  # one observation per connection: nothing to deduplicate
            kind="result",
            method="tools/call",
            tool=tool,
            request_id=call_id if isinstance(call_id, str) else None,
            payload=line.encode("utf-8"),
        )
    return True


def _as_result(response: Any) -> dict[str, Any]:
    """A tool response Claude Code gives as text or a list of content blocks, as a tools/call result."""
    if isinstance(response, list) and all(isinstance(block, dict) for block in response):
        return {"content": response}
    text = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}]}
