"""``bouncerctl tail [-f] [-n N]``: the audit log as it happens, one readable record at a time.

Each verdict shows local time, the verdict (coloured where colour is on: allow green, ask yellow,
deny red), server, tool, the rule and the reason. On a terminal the record is fitted to its width: a
reason that does not fit beside the rest is wrapped under it, indented, never cut. Piped, each record
is one plain line in padded columns, whole, for grep; ``--json`` prints each record as one line of
JSON, as the daemon wrote it. Records that are not verdicts (policy reloads, pins accepted,
approvals, audit repairs and rotations) are shown too, marked with their kind in place of a verdict.
A line that is not an audit record is shown as such, never skipped silently and never a crash.
Argument values are not shown (the records hold only their digests unless the policy says otherwise).

``--server``, ``--verdict`` and ``--since`` select records (`bouncerctl.audit_select`); ``-n N``
starts with the last N that pass, found by reading the log backwards in slices, across rotated files
(a large log is not read whole). ``-f`` then follows the file: `Follower` polls for appended bytes,
hands on only whole lines, and when the daemon rotates the log (the file at the path is a new one) it
finishes the old file, reads any file rotated in between, and continues at the start of the new one.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path
from typing import IO, Any

import click

from bouncerctl import term
from bouncerd.auditfiles import predecessors
from bouncerd.core.audit import loads_line
from bouncerd.paths import resolve

# How often -f looks for new lines: a person reading along sees them within a quarter second, and an
# idle follower costs a stat call four times a second.
FOLLOW_POLL_SECONDS = 0.25

# A line the follower is still waiting to see end is held up to this size; a longer one (a huge
# record) is shown as it stands once the limit is reached, so memory stays bounded.
MAX_PENDING_BYTES = 80 * 1024 * 1024

VERDICT_STYLE = {"allow": ("green", False), "ask": ("yellow", True), "deny": ("red", True)}
VERDICTS = tuple(VERDICT_STYLE)
# Piped (one record a line, for grep) the columns are padded to these widths; longer names are kept
# whole and push the rest right. On a terminal the columns give way to a line fitted to its width.
SERVER_WIDTH, TOOL_WIDTH, KIND_WIDTH, RULE_WIDTH = 12, 20, 8, 26

# `-n` when no --since is given: a screenful.
DEFAULT_COUNT = 10


def _pad(text: str, width: int) -> str:
    return term.pad(text, width)


def _local_time(ts: Any) -> str:
    if not isinstance(ts, str):
        return "?".ljust(15)
    try:
        moment = dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return _pad(ts, 15)
    return moment.strftime("%b %d %H:%M:%S")


def event_kind(rule: str) -> str:
    """The mark of a record that is not a verdict: the family of its rule (``policy``, ``pins``, …)."""
    family = rule.split(".", 1)[0] if rule else "event"
    return family.upper()[:KIND_WIDTH]


NOT_A_RECORD = "(a line that is not an audit record: torn, edited or foreign)"


def is_record(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("ts"), str)


def shown(value: Any) -> str:
    """A value from a record as it may reach a terminal: invisible and bidi characters escaped.

    Tool names and destinations come from servers and agents: printed raw, a right-to-left override
    or a zero-width space would make the line say something else. Plain printable ASCII is shown as
    it is; anything else goes through the daemon's own `canon.visible` (imported only then: it costs
    more than the rest of `tail`).
    """
    text = str(value)
    if text.isascii() and text.isprintable():
        return text
    from bouncerd.core.canon import visible

    return visible(text)


def _cut_destination(obj: dict[str, Any], reason: str) -> str | None:
    """The record's destination, when the reason shows it only in part (the daemon shortens it there)."""
    destination = obj.get("destination")
    if not isinstance(destination, str) or not destination:
        return None
    return None if shown(destination) in reason else shown(destination)


