"""The report's pass over the log: right counts and places, bounded memory, never a crash on bad lines."""

from __future__ import annotations

import itertools
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from bouncerctl.report import build
from bouncerctl.report.build import Aggregator, Timeline, read_log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bouncerd.core import audit as chainlib
from bouncerd.server.audit import AuditLog

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def _rec(i: int, **over: Any) -> dict[str, Any]:
    base = {
        "session": f"s{i % 3}",
        "client": "claude-code",
        "server": "mail",
        "tool": "send_email",
        "arguments": {"to": "bob@corp.example", "body": f"body {i}"},
        "verdict": "allow",
        "rule": "default.allow",
        "reason": "no rule objected",
    }
    base.update(over)
    return base


def _write(path: Path, records: list[dict[str, Any]], start: float = NOW, step: float = 1.0) -> None:
    log, _ = AuditLog.open(path, start)
    for i, record in enumerate(records):
        log.append(record, start + i * step)
    log.close()


def _read(path: Path, **filters: Any) -> build.LogRead:
    return read_log([path], Aggregator(**filters))


def test_counts_land_per_server_rule_and_tool_with_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    tainted = {"server": "mail", "tool": "read_inbox", "request_id": 7, "ts": NOW, "field": None}
    _write(
        path,
        [
            _rec(0),
            _rec(1, verdict="deny", rule="sink.tainted_destination", destination="x@evil.example",
                 provenance=tainted),
            _rec(2, server="chat", tool="post", verdict="ask", rule="sink.unproven", destination="#ops"),
            _rec(3, verdict="deny", rule="sink.tainted_destination", destination="x@evil.example",
                 provenance=tainted),
            {"rule": "policy.reloaded", "reason": "policy loaded from /p.yaml"},
        ],
    )  # fmt: skip
    got = _read(path)
    s = got.summary
    assert got.chain.ok and s.lines == 5 and s.records == 5 and s.malformed == 0
    assert s.verdicts == {"allow": 1, "ask": 1, "deny": 2}
    assert s.by_server == {"mail": {"allow": 1, "deny": 2}, "chat": {"ask": 1}}
    assert s.by_tool[("chat", "post")] == {"ask": 1}
    stat = s.by_rule["sink.tainted_destination"]
    assert stat.counts == {"deny": 2} and got.rule_places(stat) == "audit.jsonl:2, 4"
    assert got.rule_places(s.events["policy.reloaded"]) == "audit.jsonl:5"
    [(key, dest)] = [(k, d) for k, d in s.destinations.items() if k[1] == "deny"]
    assert key == ("x@evil.example", "deny", "sink.tainted_destination", "mail", "send_email")
    assert dest.count == 2 and dest.provenance is not None and dest.provenance["tool"] == "read_inbox"
    assert s.sessions == {"s0", "s1", "s2"} and s.clients == {"claude-code": 4}


def test_malformed_lines_are_counted_and_named_never_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, [_rec(i) for i in range(4)])
    lines = path.read_bytes().splitlines(keepends=True)
    junk = [b"not json\n", b"[1, 2]\n", b'{"no": "ts"}\n', b"\xff\xfe\x00\n"]
    path.write_bytes(b"".join([lines[0], junk[0], lines[1], junk[1], junk[2], lines[2], junk[3], lines[3]]))
    got = _read(path)
    s = got.summary
    assert s.lines == 8 and s.records == 4 and s.malformed == 4
    assert [(got.where(ref), why) for ref, why in s.malformed_refs] == [
        ("audit.jsonl:2", "not a JSON object"),
        ("audit.jsonl:4", "not a JSON object"),
        ("audit.jsonl:5", "no valid 'ts'"),
        ("audit.jsonl:7", "not a JSON object"),
    ]
    assert got.chain.broken is not None and got.chain.broken.where == "audit.jsonl:2"


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=60), max_size=8))
def test_any_bytes_at_all_are_read_without_an_exception(tmp_path: Path, chunks: list[bytes]) -> None:
    path = tmp_path / "any.jsonl"
    data = b"\n".join(chunks)
    path.write_bytes(data)
    got = _read(path)
    assert got.summary.lines == data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    assert got.summary.records + got.summary.malformed == got.summary.lines


