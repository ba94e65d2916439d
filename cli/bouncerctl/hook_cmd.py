"""``bouncerctl hook CLIENT`` as a click command, so it is listed in ``bouncerctl --help``.

The console script never reaches it: `bouncerctl.__main__` runs `bouncerctl.hook.main` before click is
imported. It is here for ``bouncerctl --help`` and for callers that invoke the group directly.
"""

from __future__ import annotations

import click

from bouncerctl import hook as _hook


@click.command()
@click.argument("client", type=click.Choice(list(_hook.CLIENTS)))
def hook(client: str) -> None:
    """Client hook: reads the client's hook JSON on stdin, answers on stdout (see docs)."""
    raise SystemExit(_hook.main([client]))
