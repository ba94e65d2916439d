"""The audit log is held as a path and an inode: a lost live file is noticed, named, and shown as a
break in the chain. Before, records went on to a deleted file nobody could find, and after a restart
`audit verify` said "intact"; a log replaced by a forged line was set aside as a crash tear and the
real history was cut from the chain without a word."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from bouncerd.core import audit as chainlib
from bouncerd.server import audit
from bouncerd.server.audit import GAP_RULE, AuditLog, chain_files


def _walk(path: Path) -> chainlib.ChainResult:
    files = [(p.name, p.read_bytes().splitlines(keepends=True)) for p in chain_files(path)]
    return chainlib.walk(files)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _log(path: Path, n: int) -> AuditLog:
    log, _ = AuditLog.open(path, 1.0)
    for i in range(n):
        log.append({"tool": "t", "verdict": "allow", "rule": "default.allow", "request_id": i}, 2.0)
    return log


def test_log_deleted_while_running_is_noticed_at_the_next_write_and_verify_reports_the_gap(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    log = _log(path, 2)
    before = log.head
    path.unlink()
    log.append({"tool": "t", "verdict": "deny", "rule": "pin.unknown_tool"}, 3.0)
    log.close()
    gap, verdict = _records(path)  # the records went to a file at the path, not to the deleted one
    assert gap["rule"] == GAP_RULE and gap["prev"] == before and "deleted or moved" in gap["reason"]
    assert verdict["rule"] == "pin.unknown_tool"
    result = _walk(path)
    assert not result.ok and result.broken is not None
    assert (result.broken.file, result.broken.line, result.broken.kind) == ("audit.jsonl", 1, "deleted")
    assert len(log.gaps) == 1


def test_log_replaced_while_running_is_set_aside_and_the_chain_continues_after_a_gap(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = _log(path, 1)
    forged = chainlib.encode_line(
        chainlib.chain({"rule": "default.allow", "verdict": "allow"}, chainlib.GENESIS)
    )
    tmp = tmp_path / "forged"
    tmp.write_bytes(forged)
    os.replace(tmp, path)
    log.append({"tool": "t", "verdict": "allow", "rule": "default.allow"}, 3.0)
    log.close()
    [aside] = tmp_path.glob("audit.jsonl.replaced-*")
    assert aside.read_bytes() == forged  # kept as evidence, never appended to
    assert _records(path)[0]["rule"] == GAP_RULE and "replaced by another file" in _records(path)[0]["reason"]
    assert not _walk(path).ok


def test_forged_start_found_at_restart_is_a_break_not_a_crash_tear(tmp_path: Path) -> None:
    """The daemon knows (from its journal) the last hash it wrote; a log that does not hold it was
    replaced while the daemon was down, whatever it holds now."""
    path = tmp_path / "audit.jsonl"
    log = _log(path, 3)
    head = log.head
    log.close()
    path.write_bytes(b'{"ts":"2026-01-01T00:00:00.000Z","verdict":"allow"')  # a forged, torn-looking line
    reopened, repair = AuditLog.open(path, 5.0, known_head=head)
    reopened.close()
    assert repair is None  # not taken for a crash tear
    [aside] = tmp_path.glob("audit.jsonl.replaced-*")
    assert aside.read_bytes().startswith(b'{"ts"')
    [gap] = _records(path)
    assert (
        gap["rule"] == GAP_RULE and gap["prev"] == head and "while bouncerd was not running" in gap["reason"]
    )
    result = _walk(path)
    assert not result.ok and result.broken is not None and result.broken.kind == "deleted"


def test_log_that_holds_the_known_head_opens_as_before(tmp_path: Path) -> None:
    """The benign twins: a clean restart, and a restart after a crash wrote more after the known head."""
    path = tmp_path / "audit.jsonl"
    log = _log(path, 2)
    known = log.head
    log.append({"tool": "t", "verdict": "allow", "rule": "default.allow"}, 3.0)  # written after it
    log.close()
    reopened, repair = AuditLog.open(path, 5.0, known_head=known)
    reopened.append({"tool": "t", "verdict": "allow", "rule": "default.allow"}, 6.0)
    reopened.close()
    assert repair is None and not list(tmp_path.glob("*.replaced-*")) and reopened.gaps == []
    assert _walk(path).ok


def test_gap_record_whose_write_failed_is_written_before_the_next_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk at the moment the loss is noticed must not lose the record of the loss."""
    path = tmp_path / "audit.jsonl"
    log = _log(path, 1)
    path.unlink()
    real_write = os.write

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(audit.os, "write", full)
    with pytest.raises(OSError, match="No space"):
        log.append({"tool": "t", "verdict": "allow", "rule": "default.allow"}, 3.0)
    monkeypatch.setattr(audit.os, "write", real_write)
    log.append({"tool": "t", "verdict": "allow", "rule": "default.allow"}, 4.0)
    log.close()
    assert [r["rule"] for r in _records(path)] == [GAP_RULE, "default.allow"]


def test_many_rotations_after_the_known_head_are_no_gap_when_each_was_journalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The benign twin of a forged start: a log rotated more times than it keeps files since the head
    was last journalled would no longer hold that head. Each rotation hands the new head to the daemon
    (`on_rotated`), which journals it; that head is found at the next start."""
    monkeypatch.setattr(audit, "ROTATE_AFTER_BYTES", 2000)
    path = tmp_path / "audit.jsonl"
    log, _ = AuditLog.open(path, 1.0)
    journalled: list[str] = []
    log.on_rotated = journalled.append
    for i in range(400):  # far more than KEEP_ROTATED rotations
        log.append({"tool": "t", "verdict": "allow", "rule": "default.allow", "request_id": i}, 2.0)
    log.close()
    assert len(journalled) > audit.KEEP_ROTATED
    reopened, _ = AuditLog.open(path, 3.0, known_head=journalled[-1])
    reopened.close()
    assert reopened.gaps == [] and not list(tmp_path.glob("*.replaced-*"))
    stale, _ = AuditLog.open(path, 4.0, known_head=journalled[0])  # rotated away: named as a gap
    stale.close()
    assert len(stale.gaps) == 1
