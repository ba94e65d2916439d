"""``bouncerctl report``: the review pack, from the audit log plus the live tool lists and policy.

The log is read once, streaming (`build.py`); tools and policy come from the running daemon, a
``--tools`` file or the log itself (`sources.py`); `review.py` turns both into findings, counts and
framework mappings; `markdown.py` and `html.py` print them. Argument values never reach the pack.

Dates for ``--since``/``--until`` are ISO 8601 (``2025-01-31``, ``2025-01-31T14:00``, with or without
a UTC offset); without an offset they are local time. ``--until`` with a date alone includes that
whole day.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import click

from bouncerctl.report import html, markdown
from bouncerctl.report.build import Aggregator, read_log
from bouncerctl.report.review import build_pack
from bouncerctl.report.sources import ToolsFileError, gather
from bouncerd.atomicfile import write_atomically
from bouncerd.auditfiles import chain_files
from bouncerd.paths import resolve

FORMATS = ("md", "html")


class ReportFailed(click.ClickException):
    exit_code = 1


class When(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2
    """An ISO 8601 date or time, as the audit log's UTC timestamp text (comparable as a string)."""

    name = "DATE"

    def __init__(self, end_of_day: bool = False) -> None:
        self.end_of_day = end_of_day

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip()
        try:
            moment = dt.datetime.fromisoformat(text)
        except ValueError:
            self.fail(f"{text!r} is not a date (use 2025-01-31 or 2025-01-31T14:00)", param, ctx)
        if self.end_of_day and len(text) == 10:
            moment += dt.timedelta(days=1)
        if moment.tzinfo is None:
            moment = moment.astimezone()  # local time
        utc = moment.astimezone(dt.UTC)
        return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def _write(path: Path, text: str) -> None:
    """Replace `path` whole (a reader never sees half a report)."""
    write_atomically(path.absolute(), text.encode("utf-8"), mode=0o644)


@click.command()
@click.option(
    "--since", type=When(), help="Only records from this date/time on (ISO 8601; local time unless given)."
)
@click.option(
    "--until", type=When(end_of_day=True), help="Only records before this date/time (a date: its end)."
)
@click.option("--server", help="Only this server's tools and calls.")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here, not stdout."
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="md or html (default: from -o, else md).")
@click.option(
    "--tools",
    "tools_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A tools/list result to review instead of the daemon's live tool lists.",
)
@click.option(
    "--audit",
    "audit_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The audit log (default: this environment's; rotated predecessors are read too).",
)
@click.option("--no-daemon", is_flag=True, help="Do not ask the running daemon; tools come from the log.")
def report(
    since: str | None,
    until: str | None,
    server: str | None,
    output: Path | None,
    fmt: str | None,
    tools_file: Path | None,
    audit_file: Path | None,
    no_daemon: bool,
) -> None:
    """Write the review pack: tools and controls, findings, verdicts, OWASP and AIUC-1 mappings."""
    paths = resolve(os.environ)
    live = audit_file or paths.audit
    files = chain_files(live)
    if fmt is None:
        fmt = "html" if output is not None and output.suffix.lower() in (".html", ".htm") else "md"
    aggregator = Aggregator(since=since, until=until, server=server)
    try:
        log = read_log(files, aggregator)
    except OSError as exc:
        raise ReportFailed(f"cannot read the audit log: {exc.strerror or exc} ({exc.filename})") from None
    try:
        sources = gather(
            paths,
            tools_file=tools_file,
            server=server,
            called=[k for k in aggregator.by_tool if k[0] != "(other)"],
            ask_daemon=not no_daemon,
            environ=os.environ,
        )
    except ToolsFileError as exc:
        raise ReportFailed(f"--tools: {exc}") from None
    if not files:
        sources.notes.insert(0, f"there is no audit log at {live} yet")
    from bouncerctl import unprotected  # the client configs on this machine: what runs past the gate

    sources.unprotected = [item.line() for item in unprotected.find(os.environ, Path.cwd())]
    filters = [
        text
        for text in (
            f"since {since}" if since else "",
            f"until {until}" if until else "",
            f"server {server}" if server else "",
        )
        if text
    ]
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    pack = build_pack(log, sources, generated=generated, filters=filters)
    text = html.render(pack) if fmt == "html" else markdown.render(pack)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        _write(output, text)
    except OSError as exc:
        raise ReportFailed(f"cannot write {output}: {exc.strerror or exc}") from None
    high = sum(1 for f in pack.findings if f.severity == "high")
    click.echo(
        f"wrote {output}: {sum(aggregator.verdicts.values())} calls, {len(pack.findings)} findings "
        f"({high} high), chain {'intact' if log.chain.ok else 'BROKEN'}",
        err=True,
    )
