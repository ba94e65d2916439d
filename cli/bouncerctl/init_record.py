"""What `bouncerctl init` keeps in Bouncer's state directory so that `--undo` gives files back byte for byte.

Theory of operation
-------------------
One record per file init changed, ``STATE/init-undo/<sha256 of the file's real path>.json`` (0600, in a
0700 directory, written to a temporary file and renamed over the old record, so a crash leaves the old
record or the new one). A record holds:

- ``path``: the file's real path (the key; the digest only makes it a file name);
- ``original`` and ``written``: the file's text before init first changed it and the text init last
  wrote. When the file still holds exactly ``written``, undo puts ``original`` back: byte for byte,
  whatever the format (JSON, JSONC, TOML, a one-line settings.json). ``original`` is None when there is
  no such chain (the file had wrapped entries that no record explains, or was undone in part);
  ``absent`` says the file did not exist before (Claude Code's settings.json: undo removes it again);
- ``named``: the file was named with ``init --config`` (a client init does not know by itself): it is
  remembered, so a plain ``init --undo``, ``doctor`` and ``status`` find it (`remembered`, from a
  small ``<digest>.named`` marker beside the record that holds only the path);
- ``entries``: per server, keyed by server block + name, what a client whose schema rejects unknown
  keys (Gemini CLI, Codex) cannot keep in its own file: the entry's original text (JSON) or the
  original ``command``/``args`` tokens and the ``env`` keys init added (TOML). Undo uses them when the
  file changed after init (the client rewrote it, the person edited another part).

A record that cannot be read or does not have this shape is an `InitError` naming it: init does not
guess at what it would undo.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bouncerctl.init_files import InitError
from bouncerd.atomicfile import write_atomically
from bouncerd.errors import UnsafeDirectoryError
from bouncerd.paths import ensure_private_dir, resolve

RECORD_DIR = "init-undo"
RECORD_VERSION = 1
# Entries are text copied out of a person's config; a record much larger than any config is not ours.
MAX_RECORD_BYTES = 64 * 1024 * 1024
# A marker holds one path; PATH_MAX on Linux is 4096 bytes, far more than any config's path.
MAX_PATH_BYTES = 4096


@dataclass
class Record:
    path: str
    original: str | None = None
    written: str | None = None
    absent: bool = False
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    named: bool = False  # named with --config: found again by `remembered`

    def empty(self) -> bool:
        return self.original is None and not self.absent and not self.entries


def entry_key(block: Sequence[str], name: str) -> str:
    """One key per server: its block's path and its name, joined by a separator no JSON key needs."""
    return "\x1f".join([*block, name])


def record_dir(environ: Mapping[str, str]) -> Path:
    return resolve(environ).state / RECORD_DIR


def record_file(environ: Mapping[str, str], path: Path) -> Path:
    digest = hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()[:32]
    return record_dir(environ) / f"{digest}.json"


def load(environ: Mapping[str, str], path: Path) -> Record:
    """The record for the config at `path` (an empty one if there is none)."""
    real = os.path.realpath(path)
    where = record_file(environ, path)
    try:
        with where.open("rb") as fh:
            raw = fh.read(MAX_RECORD_BYTES + 1)
    except FileNotFoundError:
        return Record(real)
    except OSError as exc:
        raise InitError(f"{where}: cannot read init's undo record: {exc.strerror or exc}") from None
    try:
        if len(raw) > MAX_RECORD_BYTES:
            raise ValueError(f"larger than {MAX_RECORD_BYTES} bytes")
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("version") != RECORD_VERSION:
            raise ValueError(f"not a version {RECORD_VERSION} record")
        if data.get("path") != real:
            raise ValueError(f"it is the record of {data.get('path')!r}, not of {real}")
        original, written, entries = data.get("original"), data.get("written"), data.get("entries", {})
        for name, value in (("original", original), ("written", written)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f'"{name}" is not a string')
        if not isinstance(entries, dict) or not all(isinstance(v, dict) for v in entries.values()):
            raise ValueError('"entries" is not an object of objects')
        named = data.get("named") is True
        return Record(real, original, written, data.get("absent") is True, entries, named)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InitError(f"{where}: init's undo record is damaged ({exc}); move it away to go on") from None


def _named_marker(where: Path) -> Path:
    """Beside a named file's record, a small file holding only its path: `remembered` reads these,
    not the records (a record may hold megabytes of ~/.claude.json, and `status` runs it)."""
    return where.with_suffix(".named")


def save(environ: Mapping[str, str], record: Record) -> None:
    """Write (or, when there is nothing left to undo, remove) the record, atomically."""
    where = record_file(environ, Path(record.path))
    marker = _named_marker(where)
    if record.empty():
        for path in (marker, where):  # the marker first: a crash leaves a record, never a stray marker
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return
    data = {
        "version": RECORD_VERSION,
        "path": record.path,
        "original": record.original,
        "written": record.written,
        "absent": record.absent,
        "entries": record.entries,
        "named": record.named,
    }
    try:
        ensure_private_dir(where.parent)
        write_atomically(where, json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8"))
        if record.named:
            write_atomically(marker, os.fsencode(record.path))
    except (OSError, UnsafeDirectoryError) as exc:
        raise InitError(f"{where}: cannot write init's undo record: {exc}") from None


def remembered(environ: Mapping[str, str]) -> list[Path]:
    """The files init changed when named with --config, that still have something to undo.

    Read from the small markers beside their records; a marker without its record is passed over."""
    try:
        markers = sorted(record_dir(environ).glob("*.named"))
    except OSError:
        return []
    paths = []
    for marker in markers:
        try:
            if not marker.with_suffix(".json").exists():
                continue
            with marker.open("rb") as fh:
                paths.append(Path(os.fsdecode(fh.read(MAX_PATH_BYTES))))
        except OSError:
            continue
    return paths


def after_write(record: Record, before: str | None, after: str, *, clean: bool) -> None:
    """Note that init replaced `before` (None: no file) by `after`. `clean`: `before` had nothing wrapped."""
    if (
        record.written is not None
        and record.written == before
        and (record.original is not None or record.absent)
    ):
        pass  # the chain goes on: undo still goes back to the first original
    elif before is None:
        record.original, record.absent = None, True
    elif clean:
        record.original, record.absent = before, False
    else:
        record.original, record.absent = None, False
    record.written = after


def whole_file(record: Record, current: str | None) -> str | None:
    """The text undo can put back whole ("" with `record.absent`: remove the file), or None."""
    if record.written is None or current != record.written:
        return None
    if record.absent:
        return ""
    return record.original
