"""The report's one pass over the audit log: every line read once, aggregated into bounded tables.

Theory of operation
-------------------
`read_log` opens the files of the log (rotated predecessors oldest first, then the live file), hands
each line to a `bouncerd.core.audit.ChainWalker` (which checks the chain and returns the parsed
line) and then to `Aggregator.feed`, and keeps nothing else. Memory depends on the number of
distinct servers, tools, rules and denied destinations, never on the number of lines, and even those
tables stop growing at `MAX_KEYS` (later keys are counted under `OTHER`). The timeline keeps at most
`MAX_BUCKETS` buckets, widening them (1 min, 5 min, 15 min, 1 h, 6 h, 1 d, 1 week) as the log's span
grows. A line longer than `MAX_LINE_BYTES` is skipped in slices, never held whole.

What is kept of a record is what the review pack may print: time, session (counted only), client,
server, tool, verdict, rule, destination and provenance of non-allowed calls, and the line's place.
Arguments are never read, and neither are the reasons of verdicts: a reason may quote an argument
(a path that was refused). Lines that are not audit records (not JSON, no timestamp) are counted
and their places kept (the first `MAX_MALFORMED_REFS`); they never stop the report.

Evidence is a `Ref`: (file index, line number), printed as ``audit.jsonl.1:123``.
"""

from __future__ import annotations

import calendar
import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bouncerd.core.audit import ChainResult, ChainWalker, loads_line

_from_json: Callable[[bytes], Any] | None
try:  # pydantic's JSON parser (mcp depends on pydantic) parses a line in half the time of json's
    from pydantic_core import from_json as _pydantic_from_json

    _from_json = _pydantic_from_json
except ImportError:  # pragma: no cover - without it, json does the same work more slowly
    _from_json = None

VERDICTS = ("allow", "ask", "deny")

# A table of servers, tools, rules, sessions or destinations stops adding keys here; the rest is
# counted under OTHER. Ten thousand is far above any real set-up, and bounds a hostile or corrupt log.
MAX_KEYS = 10_000
OTHER = "(other)"

# Longer strings from the log are cut before being used as keys: names are short, and a long one
# must not make each key cost megabytes.
MAX_KEY_CHARS = 200

# Places kept per rule, per destination, and of malformed lines: enough to look at, bounded.
EVIDENCE_REFS = 3
MAX_MALFORMED_REFS = 20
MAX_NOTES = 50

# The daemon never writes a record this large (the wire limits a request to 72 MiB); a longer
# line is skipped in slices of READ_SLICE_BYTES rather than read whole.
MAX_LINE_BYTES = 80 * 1024 * 1024
READ_SLICE_BYTES = 1024 * 1024

# The timeline keeps at most this many buckets before widening them; renderers group further.
MAX_BUCKETS = 4096
# Each a multiple of the one before; from one second up, so a log of a few seconds (the demo) gets
# one bar per second and a week-long one per hour: the timeline scales to the log's span.
BUCKET_WIDTHS = (1, 5, 15, 60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400)


Ref = tuple[int, int]  # (file index, line number)


@dataclass
class RuleStat:
    counts: dict[str, int] = field(default_factory=dict)  # verdict (or "event") -> n
    refs: list[Ref] = field(default_factory=list)  # first EVIDENCE_REFS places
    last: Ref | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, kind: str, ref: Ref) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if len(self.refs) < EVIDENCE_REFS:
            self.refs.append(ref)
        self.last = ref


@dataclass
class DestinationStat:
    count: int
    first: Ref
    first_ts: str
    last: Ref
    last_ts: str
    provenance: dict[str, Any] | None


@dataclass
class Note:
    ref: Ref
    ts: str
    rule: str
    text: str


