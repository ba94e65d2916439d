"""``bouncerctl approve CODE`` and ``bouncerctl pending``: a person's yes to one denied call.

A client that cannot ask the person (no elicitation) gets a denied call with a one-time code. The
person runs ``bouncerctl approve CODE`` in their own terminal: it shows what the code binds (server,
tool, parameter, the destination with invisible characters made visible, the question, the expiry),
asks ``Approve? [y/N]`` and only a typed ``y`` approves. The agent's retry of the *same* call (same
arguments) then runs once.

It refuses to run unless stdin and stdout are both a terminal, and there is no ``--yes``: an agent
with a shell tool must not be able to approve its own calls by running this command. (That is a
speed bump, not a wall: a program of the user's can open a pseudo-terminal, or talk to the socket.
The daemon's ops are only served to the user's own uid; see docs/dev/approvals-protocol.md.)

``--show-arguments`` also prints the arguments that would leave (held by the daemon in memory for
open codes, checked against the code's digest; every invisible character escaped). It is on by
default when the policy keeps arguments in the audit log (``audit_arguments: full``: they are on disk
anyway) and off with ``audit_arguments: digest``; ``--hide-arguments`` turns it off. Times are the
local clock with its zone.

``pending`` lists the open codes with their bindings and expiry; never the calls' argument values.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from typing import Any

import click

from bouncerctl import term
from bouncerctl.common import RequestFailed, connect, local_clock
from bouncerctl.status import format_duration
from bouncerd.core.canon import visible
from bouncerd.errors import DaemonRequestError, DaemonUnavailableError

EXIT_NOT_A_TERMINAL = 4  # refused before contacting the daemon: not run by a person at a terminal
EXIT_NOT_APPROVED = 1  # the person said no (or nothing): the call stays denied
# One argument's value is shown up to this many characters: enough for an address list or a message
# a person reads before saying yes; a 10 MB body would scroll the question off the screen.
MAX_SHOWN_ARGUMENT_CHARS = 2000


class NotATerminal(click.ClickException):
    exit_code = EXIT_NOT_A_TERMINAL


def _ask_daemon(op: str, **fields: Any) -> dict[str, Any]:
    with connect() as client:
        try:
            return client.request(op, **fields)
        except DaemonUnavailableError as exc:
            raise RequestFailed(str(exc)) from None
        except DaemonRequestError as exc:
            raise RequestFailed(exc.message) from None


def _shown(value: str | None) -> str:
    return f'"{visible(value)}"' if value is not None else "(none)"


def _expiry(expires: float) -> str:
    left = max(0.0, expires - time.time())
    return f"{local_clock(expires)} (in {format_duration(left)})"


def _arguments_lines(code: Mapping[str, Any], width: int) -> list[str]:
    """The arguments that would leave, one per line, escaped; or why they cannot be shown."""
    from bouncerd.core.approvals import arguments_digest

    label = "  " + "arguments".ljust(width) + "  "
    held = code.get("arguments")
    if not isinstance(held, dict):
        why = code.get("arguments_missing") or "this daemon does not send them"
        return [f"{label}not shown: {why}"]
    if arguments_digest(held) != code.get("digest"):  # never show a value the code does not bind
        return [f"{label}not shown: they do not match the code's digest"]
    lines = [f"{label}(the agent's, exactly as they would be sent; untrusted text, escaped)"]
    for name, value in held.items():
        text = visible(json.dumps(value, ensure_ascii=False))
        if len(text) > MAX_SHOWN_ARGUMENT_CHARS:
            more = len(text) - MAX_SHOWN_ARGUMENT_CHARS
            text = text[:MAX_SHOWN_ARGUMENT_CHARS] + f"… ({more} more characters)"
        lines.append(f"    {' ' * width}{visible(str(name))} = {text}")
    return lines


def render(code: dict[str, Any], *, arguments: bool = False, width: int | None = None) -> str:
    """The approve screen, fitted to `width` cells (None: unwrapped): values wrap under themselves at
    spaces, and a word is broken only when it is longer than a line (an address with no spaces)."""
    rows = [
        ("server", visible(str(code["server"]))),
        ("tool", visible(str(code["tool"]))),
        ("parameter", visible(str(code["parameter"])) if code.get("parameter") else "(none)"),
        ("destination", _shown(code.get("destination"))),
        ("expires", _expiry(float(code["expires"]))),
    ]
    more = [d for d in code.get("destinations") or [] if d != code.get("destination")]
    if more:
        rows.insert(4, ("also", ", ".join(_shown(d) for d in more)))
    names = max(len(name) for name, _ in rows)
    lines = term.fit(f"Code {code['code']}  (session {visible(str(code['session']))})", width)
    lines += term.table(rows, width, indent="  ")
    if arguments:
        lines += term.lines_fit(_arguments_lines(code, names), width)
    lines += ["", *term.fit(str(code.get("question") or code.get("reason") or ""), width), ""]
    lines += term.fit("Approving lets the agent retry this exact call (the same arguments) once.", width)
    return "\n".join(lines)


def _arguments_by_default() -> bool:
    """Show arguments unless the policy keeps only their digest (`audit_arguments: digest`)."""
    try:
        settings = (_ask_daemon("status").get("policy") or {}).get("settings") or {}
    except RequestFailed:
        return False
    return settings.get("audit_arguments") == "full"


@click.command()
@click.argument("code")
@click.option(
    "--show-arguments/--hide-arguments",
    "show_arguments",
    default=None,
    help="Print the arguments that would leave (default: shown unless audit_arguments is digest).",
)
def approve(code: str, show_arguments: bool | None) -> None:
    """Approve the one call that CODE was issued for, after showing it. Needs a terminal."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise NotATerminal(
            "bouncerctl approve must be run by a person in their own terminal (stdin and stdout must "
            "both be a terminal): an agent with a shell must not approve its own calls. "
            "Nothing was approved."
        )
    if show_arguments is None:
        show_arguments = _arguments_by_default()
    shown = _ask_daemon("approve_show", code=code, arguments=show_arguments)
    click.echo(render(shown, arguments=show_arguments, width=term.columns()))
    click.echo("Approve? [y/N] ", nl=False)
    answer = sys.stdin.readline()
    if answer.strip().lower() not in ("y", "yes"):
        click.echo("Not approved; the call stays denied.")
        sys.exit(EXIT_NOT_APPROVED)
    done = _ask_daemon("approve", code=shown["code"])
    click.echo(
        f"Approved: the agent's next identical call to {visible(str(done['server']))}/"
        f"{visible(str(done['tool']))} runs once. Ask the agent to retry it."
    )


