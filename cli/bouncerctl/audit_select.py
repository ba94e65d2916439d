"""Which audit records ``bouncerctl tail`` shows: its filters, and the log read newest first.

`Selection` holds the filters (``--server``, ``--verdict``, ``--since``); a record passes when it
matches every filter given. A line that is not an audit record (torn, edited, foreign) always passes:
it cannot be judged, and it must not vanish from the view because a filter was given.

``--since`` takes a duration back from now (``90s``, ``10m``, ``2h``, ``1d``, ``1h30m``) or a time in
ISO 8601 (``2026-12-01``, ``2026-12-01T09:30``, ``2026-12-01 09:30:00+01:00``); a time without a zone
is local time, as ``tail`` shows it. Anything else is a usage error naming the value.

`newest_first` reads the live file backwards in slices, then its rotated predecessors (``.1`` …
``.N``), so ``-n`` and ``--since`` reach back across a rotation without reading a large log whole.
`pick` stops as soon as it has the records asked for, or meets a record older than ``--since`` (the
daemon writes records in time order).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click

from bouncerd.auditfiles import predecessors

# Reading backwards in slices of this size: large enough that a screenful of records is one read.
TAIL_CHUNK_BYTES = 64 * 1024

_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_UNIT_SECONDS = (86400, 3600, 60, 1)


def parse_since(value: str, now: dt.datetime) -> dt.datetime:
    """The moment `value` names (see the module doc); click.BadParameter if it names none."""
    text = value.strip()
    match = _DURATION.fullmatch(text)
    if text and match is not None and any(match.groups()):
        seconds = sum(int(n or 0) * unit for n, unit in zip(match.groups(), _UNIT_SECONDS, strict=True))
        return now - dt.timedelta(seconds=seconds)
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither a duration (10m, 2h, 1d, 1h30m) nor an ISO time (2026-12-01T09:30)",
            param_hint="--since",
        ) from None
    return moment if moment.tzinfo is not None else moment.astimezone()


def record_time(obj: dict[str, Any]) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(obj["ts"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None


@dataclass(frozen=True)
class Selection:
    servers: frozenset[str] = frozenset()
    verdicts: frozenset[str] = frozenset()
    since: dt.datetime | None = None

    def passes(self, obj: Any) -> bool:
        if not (isinstance(obj, dict) and isinstance(obj.get("ts"), str)):
            return True  # not a record: shown as such, whatever the filters
        if self.servers and obj.get("server") not in self.servers:
            return False
        if self.verdicts and obj.get("verdict") not in self.verdicts:
            return False
        if self.since is not None:
            when = record_time(obj)
            return when is None or when >= self.since  # an unreadable time is shown, not hidden
        return True

    def before_since(self, obj: Any) -> bool:
        """Whether `obj` is a record older than --since: everything before it is older too."""
        if self.since is None or not isinstance(obj, dict):
            return False
        when = record_time(obj)
        return when is not None and when < self.since


def lines_backwards(fh: IO[bytes], end: int | None = None) -> Iterator[bytes]:
    """The lines of a file, last first (a torn last line counts), reading backwards in slices; with
    `end`, those before that offset (what a follower starting there will not print again)."""
    if end is None:
        end = fh.seek(0, os.SEEK_END)
    if end == 0:
        return
    fh.seek(end - 1)
    ends_whole = fh.read(1) == b"\n"
    final = b"\n" if ends_whole else b""  # a torn last line is handed on as it is
    pos = end - 1 if ends_whole else end
    rest = b""  # the end of a line whose start lies in an earlier slice
    last = True
    while pos > 0:
        step = min(TAIL_CHUNK_BYTES, pos)
        pos -= step
        fh.seek(pos)
        pieces = (fh.read(step) + rest).split(b"\n")
        rest = pieces[0]
        for piece in reversed(pieces[1:]):
            yield piece + (final if last else b"\n")
            last = False
    yield rest + (final if last else b"\n")


def newest_first(path: Path) -> Iterator[bytes]:
    """The lines of the log at `path`, then of its rotated files, newest first."""
    for each in [path, *reversed(predecessors(path))]:
        try:
            fh = each.open("rb")
        except FileNotFoundError:
            continue
        with fh:
            yield from lines_backwards(fh)


def pick(lines: Iterator[bytes], count: int | None, selection: Selection) -> list[tuple[bytes, Any]]:
    """Up to `count` (None: no limit) lines that pass `selection`, oldest first, with their parse."""
    from bouncerd.core.audit import loads_line

    chosen: list[tuple[bytes, Any]] = []
    if count == 0:
        return chosen
    for line in lines:
        obj = loads_line(line)
        if selection.before_since(obj):
            break
        if selection.passes(obj):
            chosen.append((line, obj))
            if count is not None and len(chosen) >= count:
                break
    chosen.reverse()
    return chosen
