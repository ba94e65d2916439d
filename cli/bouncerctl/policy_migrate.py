"""``bouncerctl policy migrate FILE``: a bouncer-mcp 0.1.x policy carried over into this layout.

Theory of operation
-------------------
bouncer-mcp 0.1.x read a policy whose top level maps tool names to entries::

    send_email:
      exfiltrating: true
      sink_params: [to, cc, bcc]

This loader wants them under ``tools:`` (or ``servers.NAME.tools:``) and refuses the old file,
naming this command. `migrate_text` moves every top-level key that is not one of this layout's own
(``version``, the settings, ``packs``) under a new ``tools:`` key by indenting its lines two spaces,
so comments, quoting and order stay as the person wrote them. The result is checked twice: it must
parse to exactly the expected value (else the file is re-serialised, and the person told that its
comments are gone), and the real loader (`bouncerd.core.policy.load_policy`) must accept it; otherwise
nothing is written and the loader's error is shown.

What 0.1.x accepted and this version refuses is an error naming the line, never a guess:
- a relative ``allowed_path_prefixes`` entry (0.1.x resolved it against whatever directory the
  client started the proxy in): give ``--relative-to DIR`` to make each one absolute against DIR;
- an empty entry (``send_email:`` with nothing under it): 0.1.x read it as "no rules", which turned a
  pack's gate off for that tool; write the rules meant, or delete the line.

One change of meaning is said, not hidden: 0.1.x let a user entry *replace* the pack's entry, so an
entry without ``exfiltrating: true`` turned a pack's sink gate off; here entries fold key by key over
the pack, so that gate stays on. Stricter, never looser.

The command shows the diff, asks (``--yes`` skips it; with no terminal and no ``--yes`` nothing is
written), copies the old bytes to a timestamped backup beside the file and writes the new text
atomically (init_files).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import yaml

from bouncerctl.init_files import InitError, backup, unified_diff, write_atomically
from bouncerd.core.policy import SETTING_KEYS, TOP_KEYS, load_policy
from bouncerd.errors import PolicyError
from bouncerd.policyfiles import MAX_POLICY_BYTES

# Kept at the top level: this layout's own keys that 0.1.x never had (a tool could not be named so).
KEPT_KEYS = ("version", *SETTING_KEYS, "packs")
INDENT = "  "


class MigrateError(InitError):
    """The file cannot be migrated; the message names the file, line and reason."""


@dataclass
class Migration:
    text: str
    moved: list[str]
    notes: list[str] = field(default_factory=list)


def _compose(text: str, filename: str) -> Any:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else 1
        raise MigrateError(f"{filename}:{line}: not YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise MigrateError(f"{filename}: not YAML: {exc}") from None


def _prefix_edits(
    node: Any, tool: str, filename: str, relative_to: Path | None
) -> list[tuple[int, int, str]]:
    """Edits making each relative allowed_path_prefixes entry of one tool absolute (or MigrateError)."""
    edits: list[tuple[int, int, str]] = []
    if not isinstance(node, yaml.MappingNode):
        return edits
    for key, value in node.value:
        if key.value != "allowed_path_prefixes" or not isinstance(value, yaml.SequenceNode):
            continue
        for item in value.value:
            if not isinstance(item, yaml.ScalarNode) or os.path.isabs(str(item.value)):
                continue
            line = item.start_mark.line + 1
            if relative_to is None:
                raise MigrateError(
                    f"{filename}:{line}: {tool}.allowed_path_prefixes: {item.value!r} is relative; 0.1.x "
                    f"resolved it against the directory the client started the proxy in, and this "
                    f"version needs an absolute path. Give --relative-to DIR to resolve it against DIR."
                )
            absolute = os.path.normpath(os.path.join(relative_to, str(item.value)))
            edits.append((item.start_mark.index, item.end_mark.index, json.dumps(absolute)))
    return edits


def migrate_text(text: str, filename: str, relative_to: Path | None = None) -> Migration:
    """The 0.1.x policy `text` in this layout. MigrateError (file, line, reason) if it cannot be."""
    root = _compose(text, filename)
    if root is None or not isinstance(root, yaml.MappingNode) or not root.value:
        raise MigrateError(f"{filename}: not a mapping of tool names to rules; nothing to migrate")
    names = [str(key.value) for key, _ in root.value]
    moved = [name for name in names if name not in TOP_KEYS]
    if not moved:
        raise MigrateError(f"{filename}: already in this layout (no tool names at the top level)")
    if "tools" in names or "servers" in names:
        raise MigrateError(
            f"{filename}: has a tools: (or servers:) section and tool names at the top level "
            f"({', '.join(moved)}); move those under tools: by hand"
        )
    stray = [name for name in names if name in TOP_KEYS and name not in KEPT_KEYS]
    assert not stray, stray
    edits: list[tuple[int, int, str]] = []
    notes: list[str] = []
    loose = []
    for key, value in root.value:
        if key.value in KEPT_KEYS:
            continue
        line = key.start_mark.line + 1
        if isinstance(value, yaml.ScalarNode) and value.value in ("", "~", "null"):
            raise MigrateError(
                f"{filename}:{line}: {key.value}: an empty entry. 0.1.x read it as no rules, which turned "
                f"a pack's gate for this tool off; write the rules you mean, or delete it"
            )
        edits += _prefix_edits(value, str(key.value), filename, relative_to)
        if isinstance(value, yaml.MappingNode) and not any(k.value == "exfiltrating" for k, _ in value.value):
            loose.append(str(key.value))
    if loose:
        notes.append(
            f"note: {', '.join(loose)}: no exfiltrating key. In 0.1.x such an entry replaced the pack's "
            f"and turned its sink gate off; here it adds to the pack's entry, so a pack's gate stays on. "
            f"Write exfiltrating: false to turn it off."
        )
    fixed = text
    for start, end, replacement in sorted(edits, reverse=True):
        fixed = fixed[:start] + replacement + fixed[end:]
    expected = yaml.safe_load(fixed)
    want = {k: v for k, v in expected.items() if k in KEPT_KEYS}
    want["tools"] = {k: v for k, v in expected.items() if k not in KEPT_KEYS}
    new = _moved_text(fixed, _compose(fixed, filename))
    try:
        same = new is not None and yaml.safe_load(new) == want
    except yaml.YAMLError:
        same = False
    if new is None or not same:
        new = yaml.safe_dump(want, sort_keys=False, allow_unicode=True)
        notes.append(
            "note: the file could not be moved line by line; it is re-written, and its comments are gone"
        )
    try:
        load_policy(new, filename)
    except PolicyError as exc:
        raise MigrateError(f"the migrated policy would not load, so nothing was written:\n{exc}") from None
    return Migration(new, moved, notes)


def _moved_text(text: str, root: Any) -> str | None:
    """Top-level entries not in KEPT_KEYS moved under ``tools:`` line by line; None if not block style."""
    if root.flow_style or any(key.start_mark.column != 0 for key, _ in root.value):
        return None
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if "\r\n" in text else "\n"
    bounds = []
    start = root.value[0][0].start_mark.line
    header = lines[:start]
    for i, (_key, value) in enumerate(root.value):
        end = value.end_mark.line + (1 if value.end_mark.column > 0 else 0)
        end = len(lines) if i == len(root.value) - 1 else max(end, start + 1)
        bounds.append((start, end))
        start = end
    kept: list[str] = []
    moved: list[str] = []
    for (key, _), (lo, hi) in zip(root.value, bounds, strict=True):
        segment = lines[lo:hi]
        if segment and not segment[-1].endswith("\n"):
            segment[-1] += newline
        if key.value in KEPT_KEYS:
            kept += segment
        else:
            moved += [INDENT + line if line.strip() else line for line in segment]
    out = "".join([*header, *kept, "tools:" + newline, *moved])
    return out if text.endswith("\n") else out.rstrip("\r\n")


@click.command("migrate")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--yes", "-y", is_flag=True, help="Write without asking.")
@click.option("--dry-run", is_flag=True, help="Show the change; write nothing.")
@click.option(
    "--relative-to",
    type=click.Path(file_okay=False, path_type=Path),
    help="Resolve relative allowed_path_prefixes against this directory (0.1.x used the client's).",
)
def migrate(file: Path, yes: bool, dry_run: bool, relative_to: Path | None) -> None:
    """Move a bouncer-mcp 0.1.x policy FILE (tool names at the top level) into this layout."""
    shown = str(file)
    try:
        if file.stat().st_size > MAX_POLICY_BYTES:
            raise MigrateError(f"{shown}: too large for a policy (limit {MAX_POLICY_BYTES} bytes)")
        raw = file.read_bytes()
        st = file.stat()
    except OSError as exc:
        raise MigrateError(f"{shown}: cannot read it: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MigrateError(f"{shown}: not UTF-8 text (byte {exc.start})") from None
    base = relative_to.absolute() if relative_to is not None else None
    result = migrate_text(text, shown, base)
    click.echo(f"{shown}: {len(result.moved)} tool entries move under tools: ({', '.join(result.moved)})")
    click.echo(unified_diff(text, result.text, shown, "migrated"), nl=False)
    for note in result.notes:
        click.echo(note)
    if dry_run:
        click.echo("Dry run: nothing written.")
        return
    if not yes:
        if not (sys.stdin is not None and sys.stdin.isatty()):
            raise MigrateError(
                "not writing: there is no terminal to ask on. Re-run with --yes, or --dry-run."
            )
        if not click.confirm(f"Write {shown}?", default=False):
            click.echo(f"left {shown} unchanged")
            return
    try:
        if file.read_bytes() != raw:
            raise MigrateError(f"{shown}: changed since it was read; not written. Run migrate again.")
        saved = backup(file, raw, st.st_mode, datetime.now(UTC))
        write_atomically(file, result.text.encode("utf-8"), st)
    except OSError as exc:
        raise MigrateError(f"{shown}: not written: {exc.strerror or exc}") from None
    click.echo(f"wrote {shown} (backup: {saved})")
