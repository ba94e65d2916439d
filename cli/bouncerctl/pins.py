"""``bouncerctl pins show|accept``: which tools are pinned, which changed, and accepting them.

A pin is the hash of every part of a tool as listed (description, schemas, annotations, ...), taken
on first use. A tool that is new, or of which any part changed since it was pinned, is refused at call
time until a person accepts it here. `show` prints what changed, field by field, so the person can
read the new description or annotations before trusting them (a changed description is how a server
smuggles instructions in; a tool turned "read-only" is how it stops a client from asking).

The form waiting for review is the daemon's journaled record of the last one listed (when, in which
client's session), so `show` and `accept` work the same after the server disconnected or the daemon
restarted, and agree with `status` and `report`, which read the same ``pins`` op.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

import click

from bouncerctl import term
from bouncerctl.common import RequestFailed, local_clock, request

MARKS = {"pinned": "ok", "changed": "CHANGED", "new": "NEW", "not listed": "UNLISTED"}
MARK_WIDTH = max(len(mark) for mark in MARKS.values())
MIN_WIDTH = 40  # below this a terminal is too narrow to fold into; lines are folded as if it were 40

LEGEND = """\
ok        the pin covers the form the server lists
CHANGED   a part of the tool differs from the pin (the diff is shown)
NEW       listed after first use and never accepted
UNLISTED  pinned, but missing from the server's latest list
Calls to CHANGED, NEW and UNLISTED tools are refused until accepted."""


@click.group()
def pins() -> None:
    """Show or accept tool pins (trust on first use of every part of each tool)."""


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
        if server:
            raise RequestFailed(f"no server named {server!r} has listed its tools to this daemon")
        click.echo("no server has listed its tools yet")
        return
    term.echo(render(servers, term.columns()))


def render(servers: list[dict[str, Any]], width: int | None) -> str:
    """Each server's header, its tools with their pin state and what waits for review, then the legend;
    fitted to `width` cells (None: unwrapped)."""
    out: list[str] = []
    for srv in servers:
        header = f"{srv['name']}  ({' '.join(srv['upstream'])})"
        out += term.fit(header, width)  # at spaces: a package name is never cut
        for tool in srv["tools"]:
            mark = MARKS.get(tool["state"], tool["state"].upper())
            out.append(f"  {mark.ljust(MARK_WIDTH)}  {tool['name']}")
            if tool.get("duplicated"):  # no one form to show or accept (pin.duplicate_tool)
                note = "listed more than once in different forms: refused until the server lists it once"
                out.append(_wrapped(note, " " * (MARK_WIDTH + 4), width))
            elif tool["state"] in ("changed", "new"):
                out += [_wrapped(line, " " * (MARK_WIDTH + 4), width) for line in _waiting(tool)]
        pending = [
            t["name"] for t in srv["tools"] if t["state"] in ("changed", "new") and not t.get("duplicated")
        ]
        if pending:
            accept = f"  to trust them: bouncerctl pins accept {srv['name']} {' '.join(pending)}"
            out += term.fit(accept, width)
        out.append("")
    out += term.lines_fit(LEGEND.split("\n"), width)
    return "\n".join(out)


def _waiting(tool: dict[str, Any]) -> list[str]:
    """What waits for review: who listed it when, then the diff against the pin (or the new form)."""
    lines = []
    seen = tool.get("seen")
    if isinstance(seen, dict):
        client = seen.get("client") or "an unnamed client"
        where = "in the server's latest list" if seen.get("listed_now") else "not in the server's latest list"
        lines.append(f"seen {local_clock(float(seen.get('ts') or 0))} by {client} ({where})")
    live = tool.get("live") or {}
    if tool["state"] == "changed" and isinstance(tool.get("pinned"), dict):
        lines += _diff(tool["pinned"], live).splitlines()
    else:
        lines += json.dumps(live, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    return lines


def _wrapped(line: str, indent: str, columns: int | None) -> str:
    """A diff or description line folded to the terminal's width (none on a pipe), each piece under
    its +/- mark, so nothing of a changed description is cut or lost off the edge."""
    import textwrap

    if columns is None or term.cells(indent + line) <= columns:
        return indent + line
    width = max(MIN_WIDTH, columns) - len(indent)
    mark = line[:1] if line[:1] in ("+", "-", " ") else ""
    pieces = textwrap.wrap(
        line[len(mark) :], width - len(mark), drop_whitespace=False, break_on_hyphens=False
    ) or [""]
    return "\n".join(indent + mark + piece for piece in pieces)


def _diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    a = json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    b = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    lines = difflib.unified_diff(a, b, "pinned", "now", lineterm="", n=1)
    return "\n".join(lines)


@pins.command("accept")
@click.argument("server")
@click.argument("tools", nargs=-1)
def accept(server: str, tools: tuple[str, ...]) -> None:
    """Pin the form of TOOLS of SERVER that `pins show` shows (all new and changed tools if none named)."""
    reply = request("pins_accept", server=server, tools=list(tools) if tools else None)
    accepted = reply.get("accepted", [])
    if accepted:
        click.echo(f"pinned {len(accepted)} tool(s) of {server}: {', '.join(accepted)}")
        missed = sorted(set(tools) - set(accepted))
        if missed:
            click.echo(f"nothing waited for review under {', '.join(missed)}")
    else:
        click.echo(f"nothing to accept for {server}: its tools match their pins")
