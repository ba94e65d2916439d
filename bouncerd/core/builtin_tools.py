"""The client's own tools (Claude Code's WebFetch and Bash): where a call reaches the network, and
whether that destination first arrived in untrusted output.

Theory of operation
-------------------
MCP tools reach the daemon through the shim. A client's *built-in* tools do not: Claude Code fetches
URLs and runs shell commands itself. Its `PreToolUse` hook (`bouncerctl hook claude-code`) asks the
daemon about the ones that reach the network, and this module is the pure part of that answer.

`network_destinations(tool, input)` lists ``(kind, destination)`` pairs:
- ``fetch``: a URL retrieved (WebFetch's `url`; curl/wget/httpie without a body or headers; git
  clone/fetch/pull; URLs handed to programs we do not know). Judged like an MCP fetch sink
  (`fetchgate.fetch_verdict`): a URL exactly as it appeared is fine, a new path on a tainted host is not.
- ``send``: data delivered (curl -d/-F/-T/-H/-u/..., wget --post-*, httpie items, nc/ncat/socat/telnet,
  ssh/scp/sftp/rsync/ftp, git push, mail/sendmail, `/dev/tcp/HOST/PORT`, dig/ping, URLs inside
  `python -c`/`node -e`/... code). Judged like an MCP send (`sinkgate.send_verdict`), except that an
  *unproven* destination is allowed: Claude Code's own permission system asks the person about shell
  commands, and asking twice teaches people to click through.
- ``control``: a command that changes Bouncer itself (`bouncerctl approve|hook|init|...`, anything
  naming the daemon's socket): always denied. A fooled agent must not approve its own held call,
  or feed the daemon a forged prompt that vouches for the attacker's address.
- ``opaque``: a command too long or too deeply nested to read: asked.

Bash commands are read by `bouncerd.core.shell_destinations` (which programs, which options, what
it does not see). WebFetch has one destination, its `url`.

The module imports no more than that reader at load time: the hook imports it to decide, without the
daemon, whether a shell command reaches the network at all (an unreachable daemon then denies it).
The decision (`verdict`; `Engine.decide_builtin` over the engine's state) imports the sink gate
when first called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from bouncerd.core.shell_destinations import Destination, Kind, command_destinations

if TYPE_CHECKING:
    from bouncerd.core.model import Verdict
    from bouncerd.core.sinkgate import Trust
    from bouncerd.core.store import TaintView

__all__ = ["Destination", "Kind", "is_mcp_tool", "network_destinations", "verdict"]

# The server name under which the client's own tools are judged, tainted and audited.
CLIENT_SERVER: Final = "claude-code"
WEB_FETCH: Final = "WebFetch"
BASH: Final = "Bash"
# Tools whose PreToolUse the hook gates. WebSearch sends a query to the search provider, not to a
# destination the page can choose, so it is recorded (PostToolUse) but not gated.
GATED_TOOLS: Final = frozenset({WEB_FETCH, BASH})
MCP_PREFIX: Final = "mcp__"  # MCP tools are named mcp__<server>__<tool>; the shim sees those

# ---- what reaches the network ------------------------------------------------------------------------


def is_mcp_tool(tool_name: str) -> bool:
    return tool_name.startswith(MCP_PREFIX)


def network_destinations(tool_name: str, tool_input: Mapping[str, Any]) -> list[Destination]:
    """Where one call of a built-in tool sends or fetches, in order, without repeats."""
    if tool_name == WEB_FETCH:
        url = tool_input.get("url")
        return [("fetch", url)] if isinstance(url, str) and url.strip() else []
    if tool_name != BASH:
        return []
    command = tool_input.get("command")
    if not isinstance(command, str) or not command.strip():
        return []
    return command_destinations(command)


# ---- the decision ----------------------------------------------------------------------------------------


def verdict(
    tool_name: str,
    tool_input: Mapping[str, Any],
    *,
    trust: Trust,
    taint: TaintView,
    blind: bool = False,
    on_tainted: str = "deny",
    on_tainted_identity: str = "ask",
) -> Verdict:
    """The verdict on one call of a built-in tool: any deny wins, then any ask, else allow. An allow
    means "Bouncer has no objection"; the client's own permission rules still apply."""
    from bouncerd.core import fetchgate, sinkgate
    from bouncerd.core.model import Verdict

    param = "url" if tool_name == WEB_FETCH else "command"
    asks: list[Verdict] = []
    dests = network_destinations(tool_name, tool_input)
    for kind, value in dests:
        if kind == "control":
            return Verdict(
                "deny",
                "builtin.bouncer_control",
                f"{tool_name}: `{value}` changes what Bouncer allows; an agent may not run it. If you "
                "meant to, run it yourself in a terminal",
                destination=value,
                parameter=param,
            )
        if kind == "opaque":
            why = f"{tool_name}: {value} cannot be checked for destinations"
            asks.append(Verdict("ask", "builtin.unreadable", why, parameter=param))
            continue
        if kind == "fetch":
            v = fetchgate.fetch_verdict(
                {param: value},
                tool=tool_name,
                sink_params=(param,),
                trust=trust,
                seen_exactly=taint.seen_exactly,
                host_hit=taint.host_hit,
                key_hit=taint.key_hit,
            )
            if v.verdict == "allow" and blind:
                v = Verdict(
                    "ask",
                    "fetch.blind",
                    "an earlier output of this session could not be checked for planted destinations, "
                    "so fetches need a person",
                    destination=value,
                    parameter=param,
                )
        else:
            v = sinkgate.send_verdict(
                {param: value},
                tool=tool_name,
                sink_params=(param,),
                trust=trust,
                lookup=taint.lookup,
                on_tainted=on_tainted,
                on_tainted_identity=on_tainted_identity,
            )
            if v.rule == "sink.unproven":  # Claude Code's permission prompt asks about the command
                continue
        if v.verdict == "deny":
            return v
        if v.verdict == "ask":
            asks.append(v)
    if asks:
        return asks[0]
    if not dests:
        return Verdict("allow", "builtin.no_destination", f"{tool_name}: this call names no destination")
    return Verdict(
        "allow",
        "builtin.no_tainted_destination",
        f"{tool_name}: no destination of this call first appeared in untrusted output",
        destination=dests[0][1],
        parameter=param,
    )