def format_record(obj: Any, *, width: int | None) -> str:
    """The text for one parsed audit line (styled; the style is stripped where colour is off).

    With `width` None (a pipe) it is one line in padded columns, the reason whole at its end. With a
    width it is fitted to it: time, verdict, server/tool and rule on the first line, and a reason that
    does not fit beside them wrapped under it, indented; nothing is cut. A destination the reason
    holds only shortened is shown whole after it.
    """
    if not is_record(obj):
        return term.style(NOT_A_RECORD, fg="magenta")
    verdict = obj.get("verdict")
    rule = shown(obj.get("rule") or "")
    server = shown(obj.get("server") or "-")
    tool = shown(obj.get("tool") or "-")
    if isinstance(verdict, str) and verdict in VERDICT_STYLE:
        colour, bold = VERDICT_STYLE[verdict]
        label, styles = verdict.upper(), {"fg": colour, "bold": bold}
    else:
        label, styles = event_kind(rule), {"fg": "cyan"}
    reason = shown(" ".join(str(obj.get("reason") or "").split()))
    destination = _cut_destination(obj, reason)
    # An ask's one-time code: the person watching may approve it (it may be answered already)
    code = shown(obj["code"]) if isinstance(obj.get("code"), str) and obj.get("code") else None
    code_text = f"code: {code} (`bouncerctl approve {code}` while it is open)" if code else ""
    when = term.style(_local_time(obj["ts"]), dim=True)
    if width is None:
        mark = term.style(_pad(label, KIND_WIDTH), **styles)
        head = (
            f"{when}  {_pad(server, SERVER_WIDTH)}  {_pad(tool, TOOL_WIDTH)}  {mark}  "
            f"{_pad(rule, RULE_WIDTH)}  "
        )
        tail = (f"  destination: {destination}" if destination else "") + (f"  {code_text}" if code else "")
        return (head + reason + tail).rstrip()
    mark = term.style(_pad(label, 6), **styles)
    where = "/".join(shown(part) for part in (obj.get("server"), obj.get("tool")) if part)
    what = "  ".join(part for part in (where, rule) if part)
    head = f"{when}  {mark}  {what}"
    if not destination and not code and term.cells(head) + 2 + term.cells(reason) <= width:
        return f"{head}  {reason}".rstrip()
    lines = term.wrap(what, width, first=f"{when}  {mark}  ")
    if reason:
        lines += term.wrap(reason, width, first=term.HANG, indent=term.HANG)
    if destination:
        lines += term.wrap(destination, width, first=term.HANG + "destination: ", indent=term.HANG)
    if code:
        lines += term.wrap(code_text, width, first=term.HANG, indent=term.HANG)
    return "\n".join(lines)


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


def _show(line: bytes, obj: Any, *, as_json: bool) -> None:
    if not as_json:
        term.echo(format_record(obj, width=term.columns()))
        return
    import json

    body = obj if is_record(obj) else {"not_a_record": line.decode("utf-8", "replace").rstrip("\n")}
    click.echo(json.dumps(body, ensure_ascii=False, separators=(",", ":")))


@click.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing records as they are written.")
@click.option(
    "-n",
    "--lines",
    "count",
    type=click.IntRange(min=0),
    metavar="N",
    help=f"Start with the last N records that pass the filters [default: {DEFAULT_COUNT}, all with --since].",
)
@click.option(
    "--server", "servers", multiple=True, metavar="NAME", help="Only this server's records (repeatable)."
)
@click.option(
    "--verdict",
    "verdicts",
    multiple=True,
    type=click.Choice(VERDICTS),
    help="Only verdicts of this kind (repeatable).",
)
@click.option("--since", metavar="WHEN", help="Only records since WHEN: 10m, 2h, 1d, or an ISO time (local).")
@click.option("--json", "as_json", is_flag=True, help="Print each record as one line of JSON.")
@click.option(
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The audit log to read (default: this environment's).",
)
def tail(
    follow: bool,
    count: int | None,
    servers: tuple[str, ...],
    verdicts: tuple[str, ...],
    since: str | None,
    as_json: bool,
    file: Path | None,
) -> None:
    """Print the latest audit records, one line each; -f follows the log as it grows."""
    from bouncerctl.audit_select import Selection, newest_first, parse_since, pick

    selection = Selection(
        servers=frozenset(servers),
        verdicts=frozenset(verdicts),
        since=None if since is None else parse_since(since, dt.datetime.now().astimezone()),
    )
    if count is None:
        count = None if since is not None else DEFAULT_COUNT
    path = file or resolve(os.environ).audit
    try:
        fh: IO[bytes] | None = path.open("rb")
    except FileNotFoundError:
        if not follow:
            raise click.ClickException(f"no audit log at {path}") from None
        fh = None
        click.echo(f"waiting for {path} to appear…", err=True)
    if fh is not None:
        fh.seek(0, os.SEEK_END)  # followed from here: a record written while we read is not lost
        for line, obj in pick(newest_first(path), count, selection):
            _show(line, obj, as_json=as_json)
    if not follow:
        if fh is not None:
            fh.close()
        return
    follower = Follower(path, fh)
    try:
        while True:
            for line in follower.poll():
                obj = loads_line(line)
                if selection.passes(obj):
                    _show(line, obj, as_json=as_json)
            time.sleep(FOLLOW_POLL_SECONDS)
    except KeyboardInterrupt:
        pass
    finally:
        follower.close()
