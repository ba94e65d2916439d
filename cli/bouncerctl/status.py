"""``bouncerctl status``: is the daemon up, what is in force, what waits for a person, what it decided.

It opens with one health line, like ``systemctl status``: a dot coloured green (nothing waits for a
person), yellow (an ask waits, or a tool needs review) or red (the last policy reload failed), the
daemon's version, pid and uptime, then the live sessions, the policy's state, the asks waiting and
the tools to review. Then: the daemon's socket and state directory, the audit log and its chain head
(the hash of the last record: note it somewhere else, and ``bouncerctl audit verify --head HASH``
later proves no record was cut from the end), the policy in force (its file, whether the last reload
failed, the settings), tools whose pins need review (``new`` or ``changed``: calls to them are
refused), the open approval codes, then each live session, named by its client (the clientInfo of
the MCP initialize) and the client's pid, with its servers and verdict counts. Sessions whose servers
have all disconnected have ended: they are counted in one line, not listed. Before the sessions,
every server a known client config starts past the gate is named NOT PROTECTED, with the command
that would protect it (`bouncerctl.unprotected`; read from the configs on this machine).

``--json`` prints the replies as they are, every session included (for scripts); without it the text
is fitted to the terminal's width (`bouncerctl.term`: long values wrap under themselves, never cut).
Exit 3 with one line on stderr when no daemon answers. The pins and approvals come from their own
ops on the same connection; a daemon that does not offer one is shown as "unknown", not an error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from bouncerctl import term
from bouncerctl.common import DaemonNotRunning, RequestFailed, connect, local_clock
from bouncerd import wire
from bouncerd.client import Client
from bouncerd.errors import DaemonRequestError, DaemonUnavailableError

# Tools needing review and open codes named on one line before the rest are only counted.
MAX_NAMED = 6


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the daemon's reply as JSON.")
def status(as_json: bool) -> None:
    """Show the daemon, the policy in force, what needs review, its sessions and verdict counts."""
    with connect() as client:
        try:
            reply = client.request("status")
        except DaemonUnavailableError as exc:
            raise DaemonNotRunning(str(exc)) from None
        except DaemonRequestError as exc:
            raise RequestFailed(f"bouncerd refused status: {exc.message}") from None
        review = _optional(client, "pins", "servers")
        pending = _optional(client, "pending", "pending") if "pending" in wire.OPS else None
    from bouncerctl import unprotected

    body = {
        "daemon": reply.get("daemon", {}),
        "policy": reply.get("policy"),
        "pins_to_review": None if review is None else _to_review(review),
        "pending": pending,
        "sessions": reply.get("sessions", []),
        "unprotected": [vars(item) for item in unprotected.find(os.environ, Path.cwd())],
    }
    if as_json:
        import json  # only here: the start-up of a plain `status` is what a person waits for

        click.echo(json.dumps(body, indent=2, ensure_ascii=False))
    else:
        term.echo(render(body, term.columns()))


def _optional(client: Client, op: str, key: str) -> list[dict[str, Any]] | None:
    """The list under `key` in the reply to `op`, or None if this daemon does not answer it."""
    try:
        value = client.request(op).get(key)
    except DaemonRequestError:
        return None
    except DaemonUnavailableError as exc:
        raise DaemonNotRunning(str(exc)) from None
    return value if isinstance(value, list) else None


def _to_review(servers: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [
        {"server": str(srv.get("name")), "tool": str(tool.get("name")), "state": str(tool.get("state"))}
        for srv in servers
        for tool in srv.get("tools") or []
        if tool.get("state") in ("new", "changed")
    ]


def render(body: dict[str, Any], width: int | None = None) -> str:
    """The health line, the daemon's rows, then each live session; ended sessions are counted."""
    daemon = body["daemon"]
    sessions = body["sessions"]
    live = [s for s in sessions if is_live(s)]
    ended = len(sessions) - len(live)
    lines = [*health_line(body, live=len(live), ended=ended, width=width), ""]
    rows = [
        ["socket", str(daemon.get("socket", ""))],
        ["state", str(daemon.get("state_dir", ""))],
        ["audit", str(daemon.get("audit", ""))],
    ]
    if daemon.get("head"):
        written = daemon.get("records")
        rows.append(["head", f"{daemon['head']}  ({written} records written since start)"])
    rows += _policy_rows(body.get("policy"))
    rows += _fleet_rows(body.get("policy"), daemon.get("export"))
    rows.append(["review", _review_text(body.get("pins_to_review"))])
    rows.append(["approvals", _pending_text(body.get("pending"))])
    lines += term.table(rows, width)
    if body.get("unprotected"):
        lines.append("")
    for item in body.get("unprotected") or []:
        from bouncerctl.unprotected import Unprotected

        lines += term.wrap(Unprotected(**item).line(), width)
    for session in live:
        lines += ["", *_session_lines(session, width)]
    if not sessions:
        lines += ["", "no sessions yet"]
    elif ended:
        summary = (
            f"{ended} ended session{'s' if ended != 1 else ''} (no server connected; --json lists them): "
            "a client that started its servers and left, as a health check like `claude mcp list` does"
        )
        lines += ["", *term.wrap(summary, width)]
    return "\n".join(lines)


