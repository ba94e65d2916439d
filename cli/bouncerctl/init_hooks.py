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

from bouncerctl import init_record, term
from bouncerctl.hook_settings import claude_settings_with_hooks, claude_settings_without_hooks
from bouncerctl.init_files import (
    InitError,
    backup,
    state_backup_dir,
    tilde,
    unified_diff,
    write_atomically,
)
from bouncerctl.mcpconfig import serialise
from bouncerd.errors import UnsafeDirectoryError


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
    record = init_record.load(environ, path)
    try:
        existed = path.exists()
        old_bytes = path.read_bytes() if existed else b""
        old_text = old_bytes.decode("utf-8")
        old = json.loads(old_text) if old_text.strip() else {}
        if not isinstance(old, dict):
            raise ValueError("the file does not hold a JSON object")
        new = claude_settings_without_hooks(old) if undo else claude_settings_with_hooks(old, hook_command())
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise InitError(f"{shown}: cannot update Claude Code's hooks: {exc}") from None
    if new == old:
        if wanted:
            term.say(f"\n{shown}: Bouncer's hooks are {'absent' if undo else 'already installed'}.")
        if undo:
            init_record.save(environ, init_record.Record(record.path))  # nothing of ours left to undo
        return
    whole = init_record.whole_file(record, old_text if existed else None) if undo else None
    remove = whole == "" and record.absent  # init created the file, and it holds only what init wrote
    if whole is not None:
        new_text = whole
    else:  # in the file's own layout (indentation, line ends), so the diff shows only the hooks
        new_text = serialise(new, old_text) if old_text.strip() else json.dumps(new, indent=2) + "\n"
    new_bytes = new_text.encode("utf-8")
    term.say(f"\nClaude Code hooks ({'remove' if undo else 'vouch what you type, watch built-in tools'}):")
    click.echo(unified_diff(old_text, new_text, shown, "hooks"), nl=False)
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
    if not undo:
        clean = claude_settings_without_hooks(old) == old
        init_record.after_write(record, old_text if existed else None, new_text, clean=clean)
        init_record.save(environ, record)  # first: a crash must not lose the original text
    try:
        if remove:
            path.unlink()
            term.say(f"removed {shown} (init had created it)")
        elif existed:
            st = path.stat()
            saved = backup(path, old_bytes, st.st_mode, now, state_backup_dir(environ))
            write_atomically(path, new_bytes, st)
            term.say(f"wrote {shown} (backup: {tilde(saved, environ)})")
        else:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(new_bytes)
            term.say(f"wrote {shown}")
    except (OSError, UnsafeDirectoryError) as exc:
        raise InitError(f"{shown}: not written: {getattr(exc, 'strerror', None) or exc}") from None
    if undo:
        init_record.save(environ, init_record.Record(record.path))
