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
   are wrapped too, through the shim's bridge (``bouncer-shim --url``), when it speaks their
   transport; one it cannot reach is named NOT PROTECTED with the reason. The shim is named by
   absolute path (`find_shim`): desktop apps do not start servers with the shell's PATH. A project
   file teams commit (`Plan.shared`) gets the command name instead, and none of this machine's
   ``env``: a note says so, and warns when bouncer-shim is not on PATH.
4. **Show.** A summary per file and a unified diff of the change.
5. **Ask, then write.** Without ``--yes`` each file is confirmed on the terminal; with no terminal and no
   ``--yes`` nothing is written. Before writing, the file is read again (a client may have rewritten it
   meanwhile: then it is left alone), its bytes are copied to a timestamped backup in Bouncer's state
   directory (never beside it: a project file's neighbours get committed), and the new text goes to a
   temporary file in the same directory that is fsynced and renamed over the original, keeping its mode: a
   crash leaves the old file or the new one, never half of one (`bouncerctl.init_files`, which the hooks step
   shares). A symlinked config is written through to its target, so dotfile links stay links.

Exit status: 0 done (or nothing to do), 1 a config could not be read or written or the run was
refused, 2 usage.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from bouncerctl import init_record, mcptoml, term
from bouncerctl import mcpconfig as mc
from bouncerctl.init_files import (
    InitError,
    backup,
    state_backup_dir,
    tilde,
    unified_diff,
    write_atomically,
)
from bouncerctl.init_hooks import update_hooks
from bouncerctl.init_plan import (
    JSON_RECORD,
    TOML,
    Location,
    Plan,
    bridged,
    not_protected,
    original_value,
    read_config,
    record_written,
    rewrite,
    select,
)
from bouncerctl.init_you import update_you
from bouncerd.errors import UnsafeDirectoryError
from bouncerd.paths import entry_env

CLIENTS = (
    "claude-code", "claude-desktop", "cline", "codex", "cursor", "gemini", "lmstudio", "vscode",
    "windsurf", "zed",
)  # fmt: skip

# Claude Code keeps its own state in ~/.claude.json and writes the whole file back while it runs.
CLAUDE_JSON = "Claude Code writes this file while it runs: quit it first, so it cannot overwrite the change"


def locations(environ: Mapping[str, str], cwd: Path) -> list[Location]:
    """Where each client keeps its MCP servers, for the user `environ` describes and the project `cwd`,
    then the files named with ``init --config`` that init still has something to undo in."""
    known = client_locations(environ, cwd)
    seen = {os.path.realpath(loc.path) for loc in known}
    for path in init_record.remembered(environ):
        if os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            known.append(Location("file", "MCP config (named with --config)", path, None))
    return known


def client_locations(environ: Mapping[str, str], cwd: Path) -> list[Location]:
    """Where each client keeps its MCP servers. Project files (`Location.shared`) only when the project
    is not the home directory itself (there, ``.cursor/mcp.json`` is the user's own)."""
    home = Path(environ.get("HOME") or Path.home())
    xdg = environ.get("XDG_CONFIG_HOME", "")
    config_home = Path(xdg) if os.path.isabs(xdg) else home / ".config"
    mac_support = home / "Library" / "Application Support"
    codex = environ.get("CODEX_HOME", "")
    codex_home = Path(codex) if os.path.isabs(codex) else home / ".codex"
    shared = os.path.realpath(cwd) != os.path.realpath(home)
    cline = "globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"
    return [
        Location("claude-code", "Claude Code", cwd / ".mcp.json", "mcpServers", shared=shared),
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
        Location("cursor", "Cursor", cwd / ".cursor/mcp.json", "mcpServers", shared=shared),
        Location("cursor", "Cursor", home / ".cursor/mcp.json", "mcpServers"),
        # VS Code's configuration schema allows no unknown key on a stdio server
        Location("vscode", "VS Code", cwd / ".vscode/mcp.json", "servers", fmt=JSON_RECORD, shared=shared),
        Location("vscode", "VS Code", config_home / "Code/User/mcp.json", "servers", fmt=JSON_RECORD),
        Location("vscode", "VS Code", mac_support / "Code/User/mcp.json", "servers", fmt=JSON_RECORD),
        Location("windsurf", "Windsurf", home / ".codeium/windsurf/mcp_config.json", "mcpServers"),
        Location(
            "gemini",
            "Gemini CLI",
            cwd / ".gemini/settings.json",
            "mcpServers",
            fmt=JSON_RECORD,
            shared=shared,
        ),
        Location("gemini", "Gemini CLI", home / ".gemini/settings.json", "mcpServers", fmt=JSON_RECORD),
        Location("codex", "Codex", codex_home / "config.toml", mcptoml.TOP_KEY, fmt=TOML),
        # Zed reads its settings into typed structs and Cline rewrites its file: no key of ours in either
        Location("zed", "Zed", cwd / ".zed/settings.json", "context_servers", fmt=JSON_RECORD, shared=shared),
        Location("zed", "Zed", config_home / "zed/settings.json", "context_servers", fmt=JSON_RECORD),
        Location("cline", "Cline", config_home / "Code/User" / cline, "mcpServers", fmt=JSON_RECORD),
        Location("cline", "Cline", mac_support / "Code/User" / cline, "mcpServers", fmt=JSON_RECORD),
        Location("lmstudio", "LM Studio", home / ".lmstudio/mcp.json", "mcpServers"),
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


def _label(entry: mc.Entry) -> str:
    where = mc.block_label(entry.block)
    return f"{entry.name} ({where})" if where else entry.name


def summary(plan: Plan, undo: bool, environ: Mapping[str, str], env: Mapping[str, str]) -> list[str]:
    lines = [click.style(f"{plan.location.title}: {tilde(plan.location.path, environ)}", bold=True)]
    groups: dict[str, list[str]] = {}
    for entry in plan.entries:
        if entry.kind == mc.STDIO:
            heading = "NOT PROTECTED (not wrapped)" if undo else "wrap"
            groups.setdefault(heading, []).append(_label(entry))
        elif entry.kind == mc.REMOTE and bridged(plan, entry) and not undo:
            groups.setdefault("wrap remote", []).append(f"{_label(entry)} → {entry.detail}")
        elif entry.kind == mc.REMOTE and undo:
            groups.setdefault("NOT PROTECTED (remote, not wrapped)", []).append(
                f"{_label(entry)} → {entry.detail}"
            )
        elif entry.kind == mc.WRAPPED:
            groups.setdefault("restore" if undo else "already wrapped", []).append(_label(entry))
        elif entry.kind == mc.SHIMMED:
            heading = (
                "runs bouncer-shim (set up by hand), left alone" if undo else "already runs bouncer-shim"
            )
            groups.setdefault(heading, []).append(_label(entry))
        elif entry.kind == mc.REMOTE:
            why = not_protected(plan, entry) or entry.detail
            groups.setdefault("NOT PROTECTED (remote; the bridge cannot reach it)", []).append(
                f"{_label(entry)}: {why}"
            )
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
        value = plan.entry_value(entry)
        command = value.get("command") if isinstance(value, Mapping) else None
        if isinstance(command, str) and os.path.isabs(command) and not os.access(command, os.X_OK):
            lines.append(
                f"  note: {entry.name} runs {command}, which is not there any more; "
                f"`bouncerctl init --undo` then `bouncerctl init` points it at this installation"
            )
    if not undo and any(entry.kind == mc.REMOTE and bridged(plan, entry) for entry in plan.entries):
        lines.append(
            "  note: a remote server runs through the bridge (bouncer-shim --url), which relays it like a "
            "stdio server, so every call gets a verdict and every output is recorded; its headers go into "
            "env, not onto the command line"
        )
    if plan.shared and plan.changes and not undo:
        lines.append(
            f"  note: a project file others may use: the entries run `{mc.SHIM_NAME}` from PATH, "
            "with none of this machine's paths"
        )
        if not shutil.which(mc.SHIM_NAME, path=environ.get("PATH")):
            lines.append(
                f"  warning: {mc.SHIM_NAME} is not on PATH, so the client cannot start these servers; "
                "put it there (pipx does), see docs/install.md"
            )
        if env:
            kept_out = ", ".join(sorted(env))
            lines.append(f"  note: {kept_out} is not written into it: start the client with it set")
    if plan.changes and plan.location.caution:
        lines.append(f"  note: {plan.location.caution}")
    if plan.fmt == JSON_RECORD and not undo:
        stale = [
            e.name
            for e in plan.entries
            if isinstance(v := plan.entry_value(e), dict) and mc.UPSTREAM_KEY in v
        ]
        client = plan.location.client
        which = f"--config {plan.location.path}" if client == "file" else f"--client {client}"
        if stale:
            lines.append(
                f'  note: {", ".join(stale)}: "{mc.UPSTREAM_KEY}" (from an earlier init) makes '
                f"{plan.location.title} refuse this file; run `bouncerctl init --undo {which}`, then "
                f"`bouncerctl init {which}`"
            )
    if undo:
        for change in plan.changes:
            entry = plan.entry_value(mc.Entry(change.block, change.name, mc.WRAPPED))
            upstream = original_value(plan, mc.Entry(change.block, change.name, mc.WRAPPED))
            if plan.whole or not isinstance(entry, dict) or not isinstance(upstream, dict):
                continue
            dropped = mc.dropped_on_undo(entry, upstream, env)
            if dropped:
                keys = ", ".join(f'"{key}"' for key in dropped)
                lines.append(f"  note: {change.name}: {keys} changed after init; undo restores the original")
    return lines


def render_diff(plan: Plan, undo: bool, environ: Mapping[str, str], width: int | None = None) -> str:
    """The unified diff, coloured, each line folded to `width` (a long JSON entry stays readable)."""
    assert plan.rewrite is not None
    label = "restored" if undo else "with Bouncer"
    shown = tilde(plan.location.path, environ)
    diff = unified_diff(plan.text, plan.rewrite.text, shown, label, plan.rewrite.edits)
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


def commit(plan: Plan, environ: Mapping[str, str], now: datetime, *, undo: bool) -> str:
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
    init_record.save(environ, record_written(plan, undo))  # first: a crash must not lose the original
    try:
        saved = backup(plan.path, plan.raw, st.st_mode, now, state_backup_dir(environ))
        write_atomically(plan.path, plan.rewrite.text.encode("utf-8"), st)
    except (OSError, UnsafeDirectoryError) as exc:
        raise InitError(f"{shown}: not written: {getattr(exc, 'strerror', None) or exc}") from None
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


def _read_all(
    candidates: list[Location], explicit: bool, environ: Mapping[str, str], *, none_ok: bool = False
) -> list[Plan]:
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
            plans.append(read_config(location, environ))
        except InitError as exc:
            errors.append(exc.message)
    if errors:
        raise InitError("nothing was changed:\n  " + "\n  ".join(errors))
    if not plans and not none_ok:
        looked = "\n  ".join(tilde(loc.path, environ) for loc in candidates)
        raise InitError(f"no MCP client config found; looked at:\n  {looked}\nName one with --config FILE.")
    return plans


@click.command()
@click.option("--client", type=click.Choice(CLIENTS), help="Only this client's configs.")
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Rewrite this file: JSON/JSONC with an mcpServers (or servers) block, or a Codex config.toml.",
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
@click.option(
    "--you",
    "you",
    multiple=True,
    metavar="ADDRESS",
    help="Your own e-mail address, handle, phone or account (repeatable), added to the policy's you:. "
    "Asked on a terminal when the policy has none.",
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
    you: tuple[str, ...],
) -> None:
    """Route your MCP clients' stdio servers through bouncer-shim (--undo puts them back).

    Finds the MCP configs of Claude Code, Claude Desktop, Cline, Codex, Cursor, Gemini CLI, LM Studio,
    VS Code, Windsurf and Zed, shows the change as a diff and asks before writing each file. The
    original entry is kept in the file under "x-bouncer-upstream" (where a client refuses unknown keys:
    in Bouncer's state directory), and a timestamped backup in the state directory. A file named with
    --config is remembered, so a plain `init --undo` finds it again.
    """
    if client and config:
        raise click.UsageError("--client and --config cannot be used together")
    environ = os.environ
    candidates = _candidates(client, config, environ)
    with_hooks = config is None and client in (None, "claude-code")
    # --hooks alone is a request of its own: Claude Code's built-in tools need them with no MCP server
    if undo and you:
        raise click.UsageError("--you adds to the policy; --undo leaves the policy alone")
    if you:
        from bouncerctl.init_you import check_you

        for value in you:  # a typo stops the run before any file is read or written
            check_you(value)
    none_ok = (with_hooks and bool(hooks)) or bool(you)
    plans = _read_all(candidates, config is not None, environ, none_ok=none_ok)
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
    env = entry_env(environ)
    errors = []
    for plan in plans:
        if plan.changes:
            try:
                if plan.shared:  # nothing of this machine in a file others use
                    rewrite(plan, mc.SHIM_NAME, {}, undo)
                else:
                    rewrite(plan, shim_path, env, undo)
            except mc.McpConfigError as exc:
                errors.append(f"{plan.location.path}: {exc}")
    if errors:
        raise InitError("nothing was changed:\n  " + "\n  ".join(errors))

    for plan in plans:
        term.echo("\n".join(term.lines_fit(summary(plan, undo, environ, env), term.columns())))
    pending = [plan for plan in plans if plan.rewrite is not None]
    if not pending:
        what = "wrapped" if undo else "to wrap"
        term.say(f"\nNothing to change: no {'stdio servers ' if not undo else 'servers '}{what}.")
        _you(environ, you, undo=undo, yes=yes, dry_run=dry_run)
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
        _you(environ, you, undo=undo, yes=yes, dry_run=True)
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
            term.say(commit(plan, environ, now, undo=undo))
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
    _you(environ, you, undo=undo, yes=yes, dry_run=False)
    if with_hooks:
        _hooks(environ, undo=undo, wanted=hooks, yes=yes, dry_run=False)
    if failures:
        raise InitError("\n".join(failures))


def _you(environ: Mapping[str, str], given: tuple[str, ...], *, undo: bool, yes: bool, dry_run: bool) -> None:
    if not undo:
        update_you(environ, given, yes=yes, dry_run=dry_run, can_ask=can_ask(), now=datetime.now(UTC))


def _hooks(environ: Mapping[str, str], *, undo: bool, wanted: bool | None, yes: bool, dry_run: bool) -> None:
    update_hooks(environ, undo=undo, wanted=wanted, yes=yes, dry_run=dry_run, now=datetime.now(UTC))
