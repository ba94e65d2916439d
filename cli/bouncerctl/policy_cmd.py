"""``bouncerctl policy check [FILE...]``, ``bouncerctl policy migrate FILE`` and ``bouncerctl reload``.

`policy check` runs the daemon's own strict loader on the files, offline, and prints every error it
finds (file, line, key, reason; one per independent part: a top-level key, a server, a tool entry),
then one verdict line: ``OK`` (exit 0) or ``N errors`` (exit 1). With no file it checks the policy in
force: the file the running daemon names, else this environment's policy.yaml. ``--verbose`` adds
the effective policy per tool, each value with the layer that decided it.
The administrator's managed policy, if installed, is the layer under the files, and a file that
loosens it is refused as the daemon would refuse it.
`reload` asks the running daemon to reload policy.yaml; a bad file keeps the policy in force.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from bouncerctl.common import RequestFailed, request
from bouncerctl.policy_migrate import migrate
from bouncerd.core.policy import PolicyFile, format_effective, merge
from bouncerd.errors import PolicyError
from bouncerd.policyfiles import read_policy


@click.group()
def policy() -> None:
    """Check policy files; migrate a bouncer-mcp 0.1.x one."""


policy.add_command(migrate)


def _policy_in_force() -> tuple[Path, str]:
    """The user's policy file and how it was found: from the running daemon, else the environment."""
    from bouncerd.client import Client
    from bouncerd.errors import DaemonRequestError, DaemonUnavailableError
    from bouncerd.paths import resolve

    paths = resolve(os.environ)
    try:
        with Client.connect(paths, role="ctl") as client:
            named = (client.request("status").get("policy") or {}).get("user_policy")
        if isinstance(named, str):
            return Path(named), "the policy the running daemon has in force"
    except (DaemonUnavailableError, DaemonRequestError):
        pass
    return paths.policy, "this environment's policy; no daemon answered"


@policy.command("check")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("-v", "--verbose", is_flag=True, help="Also print the effective rule of every tool named.")
def check(files: tuple[str, ...], verbose: bool) -> None:
    """Check FILES as layers (lowest first), or the policy in force; print every error, then a verdict."""
    if files:
        paths = [Path(f).absolute() for f in files]
    else:
        path, found = _policy_in_force()
        if not path.exists():
            click.echo(f"OK: {path} does not exist ({found}): built-in packs and defaults are in force")
            return
        click.echo(f"checking {path} ({found})")
        paths = [path]
    errors: list[PolicyError] = []
    layers: list[PolicyFile] = []
    for path in paths:
        try:
            layers.append(read_policy(path, errors))
        except PolicyError as exc:  # the file as a whole: unreadable, not YAML, too large
            errors.append(exc)
    from bouncerd.core.managed import check_layer
    from bouncerd.managedpolicy import managed_source, read_managed

    managed = None
    try:
        managed = read_managed(managed_source(os.environ))  # below every file, as in the daemon
        if managed is not None:
            check_layer(managed, managed)
    except PolicyError as exc:
        errors.append(exc)
    if managed is not None:
        for layer in layers:
            try:
                check_layer(managed, layer)
            except PolicyError as exc:
                errors.append(exc)
    effective = None
    if not errors:
        try:
            effective = merge([managed, *layers] if managed is not None else layers)
        except PolicyError as merge_error:
            errors.append(merge_error)
    for problem in errors:
        click.echo(f"error: {problem}")
    if effective is None:
        raise RequestFailed(f"{len(errors)} error{'s' if len(errors) != 1 else ''}; nothing was loaded")
    if verbose:
        click.echo(format_effective(effective), nl=False)
    tools = sum(len(layer.tools) + sum(len(s.tools) for s in layer.servers.values()) for layer in layers)
    settings = sum(len(layer.settings) for layer in layers)
    detail = "" if verbose else "; --verbose shows the effective rule of each"
    click.echo(
        f"OK: {len(layers)} file(s), {tools} tool entr{'y' if tools == 1 else 'ies'}, "
        f"{settings} setting(s){detail}"
    )


@click.command()
def reload() -> None:
    """Reload policy.yaml in the running daemon (a bad file keeps the policy in force)."""
    reply = request("reload")
    if reply.get("error"):
        raise RequestFailed(f"reload failed, the policy in force is unchanged:\n{reply['error']}")
    click.echo("policy reloaded")
