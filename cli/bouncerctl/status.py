"""``bouncerctl status``: is the daemon up, which sessions and servers does it see, what did it decide.

``--json`` prints the daemon's ``status`` reply as it is (for scripts); without it the reply is
rendered as aligned text. Exit 3 with one line on stderr when no daemon answers.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

import click

from bouncerctl.common import request


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the daemon's reply as JSON.")
def status(as_json: bool) -> None:
    """Show the daemon, its sessions, their servers and verdict counts."""
    reply = request("status")
    body = {"daemon": reply.get("daemon", {}), "sessions": reply.get("sessions", [])}
    if as_json:
        click.echo(json.dumps(body, indent=2, ensure_ascii=False))
    else:
        click.echo(render(body))


def render(body: dict[str, Any]) -> str:
    daemon = body["daemon"]
    lines = [
        f"bouncerd {daemon.get('version', '?')}   pid {daemon.get('pid', '?')}   "
        f"up {format_duration(float(daemon.get('uptime') or 0))}",
        *_table(
            [
                ["socket", str(daemon.get("socket", ""))],
                ["state", str(daemon.get("state_dir", ""))],
                ["audit", str(daemon.get("audit", ""))],
            ],
            indent="",
        ),
    ]
    sessions = body["sessions"]
    if not sessions:
        lines += ["", "no sessions yet"]
    for session in sessions:
        lines += ["", *_session_lines(session)]
    return "\n".join(lines)


def _session_lines(session: dict[str, Any]) -> list[str]:
    client = session.get("client") or {}
    who = (
        " ".join(str(part) for part in (client.get("name"), client.get("version")) if part)
        or "unknown client"
    )
    if client.get("protocol"):
        who += f" (protocol {client['protocol']})"
    counts = session.get("counts") or {}
    lines = _table(
        [
            ["session", str(session.get("key", ""))],
            ["client", who],
            ["verdicts", "  ".join(f"{kind} {counts.get(kind, 0)}" for kind in ("allow", "deny", "ask"))],
        ],
        indent="",
    )
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
                    shlex.join(server.get("upstream") or []),
                ]
            )
        lines += _table(rows, indent="  ", right={2, 3})
    return lines


def _table(rows: Sequence[Sequence[str]], *, indent: str, right: set[int] | None = None) -> list[str]:
    """Columns padded to their widest cell; the last column is never padded."""
    right = right or set()
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            if i == len(row) - 1:
                cells.append(cell)
            elif i in right:
                cells.append(cell.rjust(widths[i]))
            else:
                cells.append(cell.ljust(widths[i]))
        out.append((indent + "  ".join(cells)).rstrip())
    return out


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