def is_live(session: dict[str, Any]) -> bool:
    """A session with a server still connected; one whose shims have all gone has ended."""
    return any(server.get("connected") for server in session.get("servers") or [])


def health_line(body: dict[str, Any], *, live: int, ended: int, width: int | None) -> list[str]:
    """One line, like systemctl's: a coloured dot, the daemon, then what needs a person."""
    daemon = body["daemon"]
    policy = body.get("policy")
    failed = isinstance(policy, dict) and policy.get("state") == "reload failed"
    review = body.get("pins_to_review") or []
    pending = body.get("pending") or []
    parts = [
        f"{live} session{'s' if live != 1 else ''}" + (f" ({ended} ended)" if ended else ""),
        "policy " + ("RELOAD FAILED" if failed else "loaded" if isinstance(policy, dict) else "unknown"),
    ]
    if pending:
        parts.append(f"{len(pending)} ask{'s' if len(pending) != 1 else ''} waiting")
    if review:
        parts.append(f"{len(review)} tool{'s' if len(review) != 1 else ''} to review")
    colour = "red" if failed else "yellow" if pending or review else "green"
    head = (
        f"{term.style('●', fg=colour, bold=True)} bouncerd {daemon.get('version', '?')} "
        f"{term.style('active', fg=colour, bold=True)}, pid {daemon.get('pid', '?')}, "
        f"up {format_duration(float(daemon.get('uptime') or 0))}"
    )
    return term.wrap_parts([head, *parts], width)


# Managed rules named on the status line; `status --json` lists them all.
MANAGED_KEYS_SHOWN = 6


def _policy_rows(policy: Any) -> list[list[str]]:
    if not isinstance(policy, dict):
        return [["policy", "unknown (this daemon does not say)"]]
    path = str(policy.get("user_policy", ""))
    present = policy.get("user_policy_present")
    source = path if present else f"{path} (absent: built-in packs and defaults)"
    if policy.get("state") == "reload failed":
        error = str(policy.get("reload_error") or "").splitlines()
        state = term.style("RELOAD FAILED", fg="red", bold=True) + ", the earlier policy is still in force: "
        state += error[0] if error else "?"
        failed_at = (policy.get("reload_failure") or {}).get("at")
        if isinstance(failed_at, int | float):
            state += f" (at {local_clock(failed_at)})"
    else:
        state = "loaded"
    settings = policy.get("settings") or {}
    shown = ", ".join(f"{k} {v}{'s' if k == 'approval_timeout' else ''}" for k, v in settings.items())
    return [["policy", f"{source}  [{state}]"], ["settings", shown or "-"]]


