"""``bouncerctl policy check FILE`` and ``bouncerctl reload``.

`policy check` runs the daemon's own strict loader on a file, offline: it prints every error the
daemon would give (file, line, key, reason) and exits 1, or prints the effective policy per tool.
The administrator's managed policy, if installed, is the layer under the files, and a file that
loosens it is refused as the daemon would refuse it.
`reload` asks the running daemon to reload policy.yaml; a bad file keeps the policy in force.
"""

from __future__ import annotations

import click

from bouncerctl.common import RequestFailed, request
from bouncerd.core.policy import format_effective, merge
from bouncerd.errors import PolicyError
from bouncerd.policyfiles import read_policy


@click.group()
def policy() -> None:
    """Check policy files."""


@policy.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def check(files: tuple[str, ...]) -> None:
    """Load FILES as layers (lowest first) and print the effective policy, or the errors."""
    import os
    from pathlib import Path

    from bouncerd.core.managed import check_layer
    from bouncerd.managedpolicy import managed_source, read_managed

    try:
        layers = [read_policy(Path(f).absolute()) for f in files]
        managed = read_managed(managed_source(os.environ))  # below every file, as in the daemon
        if managed is not None:
            check_layer(managed, managed)
            for layer in layers:
                check_layer(managed, layer)
        effective = merge([managed, *layers] if managed is not None else layers)
    except PolicyError as exc:
        raise RequestFailed(str(exc)) from None
    click.echo(format_effective(effective))


@click.command()
def reload() -> None:
    """Reload policy.yaml in the running daemon (a bad file keeps the policy in force)."""
    reply = request("reload")
    if reply.get("error"):
        raise RequestFailed(f"reload failed, the policy in force is unchanged:\n{reply['error']}")
    click.echo("policy reloaded")