@dataclass
class Timeline:
    width: int = BUCKET_WIDTHS[0]
    buckets: dict[int, list[int]] = field(default_factory=dict)  # bucket start (epoch s) -> [a, ask, d]

    def add(self, epoch: int, verdict_index: int) -> None:
        start = epoch - epoch % self.width
        bucket = self.buckets.get(start)
        if bucket is None:
            if len(self.buckets) >= MAX_BUCKETS:
                self._widen()
                start = epoch - epoch % self.width
                bucket = self.buckets.get(start)
            if bucket is None:
                bucket = self.buckets[start] = [0, 0, 0]
        bucket[verdict_index] += 1

    def _widen(self) -> None:
        while len(self.buckets) >= MAX_BUCKETS:
            wider = [w for w in BUCKET_WIDTHS if w > self.width]
            self.width = wider[0] if wider else self.width * 2
            merged: dict[int, list[int]] = {}
            for start, counts in self.buckets.items():
                key = start - start % self.width
                into = merged.setdefault(key, [0, 0, 0])
                for i in range(3):
                    into[i] += counts[i]
            self.buckets = merged

    def bars(self, max_bars: int) -> tuple[int, list[tuple[int, list[int]]]]:
        """(bar width in seconds, [(bar start, [allow, ask, deny])]) covering first to last bucket,
        empty bars included, at most `max_bars` of them."""
        if not self.buckets:
            return self.width, []
        lo, hi = min(self.buckets), max(self.buckets)
        width = self.width
        while (hi - (lo - lo % width)) // width + 1 > max_bars:
            wider = [w for w in BUCKET_WIDTHS if w > width]
            width = wider[0] if wider else width * 2
        start = lo - lo % width
        out = [[0, 0, 0] for _ in range((hi - start) // width + 1)]
        for bucket, counts in self.buckets.items():
            into = out[(bucket - start) // width]
            for i in range(3):
                into[i] += counts[i]
        return width, [(start + i * width, counts) for i, counts in enumerate(out)]


def epoch_of(ts: str) -> int | None:
    """Seconds since the epoch of an audit timestamp (``2025-01-31T12:34:56.789Z``), None if not one."""
    try:
        if len(ts) < 19 or ts[4] != "-" or ts[10] != "T":
            return None
        return calendar.timegm(
            (int(ts[0:4]), int(ts[5:7]), int(ts[8:10]), int(ts[11:13]), int(ts[14:16]), int(ts[17:19]))
        )
    except ValueError:
        return None


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else "(none)" if value is None else str(value)
    return text if len(text) <= MAX_KEY_CHARS else text[: MAX_KEY_CHARS - 1] + "…"


def _slot(table: dict[Any, Any], key: Any, other: Any) -> Any:
    """`key` if the table has room for it (or has it), else the overflow key."""
    return key if key in table or len(table) < MAX_KEYS else other


def _provenance(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    keep = ("server", "tool", "request_id", "ts", "field", "identity")
    return {k: (_short(value[k]) if isinstance(value[k], str) else value[k]) for k in keep if k in value}


class Aggregator:
    """Counts what the review pack shows. `feed` takes each line's parsed value and its place."""

    def __init__(self, *, since: str | None = None, until: str | None = None, server: str | None = None):
        self.since, self.until, self.server = since, until, server
        self.lines = 0
        self.records = 0  # lines that are audit records (in or out of the window)
        self.in_window = 0  # records counted in the tables below
        self.outside = 0  # records left out by --since/--until/--server
        self.malformed = 0
        self.malformed_refs: list[tuple[Ref, str]] = []
        self.first_ts: str | None = None
        self.last_ts: str | None = None
        self.verdicts = dict.fromkeys(VERDICTS, 0)
        self.by_server: dict[str, dict[str, int]] = {}
        self.by_tool: dict[tuple[str, str], dict[str, int]] = {}
        self.by_rule: dict[str, RuleStat] = {}
        self.events: dict[str, RuleStat] = {}
        self.notes: list[Note] = []
        self.destinations: dict[tuple[str, str, str, str, str], DestinationStat] = {}
        self.sessions: set[str] = set()
        self.sessions_overflow = False
        self.clients: dict[str, int] = {}
        self.timeline = Timeline()
        self._minute_key = ""
        self._minute_epoch: int | None = None

    def _bad(self, ref: Ref, why: str) -> None:
        self.malformed += 1
        if len(self.malformed_refs) < MAX_MALFORMED_REFS:
            self.malformed_refs.append((ref, why))

    def feed(self, ref: Ref, obj: Any) -> None:
        """Count one line. Hot path (a million calls): plain lookups, no helper per field."""
        self.lines += 1
        if type(obj) is not dict:
            self._bad(ref, "not a JSON object")
            return
        ts = obj.get("ts")
        if type(ts) is not str or len(ts) < 19 or ts[10] != "T":
            self._bad(ref, "no valid 'ts'")
            return
        self.records += 1
        server = obj.get("server")
        if (
            (self.since is not None and ts < self.since)
            or (self.until is not None and ts >= self.until)
            or (self.server is not None and server is not None and server != self.server)
        ):
            self.outside += 1
            return
        self.in_window += 1
        if self.first_ts is None or ts < self.first_ts:
            self.first_ts = ts
        if self.last_ts is None or ts > self.last_ts:
            self.last_ts = ts
        verdict = obj.get("verdict")
        rule = obj.get("rule")
        if type(rule) is not str or len(rule) > MAX_KEY_CHARS:
            rule = _short(rule)
        if verdict not in self.verdicts:
            self._event(ref, ts, rule, obj)
            return
        self.verdicts[verdict] += 1
        tool = obj.get("tool")
        if type(server) is not str or len(server) > MAX_KEY_CHARS:
            server = _short(server)
        if type(tool) is not str or len(tool) > MAX_KEY_CHARS:
            tool = _short(tool)
        counts = self.by_server.get(server)
        if counts is None:
            counts = self.by_server.setdefault(_slot(self.by_server, server, OTHER), {})
        counts[verdict] = counts.get(verdict, 0) + 1
        key = (server, tool)
        tcounts = self.by_tool.get(key)
        if tcounts is None:
            tcounts = self.by_tool.setdefault(_slot(self.by_tool, key, (OTHER, OTHER)), {})
        tcounts[verdict] = tcounts.get(verdict, 0) + 1
        stat = self.by_rule.get(rule)
        if stat is None:
            stat = self.by_rule.setdefault(_slot(self.by_rule, rule, OTHER), RuleStat())
        stat.add(verdict, ref)
        minute = ts[:16]
        if minute != self._minute_key:
            self._minute_key, self._minute_epoch = minute, epoch_of(minute + ":00")
        second = ts[17:19]
        if self._minute_epoch is not None and second.isdigit() and second.isascii():
            self.timeline.add(self._minute_epoch + int(second), VERDICTS.index(verdict))
        session = obj.get("session")
        if type(session) is str and session not in self.sessions:
            self._session(session)
        client = obj.get("client")
        if type(client) is not str or len(client) > MAX_KEY_CHARS:
            client = _short(client)
        if client in self.clients or len(self.clients) < MAX_KEYS:
            self.clients[client] = self.clients.get(client, 0) + 1
        else:
            self.clients[OTHER] = self.clients.get(OTHER, 0) + 1
        if verdict != "allow":
            destination = obj.get("destination")
            if type(destination) is str and destination:
                self._destination(ref, ts, (_short(destination), verdict, rule, server, tool), obj)

    def _session(self, session: str) -> None:
        if len(session) > MAX_KEY_CHARS:
            session = _short(session)
            if session in self.sessions:
                return
        if len(self.sessions) < MAX_KEYS:
            self.sessions.add(session)
        else:
            self.sessions_overflow = True

    def _event(self, ref: Ref, ts: str, rule: str, obj: dict[str, Any]) -> None:
        stat = self.events.get(rule)
        if stat is None:
            stat = self.events.setdefault(_slot(self.events, rule, OTHER), RuleStat())
        stat.add("event", ref)
        reason = obj.get("reason")
        if len(self.notes) < MAX_NOTES and rule != "audit.rotated":
            self.notes.append(Note(ref, ts, rule, _short(reason) if isinstance(reason, str) else ""))

    def _destination(
        self, ref: Ref, ts: str, key: tuple[str, str, str, str, str], obj: dict[str, Any]
    ) -> None:
        stat = self.destinations.get(key)
        if stat is None:
            if len(self.destinations) >= MAX_KEYS:
                key = (OTHER, key[1], OTHER, OTHER, OTHER)
                stat = self.destinations.get(key)
            if stat is None:
                self.destinations[key] = DestinationStat(
                    1, ref, ts, ref, ts, _provenance(obj.get("provenance"))
                )
                return
        stat.count += 1
        stat.last, stat.last_ts = ref, ts
        if stat.provenance is None:
            stat.provenance = _provenance(obj.get("provenance"))


@dataclass
class LogRead:
    files: list[Path]
    chain: ChainResult
    summary: Aggregator

    def where(self, ref: Ref) -> str:
        return f"{self.files[ref[0]].name}:{ref[1]}"

    def rule_places(self, stat: RuleStat) -> str:
        """The first places of a rule and its last one: ``audit.jsonl:2, 3, 4 … 97``."""
        places = list(stat.refs)
        gap = stat.last is not None and stat.last not in places
        if gap and stat.last is not None:
            places.append(stat.last)
        return self.places(places, gap_before_last=gap)

    def places(self, refs: Sequence[Ref], gap_before_last: bool = False) -> str:
        """``audit.jsonl:2, 3, 4 … 97``: line numbers, each file named once per run of its lines."""
        out: list[str] = []
        current = -1
        for i, (index, line) in enumerate(refs):
            sep = " … " if gap_before_last and i == len(refs) - 1 else ", "
            text = f"{line}" if index == current else f"{self.files[index].name}:{line}"
            out.append(text if not out else sep + text)
            current = index
        return "".join(out)


def lines_of(fh: IO[bytes]) -> Iterator[bytes]:
    """The lines of a file; an overlong one becomes a short stand-in that is not JSON."""
    while True:
        line = fh.readline(MAX_LINE_BYTES)
        if not line:
            return
        if len(line) == MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := fh.readline(READ_SLICE_BYTES)) and not rest.endswith(b"\n"):
                pass
            line = b"(a line longer than the limit, not read)\n"
        yield line


def fast_loads(line: bytes) -> Any:
    """A line's JSON value, by the faster parser when there is one; `loads_line` decides doubtful cases."""
    if _from_json is None:
        return loads_line(line)
    try:
        return _from_json(line)
    except ValueError:
        return loads_line(line)


def read_log(files: Sequence[Path], aggregator: Aggregator, expected_head: str | None = None) -> LogRead:
    walker = ChainWalker(expected_head=expected_head, loads=fast_loads)
    with contextlib.ExitStack() as stack:
        # All opened first: a rotation while we read renames files, but open ones stay what they were.
        handles = [stack.enter_context(path.open("rb")) for path in files]
        for index, (path, fh) in enumerate(zip(files, handles, strict=True)):
            walker.begin_file(path.name)
            for number, line in enumerate(lines_of(fh), start=1):
                aggregator.feed((index, number), walker.feed(line))
    return LogRead(list(files), walker.finish(), aggregator)
