"""bouncerd/atomicfile.py: a file is replaced whole or not at all (python-tuf's temp file, fsync, rename)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bouncerd.atomicfile import replace_file, write_atomically


def test_a_crash_while_writing_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    """A write that fails half-way (disk full, a killed encoder) must not leave a torn state file."""
    path = tmp_path / "state"
    path.write_bytes(b"old state")

    def half_then_fail(fd: int) -> None:
        os.write(fd, b"new sta")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        replace_file(path, half_then_fail)
    assert path.read_bytes() == b"old state"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_the_new_file_has_the_mode_asked_for_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    old = os.umask(0o077)
    try:
        write_atomically(path, b"{}")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        write_atomically(path, b"report", mode=0o644)
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    finally:
        os.umask(old)
    assert path.read_bytes() == b"report"


def test_a_link_planted_at_the_path_is_replaced_not_followed(tmp_path: Path) -> None:
    """A link at the state file's path must not redirect the write into the file it points to."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    path = tmp_path / "state"
    path.symlink_to(victim)
    write_atomically(path, b"new state")
    assert victim.read_bytes() == b"precious"
    assert not path.is_symlink() and path.read_bytes() == b"new state"


def test_large_data_is_written_whole(tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024)
    write_atomically(tmp_path / "big", data)
    assert (tmp_path / "big").read_bytes() == data