def _connected() -> dict[str, bool] | None:
    """Each session the daemon holds: is a server of it connected? None if the daemon does not say."""
    try:
        sessions = _ask_daemon("status").get("sessions")
    except RequestFailed:
        return None
    if not isinstance(sessions, list):
        return None
    return {
        str(s.get("key")): any(srv.get("connected") for srv in s.get("servers") or [])
        for s in sessions
        if isinstance(s, dict)
    }


def _code_rows(codes: list[dict[str, Any]]) -> list[list[str]]:
    rows = [["CODE", "SERVER", "TOOL", "EXPIRES IN", "DESTINATION"]]
    for c in codes:
        rows.append(
            [
                str(c["code"]),
                visible(str(c["server"])),
                visible(str(c["tool"])),
                format_duration(float(c.get("expires_in") or 0)),
                _shown(c.get("destination")),
            ]
        )
    return rows


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the open codes as JSON.")
def pending(as_json: bool) -> None:
    """List the open one-time codes: what each would approve and when it expires.

    The codes of sessions `status` counts as ended (no server connected: the client quit, or is
    restarting its servers) come after the live ones, under their own heading: an agent that is gone
    will not retry the call."""
    codes = _ask_daemon("pending").get("pending", [])
    if as_json:
        click.echo(json.dumps(codes, indent=2, ensure_ascii=True))
        return
    if not codes:
        click.echo("no open codes")
        return
    connected = _connected()
    ended = [c for c in codes if connected is not None and connected.get(str(c.get("session"))) is False]
    live = [c for c in codes if c not in ended]
    width = term.columns()
    if live:
        for line in term.table(_code_rows(live), width):
            term.echo(line)
    if ended:
        heading = "of ended sessions (no server connected: the client quit, or is restarting its servers):"
        term.say(("\n" if live else "") + heading)
        for line in term.table(_code_rows(ended), width):
            term.echo(line)
    term.say("approve one in your own terminal with: bouncerctl approve CODE")