def _fleet_rows(policy: Any, export: Any) -> list[list[str]]:
    """The administrator's managed policy (which rules it decides) and audit export (copies lost)."""
    rows: list[list[str]] = []
    if isinstance(policy, dict) and policy.get("managed_policy_present"):
        keys = [str(k) for k in policy.get("managed_rules") or []]
        shown = ", ".join(keys[:MANAGED_KEYS_SHOWN]) + (
            f", … ({len(keys)} in all)" if len(keys) > MANAGED_KEYS_SHOWN else ""
        )
        rows.append(
            [
                "managed",
                f"{policy.get('managed_policy')}: {shown or 'no rules'} (a user policy cannot loosen these)",
            ]
        )
    if isinstance(export, dict):
        parts = []
        for target in export.get("targets") or []:
            lost = int(target.get("dropped") or 0) + int(target.get("failed") or 0)
            state = f"{target.get('sent', 0)} sent" + (
                term.style(f", {lost} lost", fg="yellow") if lost else ""
            )
            parts.append(
                f"{target.get('target')} {state}" + (f" ({target['error']})" if target.get("error") else "")
            )
        rows.append(["export", "; ".join(parts) or "configured, no target"])
    return rows


def _review_text(items: Any) -> str:
    if items is None:
        return "unknown (this daemon does not list pins)"
    if not items:
        return "no tool needs review"
    named = ", ".join(f"{i['server']}/{i['tool']} ({i['state']})" for i in items[:MAX_NAMED])
    more = f" and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else ""
    return f"{len(items)} tool(s) refused until reviewed: {named}{more}; see bouncerctl pins show"


def _pending_text(codes: Any) -> str:
    if codes is None:
        return "unknown (this daemon has no pending op)"
    if not codes:
        return "none waiting"
    named = ", ".join(
        f"{c.get('code')} {c.get('server')}/{c.get('tool')}"
        + (f" to {c['destination']}" if c.get("destination") else "")
        + f" (expires in {format_duration(float(c.get('expires_in') or 0))})"
        for c in codes[:MAX_NAMED]
    )
    more = f" and {len(codes) - MAX_NAMED} more" if len(codes) > MAX_NAMED else ""
    return f"{len(codes)} waiting: {named}{more}; see bouncerctl pending"


def session_name(session: dict[str, Any]) -> str:
    """A session as a person knows it: its client's name and version, and the client's pid."""
    client = session.get("client") or {}
    who = (
        " ".join(str(part) for part in (client.get("name"), client.get("version")) if part)
        or "unknown client"
    )
    if session.get("client_pid"):
        who += f", pid {session['client_pid']}"
    if client.get("protocol"):
        who += f" (protocol {client['protocol']})"
    return who


def _session_lines(session: dict[str, Any], width: int | None) -> list[str]:
    counts = session.get("counts") or {}
    verdicts = "  ".join(f"{kind} {counts.get(kind, 0)}" for kind in ("allow", "deny", "ask"))
    name = term.style(session_name(session), bold=True)
    lines = [*term.fit(name, width), *term.fit(f"  {verdicts}  (session {session.get('key', '')})", width)]
    servers = session.get("servers") or []
    if servers:
        rows = [["SERVER", "STATE", "TOOLS", "SHIM PID", "UPSTREAM"]]
        for server in servers:
            tools = server.get("tools")
            rows.append(
                [
                    str(server.get("name", "")),
                    "connected" if server.get("connected") else "gone",
                    "-" if tools is None else str(tools),
                    str(server.get("shim_pid") or "-"),
                    _command(server.get("upstream") or []),
                ]
            )
        lines += term.table(rows, width, indent="  ", right={2, 3})
    return lines


def _command(argv: list[str]) -> str:
    import shlex  # only for sessions that have servers

    return shlex.join(argv)


def format_duration(seconds: float) -> str:
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"
