"""``bouncerctl tail [-f] [-n N]``: the audit log as it happens, one readable line per record.

Each verdict shows local time, server, tool, the verdict (coloured on a terminal: allow green, ask
yellow, deny red), the rule and the reason, cut to the terminal's width; piped, lines are plain and
whole. Records that are not verdicts (policy reloads, pins accepted, approvals, audit repairs and
rotations) are shown too, marked with their kind in place of a verdict. A line that is not an audit
record is shown as such, never skipped silently and never a crash. Argument values are not shown.

``-n N`` starts with the last N records, found by reading the file backwards in slices (a large log
is not read whole). ``-f`` then follows the file: `Follower` polls for appended bytes, hands on only
whole lines, and when the daemon rotates the log (the file at the path is a new one) it finishes the
old file, reads any file rotated in between, and continues at the start of the new one.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
import time
from pathlib import Path
from typing import IO, Any

import click

from bouncerd.auditfiles import predecessors
from bouncerd.core.audit import loads_line
from bouncerd.paths import resolve

# How often -f looks for new lines: a person reading along sees them within a quarter second, and an
# idle follower costs a stat call four times a second.
FOLLOW_POLL_SECONDS = 0.25

# Reading backwards for -n in slices of this size.
TAIL_CHUNK_BYTES = 64 * 1024

# A line the follower is still waiting to see end is held up to this size; a longer one (a huge
# record) is shown as it stands once the limit is reached, so memory stays bounded.
MAX_PENDING_BYTES = 80 * 1024 * 1024

VERDICT_STYLE = {"allow": ("green", False), "ask": ("yellow", True), "deny": ("red", True)}
SERVER_WIDTH, TOOL_WIDTH, KIND_WIDTH, RULE_WIDTH = 12, 20, 8, 26


def _fit(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"


def _local_time(ts: Any) -> str:
    if not isinstance(ts, str):
        return "?".ljust(15)
    try:
        moment = dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return _fit(ts, 15)
    return moment.strftime("%b %d %H:%M:%S")


def event_kind(rule: str) -> str:
    """The mark of a record that is not a verdict: the family of its rule (``policy``, ``pins``, …)."""
    family = rule.split(".", 1)[0] if rule else "event"
    return family.upper()[:KIND_WIDTH]


def format_record(obj: Any, *, width: int | None) -> str:
    """One line for one parsed audit line (styled; click.echo strips the style when piped)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("ts"), str):
        return click.style("(a line that is not an audit record: torn, edited or foreign)", fg="magenta")
    verdict = obj.get("verdict")
    rule = str(obj.get("rule") or "")
    server = str(obj.get("server") or "-")
    tool = str(obj.get("tool") or "-")
    if isinstance(verdict, str) and verdict in VERDICT_STYLE:
        colour, bold = VERDICT_STYLE[verdict]
        mark = click.style(_fit(verdict.upper(), KIND_WIDTH), fg=colour, bold=bold)
    else:
        mark = click.style(_fit(event_kind(rule), KIND_WIDTH), fg="cyan")
    reason = " ".join(str(obj.get("reason") or "").split())
    head = (
        f"{click.style(_local_time(obj['ts']), dim=True)}  {_fit(server, SERVER_WIDTH)}  "
        f"{_fit(tool, TOOL_WIDTH)}  {mark}  {_fit(rule, RULE_WIDTH)}  "
    )
    if width is not None:
        room = width - len(click.unstyle(head))
        reason = reason if len(reason) <= room else (reason[: max(room - 1, 0)] + "…" if room > 1 else "")
    return (head + reason).rstrip()


def last_lines(fh: IO[bytes], count: int) -> list[bytes]:
    """The last `count` lines of a file (a torn last line counts), reading backwards in slices."""
    end = fh.seek(0, os.SEEK_END)
    if count <= 0:
        return []
    chunks: list[bytes] = []
    newlines = 0
    pos = end
    while pos > 0 and newlines <= count:
        step = min(TAIL_CHUNK_BYTES, pos)
        pos -= step
        fh.seek(pos)
        chunk = fh.read(step)
        chunks.append(chunk)
        newlines += chunk.count(b"\n")
    fh.seek(end)
    data = b"".join(reversed(chunks))
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]  # what follows the last newline: empty, or a torn line
    if not lines[-1]:
        lines.pop()
    if pos > 0:
        lines = lines[1:]  # the first piece may be the end of an earlier line
    return lines[-count:]


class Follower:
    """Whole lines appended to a file, across the daemon's rotation of it."""

    def __init__(self, path: Path, fh: IO[bytes] | None) -> None:
        self.path = path
        self.fh = fh
        self.pending = b""

    def _reopen(self) -> bool:
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return False
        if self.fh is not None:
            self.fh.close()
        self.fh = fh
        return True

    def _replaced(self) -> bool:
        assert self.fh is not None
        try:
            on_disk = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(self.fh.fileno())
        moved = (on_disk.st_ino, on_disk.st_dev) != (mine.st_ino, mine.st_dev)
        return moved or on_disk.st_size < self.fh.tell()  # rotated, or cut short and begun again

    def poll(self) -> list[bytes]:
        if self.fh is None and not self._reopen():
            return []
        assert self.fh is not None
        out = self._drain()
        if self._replaced():
            out += self._drain()  # whatever the daemon wrote to the old file before it moved
            old = os.fstat(self.fh.fileno())
            if self.pending:
                out.append(self.pending)  # the old file ended without a newline: a torn line
                self.pending = b""
            for between in self._rotated_after(old.st_ino, old.st_dev):
                with between.open("rb") as fh:  # rotated more than once since the last poll
                    out += fh.readlines()
            self._reopen()
            out += self._drain()
        return out

    def _rotated_after(self, ino: int, dev: int) -> list[Path]:
        """Rotated files newer than the one we had open (oldest first): usually none."""
        older = predecessors(self.path)
        for i, path in enumerate(older):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            if (st.st_ino, st.st_dev) == (ino, dev):
                return older[i + 1 :]
        return []

    def _drain(self) -> list[bytes]:
        assert self.fh is not None
        data = self.fh.read()
        if not data:
            return []
        self.pending += data
        *whole, self.pending = self.pending.split(b"\n")
        out = [line + b"\n" for line in whole]
        if len(self.pending) > MAX_PENDING_BYTES:
            out.append(self.pending)
            self.pending = b""
        return out

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


def _width() -> int | None:
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


@click.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing records as they are written.")
@click.option(
    "-n",
    "--lines",
    "count",
    type=click.IntRange(min=0),
    metavar="N",
    default=10,
    show_default=True,
    help="Start with the last N records.",
)
@click.option(
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The audit log to read (default: this environment's).",
)
def tail(follow: bool, count: int, file: Path | None) -> None:
    """Print the latest audit records, one line each; -f follows the log as it grows."""
    path = file or resolve(os.environ).audit
    try:
        fh: IO[bytes] | None = path.open("rb")
    except FileNotFoundError:
        if not follow:
            raise click.ClickException(f"no audit log at {path}") from None
        fh = None
        click.echo(f"waiting for {path} to appear…", err=True)
    width = _width()
    if fh is not None:
        for line in last_lines(fh, count):
            click.echo(format_record(loads_line(line), width=width))
    if not follow:
        if fh is not None:
            fh.close()
        return
    follower = Follower(path, fh)
    try:
        while True:
            for line in follower.poll():
                click.echo(format_record(loads_line(line), width=_width()))
            time.sleep(FOLLOW_POLL_SECONDS)
    except KeyboardInterrupt:
        pass
    finally:
        follower.close()
