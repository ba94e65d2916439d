"""``bouncerctl init``: route the MCP clients' stdio servers through bouncer-shim, or (``--undo``) back.

Theory of operation
-------------------
1. **Find.** `locations` lists where each client keeps its MCP servers (``--client`` narrows it,
   ``--config FILE`` replaces it). Only files that exist are read; a file named on the command line
   that does not exist is an error.
2. **Read everything first.** Each file is decoded (UTF-8) and parsed (`mcpconfig.parse`); one that
   cannot be read or parsed stops the whole run before anything is written, with the file, line and
   column in the message.
3. **Plan.** Every entry is classified (`mcpconfig.classify`); stdio servers are wrapped (or, with
   ``--undo``, wrapped ones restored), limited to ``--server`` names if given. Remote servers (a URL)
   cannot be wrapped: they are listed and left alone. The shim is named by absolute path
   (`find_shim`): desktop apps do not start servers with the shell's PATH.
4. **Show.** A summary per file and a unified diff of the change.
5. **Ask, then write.** Without ``--yes`` each file is confirmed on the terminal; with no terminal
   and no ``--yes`` nothing is written. Before writing, the file is read again (a client may have
   rewritten it meanwhile: then it is left alone), its bytes are copied to a timestamped backup
   beside it, and the new text goes to a temporary file in the same directory that is fsynced and
   renamed over the original, keeping its mode: a crash leaves the old file or the new one, never half
   of one (`bouncerctl.init_files`, which the hooks step shares). A symlinked config is written
   through to its target, so dotfile links stay links.

Exit status: 0 done (or nothing to do), 1 a config could not be read or written or the run was
refused, 2 usage.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from bouncerctl import mcpconfig as mc
from bouncerctl import term
from bouncerctl.init_files import InitError, backup, tilde, unified_diff, write_atomically
from bouncerctl.init_hooks import update_hooks

CLIENTS = ("claude-code", "claude-desktop", "cursor", "vscode", "windsurf")

# Claude Code keeps its own state in ~/.claude.json and writes the whole file back while it runs.
CLAUDE_JSON = "Claude Code writes this file while it runs: quit it first, so it cannot overwrite the change"


@dataclass(frozen=True)
class Location:
    client: str  # one of CLIENTS, or "file" for --config
    title: str  # how the client is named to a person
    path: Path
    top_key: str | None  # None: guess ("mcpServers", else "servers")
    projects: bool = False  # also Claude Code's projects.<path>.mcpServers
    caution: str = ""  # said before writing it


def locations(environ: Mapping[str, str], cwd: Path) -> list[Location]:
    """Where each client keeps its MCP servers, for the user `environ` describes and the project `cwd`."""
    home = Path(environ.get("HOME") or Path.home())
    xdg = environ.get("XDG_CONFIG_HOME", "")
    config_home = Path(xdg) if os.path.isabs(xdg) else home / ".config"
    mac_support = home / "Library" / "Application Support"
    return [
        Location("claude-code", "Claude Code", cwd / ".mcp.json", "mcpServers"),
        Location(
            "claude-code",
            "Claude Code",
            home / ".claude.json",
            "mcpServers",
            projects=True,
            caution=CLAUDE_JSON,
        ),
        Location(
            "claude-desktop",
            "Claude Desktop",
            config_home / "Claude/claude_desktop_config.json",
            "mcpServers",
        ),
        Location(
            "claude-desktop",
            "Claude Desktop",
            mac_support / "Claude/claude_desktop_config.json",
            "mcpServers",
        ),
        Location("cursor", "Cursor", cwd / ".cursor/mcp.json", "mcpServers"),
        Location("cursor", "Cursor", home / ".cursor/mcp.json", "mcpServers"),
        Location("vscode", "VS Code", cwd / ".vscode/mcp.json", "servers"),
        Location("vscode", "VS Code", config_home / "Code/User/mcp.json", "servers"),
        Location("vscode", "VS Code", mac_support / "Code/User/mcp.json", "servers"),
        Location("windsurf", "Windsurf", home / ".codeium/windsurf/mcp_config.json", "mcpServers"),
    ]


def find_shim(environ: Mapping[str, str]) -> str:
    """The absolute path of bouncer-shim: the one installed with this bouncerctl, else the PATH's."""
    beside = Path(sys.executable).parent / mc.SHIM_NAME
    if os.access(beside, os.X_OK):
        return os.path.abspath(beside)
    found = shutil.which(mc.SHIM_NAME, path=environ.get("PATH"))
    if found:
        return os.path.abspath(found)
    raise InitError(
        f"cannot find {mc.SHIM_NAME} next to {sys.executable} or on PATH; "
        f"pass its absolute path with --shim PATH"
    )


