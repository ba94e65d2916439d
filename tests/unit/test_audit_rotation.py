"""Rotation by size: the chain runs on across files, old files are dropped, a cut-short rotation heals."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bouncerd.core import audit as chainlib
from bouncerd.server import audit
from bouncerd.server.audit import AuditLog, predecessors, rotated_path

NOW = 1_700_000_000.0
# Small enough that a few dozen records rotate several times.
SMALL_FILE_BYTES = 2000


@pytest.fixture
def small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "ROTATE_AFTER_BYTES", SMALL_FILE_BYTES)


def _write(path: Path, n: int, start: int = 0) -> AuditLog:
    log, _ = AuditLog.open(path, NOW)
    for i in range(start, start + n):
        log.append({"server": "mail", "tool": "send", "verdict": "allow", "rule": f"r{i}"}, NOW + i)
    return log


def _walk(path: Path, expected_head: str | None = None) -> chainlib.ChainResult:
    files = [*predecessors(path), path]
    return chainlib.walk(((p.name, p.read_bytes().splitlines(keepends=True)) for p in files), expected_head)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_rotation_continues_the_chain_into_the_new_file(tmp_path: Path, small_files: None) -> None:
    path = tmp_path / "audit.jsonl"
    log = _write(path, 40)
    log.close()
    older = predecessors(path)
    assert len(older) >= 3 and older[-1] == rotated_path(path, 1)
    assert all(p.stat().st_size >= SMALL_FILE_BYTES for p in older)
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in [*older, path])
    for before, after in zip([*older], [*older[1:], path], strict=True):
        first = _records(after)[0]
        assert first["rule"] == chainlib.ROTATED_RULE
        assert first["prev"] == _records(before)[-1]["hash"]
    result = _walk(path, expected_head=log.head)
    assert result.ok, result.describe()
    assert result.anchor is None and len(result.files) == len(older) + 1
    rules = [r["rule"] for p in [*older, path] for r in _records(p) if r["rule"] != chainlib.ROTATED_RULE]
    assert rules == [f"r{i}" for i in range(40)]  # nothing lost, nothing repeated


def test_only_keep_rotated_files_are_kept_and_the_oldest_anchors_the_chain(
    tmp_path: Path, small_files: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "KEEP_ROTATED", 2)
    path = tmp_path / "audit.jsonl"
    _write(path, 80).close()
    assert [p.name for p in predecessors(path)] == ["audit.jsonl.2", "audit.jsonl.1"]
    result = _walk(path)
    assert result.ok, result.describe()
    assert result.anchor == _records(rotated_path(path, 2))[0]["prev"] != chainlib.GENESIS


def test_rotation_cut_short_after_the_rename_continues_from_the_rotated_file(
    tmp_path: Path, small_files: None
) -> None:
    path = tmp_path / "audit.jsonl"
    log = _write(path, 3)
    log.close()
    os.replace(path, rotated_path(path, 1))  # the crash came before the new file was created
    log = _write(path, 2, start=3)
    log.close()
    first = _records(path)[0]
    assert first["rule"] == chainlib.ROTATED_RULE
    assert first["prev"] == _records(rotated_path(path, 1))[-1]["hash"]
    assert _walk(path).ok


def test_a_failed_rotation_keeps_appending_to_a_file_still_in_the_chain(
    tmp_path: Path, small_files: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "ROTATE_RETRY_BYTES", 500)
    path = tmp_path / "audit.jsonl"
    real_replace = os.replace

    def refuse(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    log = _write(path, 30)
    monkeypatch.setattr(os, "replace", real_replace)
    assert predecessors(path) == []
    assert log.rotate_at > SMALL_FILE_BYTES  # not retried on every append
    for i in range(30, 60):
        log.append({"tool": "send", "verdict": "allow", "rule": f"r{i}"}, NOW)
    log.close()
    assert predecessors(path)  # rotated once it could
    assert _walk(path, expected_head=log.head).ok


def test_a_rotated_file_deleted_from_the_middle_is_found(tmp_path: Path, small_files: None) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 60).close()
    older = predecessors(path)
    assert len(older) >= 3
    middle = older[1]
    middle.unlink()
    result = _walk(path)
    assert not result.ok and result.broken is not None
    assert (result.broken.file, result.broken.line, result.broken.kind) == (older[2].name, 1, "deleted")


def test_predecessors_ignore_torn_asides_and_other_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    for name in ("audit.jsonl.1", "audit.jsonl.10", "audit.jsonl.2", "audit.jsonl.torn-20250101T000000Z"):
        (tmp_path / name).write_bytes(b"")
    for name in ("audit.jsonl.01", "audit.jsonl.x", "other.jsonl.1"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in predecessors(path)] == ["audit.jsonl.10", "audit.jsonl.2", "audit.jsonl.1"]


def test_a_digest_record_carries_the_digest_in_place_of_the_arguments(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log, _ = AuditLog.open(path, NOW)
    log.append({"tool": "send", "arguments_sha256": "ab" * 32, "verdict": "allow"}, NOW)
    log.append({"tool": "send", "arguments": {"to": "x"}, "verdict": "allow"}, NOW)
    log.close()
    digest, full = _records(path)
    assert list(digest)[:7] == ["ts", "session", "client", "server", "request_id", "tool", "arguments_sha256"]
    assert "arguments" not in digest and full["arguments"] == {"to": "x"} and "arguments_sha256" not in full
    assert _walk(path).ok
