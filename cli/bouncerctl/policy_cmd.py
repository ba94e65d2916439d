"""``bouncerctl policy check [FILE...]``, ``policy init [FILE]``, ``policy migrate FILE`` and ``reload``.

`policy init` writes a commented starter policy (`STARTER`) where the daemon reads it (or to FILE): it
sets nothing but ``version: 1``, so it changes no verdict, and every example in it is a comment to
uncomment. It never overwrites a file; `policy check` accepts what it writes (a test holds it to that).

`policy check` runs the daemon's own strict loader on the files, offline, and prints every error it
finds (file, line, key, reason; one per independent part: a top-level key, a server, a tool entry's key),
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

from bouncerctl import term
from bouncerctl.common import RequestFailed, request
from bouncerctl.policy_migrate import migrate
from bouncerd.core.policy import PolicyFile, format_effective, merge
from bouncerd.errors import PolicyError
from bouncerd.policyfiles import read_policy


@click.group()
def policy() -> None:
    """Check policy files; write a starter one; migrate a bouncer-mcp 0.1.x one."""


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
            term.say(
                f"OK: {path} does not exist ({found}): built-in packs and defaults are in force; "
                "`bouncerctl policy init` writes a commented starter policy there"
            )
            return
        term.say(f"checking {path} ({found})")
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
        term.say(f"error: {problem}")  # fitted at spaces: a key is never cut in two
    if effective is None:
        raise RequestFailed(f"{len(errors)} error{'s' if len(errors) != 1 else ''}; nothing was loaded")
    if verbose:
        click.echo(format_effective(effective), nl=False)
    tools = sum(len(layer.tools) + sum(len(s.tools) for s in layer.servers.values()) for layer in layers)
    settings = sum(len(layer.settings) for layer in layers)
    detail = "" if verbose else "; --verbose shows the effective rule of each"
    term.say(
        f"OK: {len(layers)} file(s), {tools} tool entr{'y' if tools == 1 else 'ies'}, "
        f"{settings} setting(s){detail}"
    )


STARTER = """\
# Bouncer policy: what your MCP servers' tools may do. Reference: docs/policy.md.
# Without any entry, the built-in packs and the fallback decide; nothing below is in force until you
# uncomment it. Check the file with `bouncerctl policy check`, load it with `bouncerctl reload`.
version: 1

# Your own addresses and accounts: trusted as a destination by every tool.
# you: [you@yourcompany.example, "@you"]

# How long a question waits for your answer in the client, in seconds (default 120).
# approval_timeout: 120

# Rules for tools of every server, by tool name.
# tools:
#   send_email:
#     exfiltrating: true                        # check where it sends
#     sink_params: [to, cc, bcc]
#     trusted_destinations: [you@yourcompany.example]
#     trusted_domains: [yourcompany.example]    # and its subdomains
#   write_file:
#     write_params: [path]
#     allowed_path_prefixes: [/home/you/project]
#   delete_file:
#     max_calls: 2                              # per session; 0 forbids the tool

# Rules for one server: its name is the config entry's key (the shim's --name).
# servers:
#   gmail:
#     tools:
#       send_email:
#         trusted_destinations: [accountant@firm.example]
"""


@policy.command("init")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
def init_policy(file: Path | None) -> None:
    """Write a commented starter policy to FILE (default: where the daemon reads policy.yaml)."""
    from bouncerd.paths import resolve

    path = file.absolute() if file is not None else resolve(os.environ).policy
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        raise RequestFailed(
            f"{path} exists; not overwritten. Edit it, or check it with `bouncerctl policy check`"
        ) from None
    except OSError as exc:
        raise RequestFailed(f"{path}: cannot create it: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(STARTER)
        fh.flush()
        os.fsync(fh.fileno())
    term.say(
        f"wrote {path}: a starter policy that changes nothing until you uncomment its examples. "
        "`bouncerctl policy check` checks it; `bouncerctl reload` loads it into a running daemon."
    )


@click.command()
def reload() -> None:
    """Reload policy.yaml in the running daemon (a bad file keeps the policy in force)."""
    reply = request("reload")
    if reply.get("error"):
        raise RequestFailed(f"reload failed, the policy in force is unchanged:\n{reply['error']}")
    click.echo("policy reloaded")
