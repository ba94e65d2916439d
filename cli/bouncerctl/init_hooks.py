"""`bouncerctl init`'s second step for Claude Code: its hooks in ~/.claude/settings.json.

The hooks (cli/bouncerctl/hook.py) vouch the destinations the user types, record the output of
Claude Code's own tools as untrusted, and gate its network tools. They are installed only when the
person agrees (asked on a terminal, or `--hooks` for scripts), with a diff and a backup, the same way
init rewrites MCP configs; `init --undo` removes them and keeps every other hook.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import click

from bouncerctl import term
from bouncerctl.hook_settings import claude_settings_with_hooks, claude_settings_without_hooks
from bouncerctl.init_files import InitError, backup, tilde, unified_diff, write_atomically


def settings_path(environ: Mapping[str, str]) -> Path:
    config = environ.get("CLAUDE_CONFIG_DIR")
    base = Path(config).expanduser() if config else Path(environ.get("HOME", "~")).expanduser() / ".claude"
    return base / "settings.json"


def hook_command() -> list[str]:
    here = Path(sys.executable).parent / "bouncerctl"
    exe = str(here) if here.exists() else (shutil.which("bouncerctl") or "bouncerctl")
    return [os.path.abspath(exe) if os.sep in exe else exe, "hook", "claude-code"]


def update_hooks(
    environ: Mapping[str, str], *, undo: bool, wanted: bool | None, yes: bool, dry_run: bool, now: datetime
) -> None:
    """Install (or with undo remove) Bouncer's Claude Code hooks. `wanted`: --hooks/--no-hooks/unset."""
    if wanted is False:
        return
    path = settings_path(environ)
    shown = tilde(path, environ)
    try:
        old_bytes = path.read_bytes() if path.exists() else b""
        old = json.loads(old_bytes) if old_bytes.strip() else {}
        if not isinstance(old, dict):
            raise ValueError("the file does not hold a JSON object")
        new = claude_settings_without_hooks(old) if undo else claude_settings_with_hooks(old, hook_command())
    except (OSError, ValueError) as exc:
        raise InitError(f"{shown}: cannot update Claude Code's hooks: {exc}") from None
    if new == old:
        if wanted:
            term.say(f"\n{shown}: Bouncer's hooks are {'absent' if undo else 'already installed'}.")
        return
    new_bytes = (json.dumps(new, indent=2, ensure_ascii=False) + "\n").encode()
    term.say(f"\nClaude Code hooks ({'remove' if undo else 'vouch what you type, watch built-in tools'}):")
    click.echo(unified_diff(old_bytes.decode(errors="replace"), new_bytes.decode(), shown, "hooks"), nl=False)
    if dry_run:
        return
    if not yes or wanted is None:
        if not (os.isatty(0) and os.isatty(1)):
            if wanted is None:
                term.say("(hooks left unchanged: re-run with --hooks to install them without a terminal)")
                return
        elif not click.confirm(f"Write {shown}?", default=False):
            term.say(f"left {shown} unchanged")
            return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.exists():
        st = path.stat()
        saved = backup(path, old_bytes, st.st_mode, now)
        write_atomically(path, new_bytes, st)
        term.say(f"wrote {shown} (backup: {saved.name})")
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(new_bytes)
        term.say(f"wrote {shown}")
