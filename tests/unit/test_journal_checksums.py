"""The journal's records carry checksums: damage is told from a crash tear, and a failed append never
leaves a torn record for the next one to follow. (The engine's restricted state that damage leads to is
tested in test_journal_restricted.py; the daemon's in tests/e2e/test_faults_journal.py.)"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from journal_helpers import read_entries as _read
from journal_helpers import write_entries as _write

from bouncerd import wire
from bouncerd.server import journal as journal_mod
from bouncerd.server.journal import MAGIC, Journal

ENTRIES: list[dict[str, Any]] = [
    {"k": "events", "events": [{"ev": "attempt", "session": "s", "server": "m", "tool": "delete_file"}]},
    {"k": "events", "events": [{"ev": "vouch", "session": "s", "keys": ["boss@corp.example"]}]},
    {"k": "blob", "payload": b"\x00\xff" * 40_000},  # written around the value (writev)
]


def test_flipped_byte_inside_a_string_is_damage_not_a_silent_change(tmp_path: Path) -> None:
    """Without checksums a flip inside a string (a session key, a tool name) decodes and is applied as
    if written so. With them the record fails its check, and the file is damaged."""
    path = tmp_path / "j"
    _write(path, ENTRIES)
    data = bytearray(path.read_bytes())
    at = data.index(b"delete_file")
    data[at] ^= 0x01  # "delete_file" -> "eelete_file": still valid msgpack
    path.write_bytes(bytes(data))
    seen: list[dict[str, Any]] = []
    journal, recovery = Journal.open(path, seen.append)
    journal.close()
    assert recovery.state == "damaged" and "checksum" in (recovery.problem or "")
    assert seen == []  # nothing from the damaged record on is applied
    assert recovery.aside is not None and recovery.aside.name.startswith("j.damaged-")
    assert "DAMAGED" in recovery.describe()


@pytest.mark.parametrize(
    "damage",
    ["emptied", "random", "length"],
)
def test_emptied_random_or_mangled_journal_is_damaged(tmp_path: Path, damage: str) -> None:
    """An emptied file is not a fresh one (a fresh one has no file), bytes that are no journal are not
    an empty journal, and a length no writer produces is not a tear."""
    path = tmp_path / "j"
    _write(path, ENTRIES)
    if damage == "emptied":
        path.write_bytes(b"")
    elif damage == "random":
        path.write_bytes(os.urandom(4096))
    else:
        data = bytearray(path.read_bytes())
        data[len(MAGIC) : len(MAGIC) + 4] = (wire.MAX_FRAME_BYTES + 1).to_bytes(4, "big")
        path.write_bytes(bytes(data))
    journal, recovery = Journal.open(path, lambda entry: None)
    journal.append({"k": "after"})
    journal.close()
    assert recovery.state == "damaged"
    assert _read(path) == [{"k": "after"}]  # the file is a journal again, appended on a record boundary


def test_torn_last_record_is_a_tear_and_recovery_is_exact(tmp_path: Path) -> None:
    """A process killed inside write leaves an incomplete last record, never acknowledged: cut, kept
    aside, and every whole record before it kept."""
    path = tmp_path / "j"
    _write(path, ENTRIES)
    whole = path.read_bytes()
    path.write_bytes(whole[:-100])
    seen: list[dict[str, Any]] = []
    journal, recovery = Journal.open(path, seen.append)
    journal.close()
    assert recovery.state == "torn" and seen == ENTRIES[:2]
    assert recovery.aside is not None and recovery.aside.name.startswith("j.torn-")


def test_failed_append_on_a_full_disk_is_cut_back_before_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Disk full: the kernel takes half a record and then refuses. Before, the half stayed, the next
    append went after it once space returned, and the next start cut everything after the tear. Now
    the half is cut at once, and the records after it are read at the next start."""
    path = tmp_path / "j"
    _write(path, ENTRIES[:1])
    journal, _ = Journal.open(path, lambda entry: None)
    real_writev = os.writev

    def half_then_full(fd: int, parts: list[bytes]) -> int:
        whole = b"".join(parts)
        os.write(fd, whole[: len(whole) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_mod.os, "writev", half_then_full)
    with pytest.raises(OSError, match="No space"):
        journal.append(ENTRIES[2])
    monkeypatch.setattr(journal_mod.os, "writev", real_writev)
    journal.append(ENTRIES[1])  # space is back
    journal.close()
    seen: list[dict[str, Any]] = []
    _, recovery = Journal.open(path, seen.append)
    assert recovery.state == "clean" and seen == [ENTRIES[0], ENTRIES[1]]


def test_append_after_a_cut_that_failed_cuts_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If even the cut fails, the next append cuts before it writes: never a record after a torn one."""
    path = tmp_path / "j"
    _write(path, ENTRIES[:1])
    journal, _ = Journal.open(path, lambda entry: None)
    real_writev, real_ftruncate = os.writev, os.ftruncate

    def half_then_full(fd: int, parts: list[bytes]) -> int:
        whole = b"".join(parts)
        os.write(fd, whole[: len(whole) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    def refuse(fd: int, size: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(journal_mod.os, "writev", half_then_full)
    monkeypatch.setattr(journal_mod.os, "ftruncate", refuse)
    with pytest.raises(OSError, match="No space"):
        journal.append(ENTRIES[2])
    with pytest.raises(OSError, match="Input/output"):  # the cut still fails: nothing is written
        journal.append(ENTRIES[1])
    monkeypatch.setattr(journal_mod.os, "writev", real_writev)
    monkeypatch.setattr(journal_mod.os, "ftruncate", real_ftruncate)
    journal.append(ENTRIES[1])
    journal.close()
    assert _read(path) == [ENTRIES[0], ENTRIES[1]]


def test_journal_of_the_earlier_format_is_read_and_rewritten_with_checksums(tmp_path: Path) -> None:
    """Upgrading keeps the state: a journal of bare wire frames is read whole and rewritten."""
    path = tmp_path / "j"
    path.write_bytes(b"".join(wire.encode(e) for e in ENTRIES))
    seen: list[dict[str, Any]] = []
    journal, recovery = Journal.open(path, seen.append)
    journal.append({"k": "after"})
    journal.close()
    assert seen == ENTRIES and recovery.legacy and recovery.state == "clean"
    assert path.read_bytes().startswith(MAGIC)
    assert _read(path) == [*ENTRIES, {"k": "after"}]


def test_undecodable_frame_in_an_earlier_format_journal_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "j"
    frames = [wire.encode(e) for e in ENTRIES]
    path.write_bytes(frames[0] + b"\x00\x00\x00\x02\xc1\xc1" + frames[1])
    seen: list[dict[str, Any]] = []
    journal, recovery = Journal.open(path, seen.append)
    journal.close()
    assert recovery.state == "damaged" and seen == ENTRIES[:1]