def test_since_until_and_server_leave_records_out_but_the_chain_is_checked_whole(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, [_rec(i, server="mail" if i % 2 else "chat") for i in range(10)], step=3600)
    got = _read(path, since="2026-01-01T02:00:00.000Z", until="2026-01-01T06:00:00.000Z", server="mail")
    s = got.summary
    assert s.in_window == 2 and s.outside == 8  # hours 3 and 5
    assert s.first_ts == "2026-01-01T03:00:00.000Z" and s.last_ts == "2026-01-01T05:00:00.000Z"
    assert got.chain.ok and got.chain.records == 10


def test_tables_stop_growing_at_max_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "MAX_KEYS", 5)
    path = tmp_path / "audit.jsonl"
    _write(path, [_rec(i, tool=f"tool{i}", rule=f"rule{i}", session=f"s{i}") for i in range(20)])
    s = _read(path).summary
    assert len(s.by_tool) == 6 and s.by_tool[(build.OTHER, build.OTHER)] == {"allow": 15}
    assert len(s.by_rule) == 6 and s.by_rule[build.OTHER].total == 15
    assert len(s.sessions) == 5 and s.sessions_overflow
    assert sum(c["allow"] for c in s.by_tool.values()) == 20


def test_timeline_widens_its_buckets_to_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "MAX_BUCKETS", 50)
    timeline = Timeline()
    minutes = 30 * 24 * 60
    for m in range(minutes):
        timeline.add(int(NOW) + m * 60, m % 3)
    assert len(timeline.buckets) <= 50 and timeline.width in build.BUCKET_WIDTHS
    assert sum(sum(c) for c in timeline.buckets.values()) == minutes
    width, bars = timeline.bars(20)
    assert len(bars) <= 20 and sum(sum(c) for _, c in bars) == minutes
    assert all(b - a == width for (a, _), (b, _) in itertools.pairwise(bars))


def _lines(n: int) -> bytes:
    out, prev = [], chainlib.GENESIS
    for i in range(n):
        ts = f"2026-01-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00.000Z"
        record = chainlib.chain(
            {"ts": ts, "server": "mail", "tool": "t", "verdict": "allow", "rule": "r"}, prev
        )
        prev = record["hash"]
        out.append(chainlib.encode_line(record))
    return b"".join(out)


def test_memory_does_not_grow_with_the_number_of_lines(tmp_path: Path) -> None:
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_bytes(_lines(2_000))
    large.write_bytes(_lines(20_000))
    peaks = []
    for path in (small, large):
        tracemalloc.start()
        got = _read(path)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert got.chain.ok
    assert peaks[1] < peaks[0] * 2  # ten times the lines, not ten times the memory


def test_an_overlong_line_is_skipped_in_slices_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(build, "READ_SLICE_BYTES", 64)
    path = tmp_path / "audit.jsonl"
    _write(path, [_rec(0), _rec(1, arguments={"blob": "x" * 5000}), _rec(2)])
    s = _read(path).summary
    assert s.lines == 3 and s.malformed == 1 and s.records == 2
    assert s.malformed_refs[0][0] == (0, 2)


def test_the_fast_parser_never_calls_a_valid_line_edited(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    odd = {"f": [-0.0, 1e-7, 1.5e300, 2**70], "u": 'é ☃ \u2028 \\ "', "n": None, "e": {}, "l": []}
    _write(path, [_rec(0, arguments=odd), _rec(1, arguments={"x": float("inf")})])
    assert _read(path).chain.ok


def test_a_log_spread_over_files_is_numbered_per_file(tmp_path: Path) -> None:
    first, second = tmp_path / "audit.jsonl.1", tmp_path / "audit.jsonl"
    _write(first, [_rec(0), _rec(1, verdict="deny", rule="x")])
    _write(second, [_rec(2, verdict="deny", rule="x")])  # continues .1, after a rotation record
    got = read_log([first, second], Aggregator())
    assert got.chain.ok and got.rule_places(got.summary.by_rule["x"]) == "audit.jsonl.1:2, audit.jsonl:2"
    assert got.summary.events[chainlib.ROTATED_RULE].total == 1
