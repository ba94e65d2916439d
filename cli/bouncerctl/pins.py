"""``bouncerctl pins show|accept``: which tools are pinned, which changed, and accepting them.

A pin is the hash of a tool's name, description and input schema, taken on first use. A tool that is
new, or whose description or schema changed since it was pinned, is refused at call time until a
person accepts it here. `show` prints what changed, field by field, so the person can read the new
description before trusting it (a changed description is how a server smuggles instructions in).
"""

from __future__ import annotations

import difflib
import json
from typing import Any

import click

from bouncerctl import term
from bouncerctl.common import request


@click.group()
def pins() -> None:
    """Show or accept tool pins (trust on first use of name, description and schema)."""


@pins.command("show")
@click.argument("server", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the daemon's reply as JSON.")
def show(server: str | None, as_json: bool) -> None:
    """List each server's tools and their pin state; print the diff of changed ones."""
    reply = request("pins", server=server)
    servers = reply.get("servers", [])
    if as_json:
        click.echo(json.dumps(servers, indent=2, ensure_ascii=False))
        return
    if not servers:
        click.echo("no server has listed its tools yet" + (f" under the name {server!r}" if server else ""))
        return
    for srv in servers:
        width = term.columns()
        term.echo("\n".join(term.fit(f"{srv['name']}  ({' '.join(srv['upstream'])})", width)))
        for tool in srv["tools"]:
            mark = {"pinned": "  ok     ", "changed": "  CHANGED", "new": "  NEW    "}.get(
                tool["state"], "  gone   "
            )
            click.echo(f"{mark} {tool['name']}")
            if tool["state"] == "changed":
                diff = _diff(tool["pinned"], tool["live"]).splitlines()
                term.echo(
                    "\n".join(piece for line in diff for piece in term.fold(line, width, indent="      "))
                )
        pending = [t["name"] for t in srv["tools"] if t["state"] in ("changed", "new")]
        if pending:
            accept = f"  to trust them: bouncerctl pins accept {srv['name']} {' '.join(pending)}"
            term.echo("\n".join(term.fit(accept, width)))
        click.echo("")


def _diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    a = json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    b = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    lines = difflib.unified_diff(a, b, "pinned", "now", lineterm="", n=1)
    return "\n".join("      " + line for line in lines)


@pins.command("accept")
@click.argument("server")
@click.argument("tools", nargs=-1)
def accept(server: str, tools: tuple[str, ...]) -> None:
    """Pin the current form of TOOLS of SERVER (all new and changed tools if none are named)."""
    reply = request("pins_accept", server=server, tools=list(tools) if tools else None)
    accepted = reply.get("accepted", [])
    if accepted:
        click.echo(f"pinned {len(accepted)} tool(s) of {server}: {', '.join(accepted)}")
    else:
        click.echo(f"nothing to accept for {server}: its tools match their pins")
