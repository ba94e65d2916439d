"""``bouncerctl state show|accept-loss``: the daemon's restricted state after its journal was damaged.

When bouncerd finds its journal damaged at start, it cannot know what part of its state it lost
(pins, budget counts, taint, grants), so it runs restricted (`bouncerd/core/restricted.py`): every tool
unpinned until accepted, every budget spent, every send asked. That lasts, across restarts, until a
person who has looked at what happened (the log, the damaged bytes kept beside the journal, the audit
log) accepts the loss here. Tools stay unpinned after that: review them with ``bouncerctl pins``.
"""

from __future__ import annotations

import json

import click

from bouncerctl.common import local_clock, request


@click.group()
def state() -> None:
    """Show or accept the loss of a damaged journal's state (the restricted state)."""


@state.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print the daemon's reply as JSON.")
def show(as_json: bool) -> None:
    """Say whether bouncerd runs restricted, since when and why."""
    restriction = request("status").get("daemon", {}).get("restricted")
    if as_json:
        click.echo(json.dumps(restriction))
        return
    if not restriction:
        click.echo("not restricted: the journal was read whole at start")
        return
    click.echo(f"RESTRICTED since {local_clock(restriction['since'])}: {restriction['reason']}")
    click.echo("Every tool is unpinned until accepted, every budget counts as spent, every send is asked.")
    click.echo(f"Once you have reviewed it, run: {restriction['accept']}")


@state.command("accept-loss")
def accept_loss() -> None:
    """Accept the loss of the damaged journal's state: bouncerd decides as usual again."""
    reply = request("accept_loss")
    if reply.get("accepted"):
        click.echo("accepted: bouncerd decides as usual again; tools stay unpinned until you run")
        click.echo("  bouncerctl pins show   and   bouncerctl pins accept SERVER [TOOL...]")
    else:
        click.echo("nothing to accept: bouncerd is not restricted")
