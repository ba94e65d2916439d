"""How `bouncerctl init` changes a person's files: shown as a diff, backed up, replaced atomically.

Both steps of init use this: the MCP configs (init_cmd.py) and Claude Code's settings.json (init_hooks.py).
`unified_diff` shows a change the way ``diff -u`` would, cheaply even for a megabyte-sized ~/.claude.json;
`backup` copies the old bytes to NAME.bouncer-STAMP.bak, never over another backup: beside the file (the
policy), or for a client's config in Bouncer's state directory (`state_backup_dir`), since a backup beside a
project's ``.mcp.json`` is a file someone would commit; `write_atomically` puts the new bytes in a temporary
file in the same directory, fsyncs it and renames it over the original, keeping its mode and owner, so a crash
leaves the old file or the new one, never half of one. `InitError` is the one error init stops with (exit 1).
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import os
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

import click

from bouncerd import atomicfile
from bouncerd.paths import ensure_private_dir, resolve

EXIT_FAILED = 1

# Lines of context around each change in a diff, as `diff -u` shows them.
DIFF_CONTEXT = 3
_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")

# Where init keeps the backups of clients' configs, under Bouncer's state directory.
BACKUP_DIR = "init-backups"

# Backups are named NAME.bouncer-STAMP.bak; a second run within the same second gets -1, -2, ...
# Far more attempts than two runs a second can need; the bound only stops a loop on a broken directory.
BACKUP_ATTEMPTS = 100


class InitError(click.ClickException):
    exit_code = EXIT_FAILED


def tilde(path: Path, environ: Mapping[str, str]) -> str:
    home = environ.get("HOME", "")
    text = str(path)
    if home and home != "/" and (text == home or text.startswith(home.rstrip("/") + "/")):
        return "~" + text[len(home.rstrip("/")) :]
    return text


# ---- showing a change ---------------------------------------------------------------------------------


def split_lines(text: str) -> list[str]:
    """Lines split at "\\n" only (JSON strings may hold U+2028 and the like), each keeping its end."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _windows(
    old: str, edits: Sequence[tuple[int, int, str]], sizes: tuple[int, int]
) -> list[tuple[int, ...]]:
    """Line ranges (old start, old end, new start, new end) around each edit, with context, merged."""
    windows: list[tuple[int, ...]] = []
    growth_so_far = 0
    for start, end, replacement in sorted(edits):
        first, past = old.count("\n", 0, start), old.count("\n", 0, end) + 1
        growth = replacement.count("\n") - old.count("\n", start, end)
        lo, hi = max(0, first - DIFF_CONTEXT), min(sizes[0], past + DIFF_CONTEXT)
        new_lo, new_hi = lo + growth_so_far, hi + growth_so_far + growth
        growth_so_far += growth
        if windows and lo <= windows[-1][1]:
            windows[-1] = (windows[-1][0], hi, windows[-1][2], new_hi)
        else:
            windows.append((lo, hi, new_lo, new_hi))
    return windows


def unified_diff(
    old: str, new: str, path: str, label: str, edits: Sequence[tuple[int, int, str]] = ()
) -> str:
    """A unified diff a person can read, every line ending with a newline.

    difflib's work grows with the square of what it compares and ~/.claude.json runs to megabytes,
    so with the `edits` known only the lines around each one are compared, and the hunks' line
    numbers shifted back into place.
    """
    a, b = split_lines(old), split_lines(new)
    windows = _windows(old, edits, (len(a), len(b))) if edits else [(0, len(a), 0, len(b))]
    out = []
    for a0, a1, b0, b1 in windows:
        for line in itertools.islice(difflib.unified_diff(a[a0:a1], b[b0:b1], n=DIFF_CONTEXT), 2, None):
            hunk = _HUNK.match(line)
            if hunk:
                old_at, old_len, new_at, new_len = hunk.groups()
                line = f"@@ -{int(old_at) + a0}{old_len or ''} +{int(new_at) + b0}{new_len or ''} @@\n"
            out.append(
                line.rstrip("\r\n") + "\n"
                if line.endswith("\n")
                else line + "\n\\ No newline at end of file\n"
            )
    if not out:
        return ""
    return f"--- {path}\n+++ {path} ({label})\n" + "".join(out)


# ---- writing ------------------------------------------------------------------------------------------


def state_backup_dir(environ: Mapping[str, str]) -> Path:
    """The private directory (0700) init's backups go to: never beside a file a team may commit."""
    where = resolve(environ).state / BACKUP_DIR
    ensure_private_dir(where)
    return where


def backup(path: Path, data: bytes, mode: int, now: datetime, directory: Path | None = None) -> Path:
    """Copy `data` to NAME.bouncer-STAMP.bak (never over an existing file): beside `path`, or in
    `directory`, where the name also carries a digest of the file's real path (two projects'
    ``.mcp.json`` stay apart)."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    name = path.name
    if directory is not None:
        digest = hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()[:12]
        name = f"{name}.{digest}"
    for attempt in range(BACKUP_ATTEMPTS):
        suffix = f"-{attempt}" if attempt else ""
        target = (directory or path.parent) / f"{name}.bouncer-{stamp}{suffix}.bak"
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode & 0o777)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return target
    raise OSError(f"no free backup name beside {path}")


def write_atomically(path: Path, data: bytes, like: os.stat_result) -> None:
    """Replace `path` with `data` atomically (`bouncerd.atomicfile`), its mode (and owner) kept."""
    atomicfile.write_atomically(path, data, mode=like.st_mode & 0o7777, owner=(like.st_uid, like.st_gid))
