"""The audit hash chain: every kind of tampering is found at the right line; the writer repairs tears."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd.core import audit as chainlib
from bouncerd.server.audit import AuditLog, utc_iso

NOW = 1_700_000_000.123


def _records(n: int) -> list[dict[str, Any]]:
    return [
        {"ts": f"t{i}", "tool": "send_mail", "arguments": {"to": f"user{i}@example.com"}, "verdict": "allow"}
        for i in range(n)
    ]


def _lines(n: int = 5) -> list[bytes]:
    out: list[bytes] = []
    prev = chainlib.GENESIS
    for record in _records(n):
        chained = chainlib.chain(record, prev)
        prev = chained["hash"]
        out.append(chainlib.encode_line(chained))
    return out


def test_intact_chain_verifies() -> None:
    lines = _lines()
    result = chainlib.verify_lines(lines)
    assert result.ok and result.lines == 5 and result.first_bad_line is None
    assert result.head == json.loads(lines[-1])["hash"]
    assert chainlib.verify_lines([]).ok


def test_edited_line_is_found_at_that_line() -> None:
    lines = _lines()
    lines[2] = lines[2].replace(b"user2@example.com", b"evil@attacker.example")
    result = chainlib.verify_lines(lines)
    assert (result.ok, result.first_bad_line) == (False, 3)
    assert result.problem is not None and "edited" in result.problem


def test_edit_with_a_recomputed_hash_is_found_at_the_next_line() -> None:
    lines = _lines()
    record = json.loads(lines[2])
    record["verdict"] = "deny"
    record["hash"] = chainlib.record_hash(record)
    lines[2] = chainlib.encode_line(record)
    assert chainlib.verify_lines(lines).first_bad_line == 4


def test_deleted_line_is_found_where_the_gap_is() -> None:
    lines = _lines()
    del lines[2]
    result = chainlib.verify_lines(lines)
    assert (result.ok, result.first_bad_line) == (False, 3)
    assert result.problem is not None and "deleted" in result.problem


def test_reordered_lines_are_found_at_the_first_moved_line() -> None:
    lines = _lines()
    lines[1], lines[2] = lines[2], lines[1]
    assert chainlib.verify_lines(lines).first_bad_line == 2


def test_truncated_last_line_is_found() -> None:
    lines = _lines()
    lines[4] = lines[4][:20]
    result = chainlib.verify_lines(lines)
    assert (result.ok, result.first_bad_line) == (False, 5)


def test_lines_dropped_from_the_end_are_found_only_against_a_known_head() -> None:
    lines = _lines()
    head = json.loads(lines[-1])["hash"]
    assert chainlib.verify_lines(lines[:4]).ok  # a shorter chain is still a chain
    result = chainlib.verify_lines(lines[:4], expected_head=head)
    assert (result.ok, result.first_bad_line) == (False, 5)


def test_bytes_and_odd_keys_hash_the_same_after_a_json_round_trip() -> None:
    record = {"arguments": {"blob": b"\xff\x00", "text": b"plain", "nested": [{"k": b"v"}]}}
    chained = chainlib.chain(record, chainlib.GENESIS)
    assert chained["arguments"]["blob"] == "base64:/wA="
    assert chained["arguments"]["text"] == "plain"
    assert chainlib.verify_lines([chainlib.encode_line(chained)]).ok


def test_canonical_form_is_sorted_compact_utf8_without_hash() -> None:
    record = {"b": "é", "a": 1, "hash": "x", "prev": "p"}
    assert chainlib.canonical(record) == '{"a":1,"b":"é","prev":"p"}'.encode()


@settings(max_examples=200)
@given(st.lists(st.binary(max_size=80), max_size=6))
def test_verify_never_raises_on_arbitrary_lines(lines: list[bytes]) -> None:
    result = chainlib.verify_lines(lines)
    assert isinstance(result.ok, bool)
    assert result.ok or result.first_bad_line is not None


# ---- the writer --------------------------------------------------------------------------------


def test_timestamps_are_utc_with_milliseconds_and_z() -> None:
    assert utc_iso(0.5) == "1970-01-01T00:00:00.500Z"


def test_writer_chains_across_reopen_and_creates_the_log_private(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log, repair = AuditLog.open(path, NOW)
    log.append({"tool": "a", "verdict": "allow"}, NOW)
    log.close()
    assert repair is None
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    log, _ = AuditLog.open(path, NOW)
    log.append({"tool": "b", "verdict": "deny"}, NOW)
    log.close()
    lines = path.read_bytes().splitlines(keepends=True)
    assert chainlib.verify_lines(lines).ok and len(lines) == 2
    first = json.loads(lines[0])
    assert list(first)[:3] == ["ts", "session", "client"] and list(first)[-2:] == ["prev", "hash"]


def test_torn_last_line_is_moved_aside_and_a_repair_record_appended(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log, _ = AuditLog.open(path, NOW)
    log.append({"tool": "a"}, NOW)
    log.close()
    torn = b'{"ts":"2030-01-01T00:00:00.000Z","tool":"b","argum'
    with path.open("ab") as fh:
        fh.write(torn)
    log, repair = AuditLog.open(path, NOW)
    log.close()
    assert repair is not None and repair.moved_bytes == len(torn)
    assert repair.aside.read_bytes() == torn and repair.aside.name.startswith("audit.jsonl.torn-")
    lines = path.read_bytes().splitlines(keepends=True)
    assert chainlib.verify_lines(lines).ok and len(lines) == 2
    last = json.loads(lines[-1])
    assert last["rule"] == "audit.repaired" and f"moved {len(torn)} bytes" in last["reason"]


def test_unparseable_whole_last_line_is_treated_as_torn(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"\x00\x00\x00garbage\n")
    log, repair = AuditLog.open(path, NOW)
    log.close()
    assert repair is not None and repair.moved_bytes == 11
    assert chainlib.verify_lines(path.read_bytes().splitlines(keepends=True)).ok


def test_edited_last_line_is_kept_as_evidence_not_repaired(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log, _ = AuditLog.open(path, NOW)
    log.append({"tool": "a", "verdict": "deny"}, NOW)
    log.close()
    path.write_bytes(path.read_bytes().replace(b'"deny"', b'"allow"'))
    log, repair = AuditLog.open(path, NOW)
    log.append({"tool": "b"}, NOW)
    log.close()
    assert repair is None
    result = chainlib.verify_lines(path.read_bytes().splitlines(keepends=True))
    assert (result.ok, result.first_bad_line) == (False, 1)