# ---- reading and planning ----------------------------------------------------------------------------


@dataclass
class Plan:
    location: Location
    path: Path  # the file written (symlinks resolved)
    raw: bytes
    doc: mc.Document
    entries: list[mc.Entry]
    changes: list[mc.Change] = field(default_factory=list)
    rewrite: mc.Rewrite | None = None


def read_config(location: Location) -> Plan:
    """Read and parse one config; InitError naming the file if it cannot be."""
    path = Path(os.path.realpath(location.path))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InitError(f"{location.path}: cannot read it: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InitError(f"{location.path}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():  # a client may create its config empty; it has no servers, and stays as it is
        return Plan(location, path, raw, mc.parse("{}"), [])
    try:
        doc = mc.parse(text)
        top_key = location.top_key or mc.guess_top_key(doc.value)
        blocks = mc.find_blocks(doc.value, top_key, projects=location.projects or location.client == "file")
    except mc.McpConfigError as exc:
        raise InitError(f"{location.path}: {exc}") from None
    return Plan(location, path, raw, doc, mc.entries(doc.value, blocks))


def select(plan: Plan, servers: Sequence[str], undo: bool) -> None:
    wanted = mc.WRAPPED if undo else mc.STDIO
    action = mc.UNWRAP if undo else mc.WRAP
    plan.entries = [entry for entry in plan.entries if not servers or entry.name in servers]
    plan.changes = [mc.Change(e.block, e.name, action) for e in plan.entries if e.kind == wanted]


def _label(entry: mc.Entry) -> str:
    where = mc.block_label(entry.block)
    return f"{entry.name} ({where})" if where else entry.name


def summary(plan: Plan, undo: bool, environ: Mapping[str, str]) -> list[str]:
    lines = [click.style(f"{plan.location.title}: {tilde(plan.location.path, environ)}", bold=True)]
    groups: dict[str, list[str]] = {}
    for entry in plan.entries:
        if entry.kind == mc.STDIO:
            heading = "not wrapped" if undo else "wrap"
            groups.setdefault(heading, []).append(_label(entry))
        elif entry.kind == mc.WRAPPED:
            groups.setdefault("restore" if undo else "already wrapped", []).append(_label(entry))
        elif entry.kind == mc.SHIMMED:
            heading = (
                "runs bouncer-shim (set up by hand), left alone" if undo else "already runs bouncer-shim"
            )
            groups.setdefault(heading, []).append(_label(entry))
        elif entry.kind == mc.REMOTE:
            groups.setdefault("remote, left alone", []).append(f"{_label(entry)} → {entry.detail}")
        else:
            groups.setdefault("skipped", []).append(f"{_label(entry)}: {entry.detail}")
    if not plan.entries:
        lines.append("  no servers")
    width = max((len(heading) for heading in groups), default=0) + 1
    for heading, names in groups.items():
        lines.append(f"  {heading + ':':<{width}} {', '.join(names)}")
    for entry in plan.entries if not undo else ():
        if entry.kind not in (mc.WRAPPED, mc.SHIMMED):
            continue
        command = mc.value_at(plan.doc.value, entry.block)[entry.name].get("command")
        if isinstance(command, str) and os.path.isabs(command) and not os.access(command, os.X_OK):
            lines.append(
                f"  note: {entry.name} runs {command}, which is not there any more; "
                f"`bouncerctl init --undo` then `bouncerctl init` points it at this installation"
            )
    if plan.changes and plan.location.caution:
        lines.append(f"  note: {plan.location.caution}")
    if undo:
        for change in plan.changes:
            entry = mc.value_at(plan.doc.value, change.block)[change.name]
            dropped = mc.dropped_on_undo(entry)
            if dropped:
                keys = ", ".join(f'"{key}"' for key in dropped)
                lines.append(f"  note: {change.name}: {keys} changed after init; undo restores the original")
    return lines


def render_diff(plan: Plan, undo: bool, environ: Mapping[str, str], width: int | None = None) -> str:
    """The unified diff, coloured, each line folded to `width` (a long JSON entry stays readable)."""
    assert plan.rewrite is not None
    label = "restored" if undo else "with Bouncer"
    shown = tilde(plan.location.path, environ)
    diff = unified_diff(plan.doc.text, plan.rewrite.text, shown, label, plan.rewrite.edits)
    styled = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            style: dict[str, Any] = {"bold": True}
        elif line.startswith("+"):
            style = {"fg": "green"}
        elif line.startswith("-"):
            style = {"fg": "red"}
        elif line.startswith("@@"):
            style = {"fg": "cyan"}
        else:
            style = {}
        marker = line[:1] if line[:1] in "+- " and not line.startswith(("+++", "---")) else " "
        for piece in term.fold(line, width, indent=marker + "   "):
            styled.append((term.style(piece, **style) if style else piece) + "\n")
    return "".join(styled)


# ---- writing -----------------------------------------------------------------------------------------


def commit(plan: Plan, environ: Mapping[str, str], now: datetime) -> str:
    """Write one planned file; a line saying where the backup went. InitError if it changed meanwhile."""
    assert plan.rewrite is not None
    shown = tilde(plan.location.path, environ)
    try:
        now_raw = plan.path.read_bytes()
        st = os.stat(plan.path)
    except OSError as exc:
        raise InitError(f"{shown}: cannot read it again before writing: {exc.strerror or exc}") from None
    if now_raw != plan.raw:
        raise InitError(
            f"{shown}: changed since it was read (is the client running?); not written. Run init again."
        )
    try:
        saved = backup(plan.path, plan.raw, st.st_mode, now)
        write_atomically(plan.path, plan.rewrite.text.encode("utf-8"), st)
    except OSError as exc:
        raise InitError(f"{shown}: not written: {exc.strerror or exc}") from None
    return f"wrote {shown} (backup: {tilde(saved, environ)})"


# ---- the command -------------------------------------------------------------------------------------


def can_ask() -> bool:
    """Is there a person at a terminal to confirm a write?"""
    return sys.stdin is not None and sys.stdin.isatty()


def _candidates(client: str | None, config: Path | None, environ: Mapping[str, str]) -> list[Location]:
    if config is not None:
        return [Location("file", "MCP config", Path(os.path.abspath(config)), None)]
    every = locations(environ, Path.cwd())
    return [loc for loc in every if client is None or loc.client == client]


def _read_all(candidates: list[Location], explicit: bool, environ: Mapping[str, str]) -> list[Plan]:
    plans: list[Plan] = []
    errors: list[str] = []
    seen: set[Path] = set()
    for location in candidates:
        if not location.path.exists():
            if explicit:
                errors.append(f"{location.path}: no such file")
            continue
        real = Path(os.path.realpath(location.path))
        if real in seen:
            continue
        seen.add(real)
        try:
            plans.append(read_config(location))
        except InitError as exc:
            errors.append(exc.message)
    if errors:
        raise InitError("nothing was changed:\n  " + "\n  ".join(errors))
    if not plans:
        looked = "\n  ".join(tilde(loc.path, environ) for loc in candidates)
        raise InitError(f"no MCP client config found; looked at:\n  {looked}\nName one with --config FILE.")
    return plans


@click.command()
@click.option("--client", type=click.Choice(CLIENTS), help="Only this client's configs.")
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Rewrite this JSON file (any file with an mcpServers block).",
)
@click.option("--server", "servers", multiple=True, metavar="NAME", help="Only this server (repeatable).")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option("--yes", "-y", is_flag=True, help="Write without asking (for scripts).")
@click.option("--undo", is_flag=True, help="Put the original server entries back.")
@click.option(
    "--hooks/--no-hooks",
    default=None,
    help="Also install (with --undo: remove) Bouncer's Claude Code hooks in ~/.claude/settings.json. "
    "Asked on a terminal when not given.",
)
@click.option(
    "--shim",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The bouncer-shim to use (default: the one installed with bouncerctl, else PATH's).",
)
def init(
    client: str | None,
    config: Path | None,
    servers: tuple[str, ...],
    dry_run: bool,
    yes: bool,
    undo: bool,
    hooks: bool | None,
    shim: Path | None,
) -> None:
    """Route your MCP clients' stdio servers through bouncer-shim (--undo puts them back).

    Finds the MCP configs of Claude Code, Claude Desktop, Cursor, VS Code and Windsurf, shows the
    change as a diff and asks before writing each file. The original entry is kept in the file under
    "x-bouncer-upstream", and a timestamped backup beside it.
    """
    if client and config:
        raise click.UsageError("--client and --config cannot be used together")
    environ = os.environ
    candidates = _candidates(client, config, environ)
    plans = _read_all(candidates, explicit=config is not None, environ=environ)
    known = sorted({entry.name for plan in plans for entry in plan.entries})
    for plan in plans:
        select(plan, servers, undo)
    missing = [name for name in servers if not any(e.name == name for p in plans for e in p.entries)]
    if missing:
        files = ", ".join(tilde(p.location.path, environ) for p in plans)
        raise InitError(
            f"no server named {', '.join(missing)} in {files} (servers there: {', '.join(known)})"
        )
    if servers:  # files without any of the named servers are not worth a mention
        plans = [plan for plan in plans if plan.entries]
    shim_path = ""
    if not undo and any(plan.changes for plan in plans):
        shim_path = os.path.abspath(shim) if shim is not None else find_shim(environ)
        if not os.access(shim_path, os.X_OK):
            raise InitError(f"{shim_path} is not an executable file")
    errors = []
    for plan in plans:
        if plan.changes:
            try:
                plan.rewrite = mc.apply(plan.doc, plan.changes, shim_path)
            except mc.McpConfigError as exc:
                errors.append(f"{plan.location.path}: {exc}")
    if errors:
        raise InitError("nothing was changed:\n  " + "\n  ".join(errors))

    for plan in plans:
        term.echo("\n".join(term.lines_fit(summary(plan, undo, environ), term.columns())))
    pending = [plan for plan in plans if plan.rewrite is not None]
    with_hooks = config is None and client in (None, "claude-code")
    if not pending:
        what = "wrapped" if undo else "to wrap"
        term.say(f"\nNothing to change: no {'stdio servers ' if not undo else 'servers '}{what}.")
        if with_hooks:
            _hooks(environ, undo=undo, wanted=hooks, yes=yes, dry_run=dry_run)
        return
    for plan in pending:
        term.say("")
        term.echo(render_diff(plan, undo, environ, term.columns()), nl=False)
        assert plan.rewrite is not None
        if not plan.rewrite.in_place:
            term.say("(the file is re-formatted: its layout could not be kept)")
    if dry_run:
        if with_hooks:
            _hooks(environ, undo=undo, wanted=hooks, yes=yes, dry_run=True)
        term.say("\nDry run: nothing written.")
        return
    if not yes and not can_ask():
        raise InitError(
            "not writing: there is no terminal to ask on. Re-run with --yes to write, or --dry-run."
        )

    written: list[Plan] = []
    failures: list[str] = []
    now = datetime.now(UTC)  # one timestamp for every backup of this run
    term.say("")
    for plan in pending:
        shown = tilde(plan.location.path, environ)
        if not yes and not click.confirm(f"Write {shown}?", default=False):
            term.say(f"left {shown} unchanged")
            continue
        try:
            term.say(commit(plan, environ, now))
            written.append(plan)
        except InitError as exc:
            failures.append(exc.message)
    if written:
        titles = sorted({plan.location.title for plan in written if plan.location.client != "file"})
        who = ", ".join(titles) if titles else "the client"
        if undo:
            term.say(f"\nRestart {who} to start the servers without Bouncer.")
        else:
            term.say(
                f"\nRestart {who} so the servers start through bouncer-shim.\n"
                f"`bouncerctl status` lists them once they connect; `bouncerctl init --undo` puts them back."
            )
    if with_hooks:
        _hooks(environ, undo=undo, wanted=hooks, yes=yes, dry_run=False)
    if failures:
        raise InitError("\n".join(failures))


def _hooks(environ: Mapping[str, str], *, undo: bool, wanted: bool | None, yes: bool, dry_run: bool) -> None:
    update_hooks(environ, undo=undo, wanted=wanted, yes=yes, dry_run=dry_run, now=datetime.now(UTC))
