"""The journal file and the replay of observation entries: torn tails, compaction, re-indexing."""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from journal_helpers import read_entries as _read
from journal_helpers import write_entries as _write

from bouncerd import wire
from bouncerd.core import taint
from bouncerd.core.engine import Engine
from bouncerd.server.journal import MAGIC, Journal, record_parts
from bouncerd.server.observations import ObservationIndex

ENTRIES: list[dict[str, Any]] = [
    {"k": "events", "events": [{"ev": "attempt", "session": "s", "server": "m", "tool": "t"}]},
    {"k": "events", "events": []},
    {"k": "blob", "payload": b"\x00\xff" * 1000},
]


def test_entries_replay_in_order(tmp_path: Path) -> None:
    path = tmp_path / "j"
    _write(path, ENTRIES)
    assert _read(path) == ENTRIES


def test_missing_journal_opens_empty(tmp_path: Path) -> None:
    journal, recovery = Journal.open(tmp_path / "j", lambda entry: None)
    journal.close()
    assert (recovery.entries, recovery.torn_bytes) == (0, 0)


def test_journal_is_created_private(tmp_path: Path) -> None:
    _write(tmp_path / "j", ENTRIES)
    assert stat.S_IMODE(os.stat(tmp_path / "j").st_mode) == 0o600


@pytest.mark.parametrize(
    "torn",
    [
        struct.pack(">I", 500) + b"\x82\xa1k",  # header plus part of the body: a crash mid-write
        b"\x00\x00",  # half a header
        struct.pack(">I", wire.MAX_FRAME_BYTES + 1),  # a header no writer of ours produces
        struct.pack(">I", 2) + b"\xc1\xc1",  # a whole frame that does not decode
    ],
    ids=["partial-body", "partial-header", "oversized-header", "undecodable"],
)
def test_torn_tail_is_cut_kept_aside_and_appends_resume_on_a_frame_boundary(
    tmp_path: Path, torn: bytes
) -> None:
    path = tmp_path / "j"
    _write(path, ENTRIES)
    good = path.stat().st_size
    with path.open("ab") as fh:
        fh.write(torn)
    seen: list[dict[str, Any]] = []
    journal, recovery = Journal.open(path, seen.append)
    assert seen == ENTRIES
    assert (recovery.good_bytes, recovery.torn_bytes) == (good, len(torn))
    assert recovery.aside is not None and recovery.aside.read_bytes() == torn
    assert "truncated a torn tail" in recovery.describe()
    journal.append({"k": "after"})
    journal.close()
    assert _read(path) == [*ENTRIES, {"k": "after"}]


@settings(max_examples=50, deadline=None)
@given(cut=st.integers(min_value=0, max_value=2100))
def test_any_crash_point_keeps_every_whole_frame(tmp_path_factory: pytest.TempPathFactory, cut: int) -> None:
    """Wherever a write is cut off, every record written whole before it survives, nothing else does,
    and the cut is read as a tear (exact recovery), never as damage. (The header cannot be cut: a
    journal is created whole by a rename.)"""
    path = tmp_path_factory.mktemp("j") / "j"
    records = [b"".join(record_parts(e)) for e in ENTRIES]
    data = (MAGIC + b"".join(records))[: len(MAGIC) + cut]
    path.write_bytes(data)
    seen: list[dict[str, Any]] = []
    journal, recovery = Journal.open(path, seen.append)
    journal.close()
    whole = 0
    ends = len(MAGIC)
    for record in records:
        if ends + len(record) > len(data):
            break
        ends += len(record)
        whole += 1
    assert seen == ENTRIES[:whole]
    assert path.stat().st_size == ends == recovery.good_bytes
    assert recovery.state == ("clean" if ends == len(data) else "torn")


def test_rewrite_replaces_the_journal_whole(tmp_path: Path) -> None:
    path = tmp_path / "j"
    _write(path, ENTRIES)
    journal, _ = Journal.open(path, lambda entry: None)
    journal.rewrite([{"k": "snapshot"}])
    journal.append({"k": "after"})
    journal.close()
    assert _read(path) == [{"k": "snapshot"}, {"k": "after"}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j"]


def test_failed_rewrite_keeps_the_old_journal(tmp_path: Path) -> None:
    path = tmp_path / "j"
    _write(path, ENTRIES)

    def broken() -> Any:
        yield {"k": "snapshot"}
        raise OSError("disk full")

    journal, _ = Journal.open(path, lambda entry: None)
    with pytest.raises(OSError, match="disk full"):
        journal.rewrite(broken())
    journal.append({"k": "after"})
    journal.close()
    assert _read(path) == [*ENTRIES, {"k": "after"}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j"]


# ---- observation entries -----------------------------------------------------------------------


def _obs(n: int, seq: int, text: str, instance: str = "i1") -> dict[str, Any]:
    return {
        "k": "obs",
        "n": n,
        "session": "s",
        "server": "mail",
        "tool": "read",
        "request_id": n,
        "kind": "result",
        "method": "tools/call",
        "ts": 1.0,
        "instance": instance,
        "seq": seq,
        "payload": text.encode(),
    }


def test_observation_without_indexed_mark_is_queued_again() -> None:
    source = taint.Source(server="mail", tool="read", request_id=0, ts=1.0)
    events = Engine().record_taint("s", taint.extract("write to someone@example.org", source))
    assert events  # real taint events, in whatever shape the engine writes them
    engine = Engine()
    index = ObservationIndex(engine, lambda entry: None)
    for entry in (_obs(0, 1, "a"), {"k": "indexed", "n": 0, "events": events}, _obs(1, 2, "b")):
        assert index.replay(entry)
    index.replay_done()
    assert index.queued == 1
    assert (index.indexed_upto, index.accepted_upto, index.next_n) == (0, 1, 2)
    assert [e["n"] for e in index.snapshot_entries() if e["k"] == "obs"] == [1]
    assert engine.snapshot()  # the indexed observation's taint was applied


def test_replayed_seq_of_a_known_instance_is_a_duplicate() -> None:
    index = ObservationIndex(Engine(), lambda entry: None)
    index.replay(_obs(0, 5, "a"))
    index.replay_done()
    assert index.is_duplicate("i1", 5) and index.is_duplicate("i1", 4)
    assert not index.is_duplicate("i1", 6)
    assert not index.is_duplicate("other", 1)
    assert not index.is_duplicate(None, 1)


def test_dedup_table_and_numbering_survive_compaction() -> None:
    first = ObservationIndex(Engine(), lambda entry: None)
    first.replay(_obs(0, 5, "a"))
    first.replay({"k": "indexed", "n": 0, "events": []})
    first.replay_done()
    second = ObservationIndex(Engine(), lambda entry: None)
    for entry in first.snapshot_entries():
        second.replay(entry)
    second.replay_done()
    assert second.is_duplicate("i1", 5)
    assert (second.next_n, second.queued, second.indexed_upto) == (1, 0, 0)


def test_entries_with_large_blobs_are_framed_exactly_as_wire_encodes_them() -> None:
    from bouncerd.server.journal import BLOB_MIN_BYTES, encode_parts

    for size in (BLOB_MIN_BYTES - 1, BLOB_MIN_BYTES, 70_000, 1 << 17):
        entry = {"k": "obs", "n": 3, "payload": b"x" * size, "after": [1, "two"], "also": b"y" * size}
        parts = encode_parts(entry)
        assert b"".join(parts) == wire.encode(entry)
        assert any(part is entry["payload"] for part in parts) == (size >= BLOB_MIN_BYTES)
