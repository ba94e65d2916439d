"""``bouncerctl audit verify [FILE]``: prove the audit log's hash chain unbroken, or show where it breaks.

FILE defaults to this environment's ``audit.jsonl`` (``BOUNCER_HOME`` or the platform's state
directory). Given the live file, its rotated predecessors (``audit.jsonl.N`` … ``.1``) are walked
first, oldest first, as one chain; a rotated file given on its own is walked alone.

Exit 0 and one line on stdout when the chain is whole: records, files, head hash. Exit 1 when it is
not, with the first line that breaks it on stderr, saying how (edited, deleted, inserted, reordered,
truncated, not JSON). ``--head`` checks the log still ends at a head hash recorded earlier (from
``bouncerctl status``), which is the only way to notice records cut from the end. The walk reads
each file once, line by line: memory does not grow with the log.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import IO, Any

import click

from bouncerctl import term
from bouncerd.auditfiles import GAP_RULE, chain_files
from bouncerd.core.audit import ChainResult, ChainWalker
from bouncerd.paths import resolve

EXIT_BROKEN = 1


class ChainBroken(click.ClickException):
    """The message on stderr as it is (no "Error:" prefix), exit 1."""

    exit_code = EXIT_BROKEN

    def show(self, file: IO[Any] | None = None) -> None:
        term.say(self.format_message(), err=True)


def walk_files(files: list[Path], expected_head: str | None = None) -> ChainResult:
    walker = ChainWalker(expected_head=expected_head)
    with contextlib.ExitStack() as stack:
        # All opened first: a rotation while we read renames files, but open ones stay what they were.
        handles = [stack.enter_context(path.open("rb")) for path in files]
        for path, fh in zip(files, handles, strict=True):
            walker.begin_file(path.name)
            for line in fh:
                walker.feed(line)
    return walker.finish()


def _gap_reason(files: list[Path], name: str, line: int) -> str | None:
    """The reason of the `audit.gap` record at `name`:`line` (the daemon found its log lost and started
    a new file there), or None if the line is not one."""
    path = next((p for p in files if p.name == name), None)
    if path is None:
        return None
    try:
        with path.open("rb") as fh:
            for number, raw in enumerate(fh, 1):
                if number == line:
                    record = json.loads(raw)
                    ok = isinstance(record, dict) and record.get("rule") == GAP_RULE
                    return str(record.get("reason")) if ok else None
    except (OSError, ValueError):
        return None
    return None


def _torn_asides(live: Path) -> list[Path]:
    try:
        return sorted(p for p in live.parent.glob(f"{live.name}.torn-*") if p.is_file())
    except OSError:
        return []


@click.group()
def audit() -> None:
    """Check the audit log."""


@audit.command("verify")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--head", "expected_head", metavar="HASH", help="The log must end at this hash (from status).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify(file: Path | None, expected_head: str | None, as_json: bool) -> None:
    """Verify the hash chain of FILE (default: this environment's audit log) and its rotated files."""
    live = file or resolve(os.environ).audit
    files = chain_files(live)
    if not files:
        raise ChainBroken(f"no audit log at {live}")
    try:
        result = walk_files(files, expected_head)
    except OSError as exc:
        raise ChainBroken(f"cannot read {exc.filename}: {exc.strerror or exc}") from None
    if as_json:
        body: dict[str, Any] = {
            "ok": result.ok,
            "records": result.records,
            "files": [str(p) for p in files],
            "head": result.head,
            "anchor": result.anchor,
            "break": None
            if result.broken is None
            else {
                "file": result.broken.file,
                "line": result.broken.line,
                "kind": result.broken.kind,
                "detail": result.broken.detail,
            },
        }
        click.echo(json.dumps(body, indent=2))
        if not result.ok:
            raise click.exceptions.Exit(EXIT_BROKEN)
        return
    if result.broken is not None:
        b = result.broken
        good = f"the {b.line - 1} line(s) before it verify" if b.line > 1 else "it is the file's first line"
        gap = _gap_reason(files, b.file, b.line)
        noticed = f"\nbouncerd noticed the loss and recorded it here: {gap}" if gap else ""
        raise ChainBroken(
            f"audit chain broken at {b.file} line {b.line}: {b.kind}: {b.detail}\n"
            f"({good}; last good hash {result.head}){noticed}"
        )
    names = files[0].name if len(files) == 1 else f"{files[0].name} … {files[-1].name}"
    summary = (
        f"audit chain intact: {result.records} records in {len(files)} file{'s' if len(files) != 1 else ''} "
        f"({names}), head {result.head}"
    )
    term.echo("\n".join(term.fit(summary, term.columns())))
    if result.anchor is not None:
        term.say(
            f"note: the oldest file continues one no longer kept (its last hash was {result.anchor})",
            err=True,
        )
    for aside in _torn_asides(live):
        term.say(f"note: {aside.name} holds a torn line bouncerd moved aside after a crash", err=True)
