"""``bouncerctl policy check FILE``, ``bouncerctl policy migrate FILE`` and ``bouncerctl reload``.

`policy check` runs the daemon's own strict loader on a file, offline: it prints every error the
daemon would give (file, line, key, reason) and exits 1, or prints the effective policy per tool.
`reload` asks the running daemon to reload policy.yaml; a bad file keeps the policy in force.
"""

from __future__ import annotations

import click

from bouncerctl.common import RequestFailed, request
from bouncerctl.policy_migrate import migrate
from bouncerd.core.policy import format_effective, merge
from bouncerd.errors import PolicyError
from bouncerd.policyfiles import read_policy


@click.group()
def policy() -> None:
    """Check policy files; migrate a bouncer-mcp 0.1.x one."""


policy.add_command(migrate)


@policy.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def check(files: tuple[str, ...]) -> None:
    """Load FILES as layers (lowest first) and print the effective policy, or the errors."""
    from pathlib import Path

    try:
        layers = [read_policy(Path(f).absolute()) for f in files]
        effective = merge(layers)
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
