"""Who holds the daemon's instance lock, read without taking it: for the CLI, which must not import
the server to tell a daemon that lost its socket from one that is not running."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path


def lock_holder(path: Path) -> int | None:
    """The pid of a live daemon holding the instance lock at `path` (its own, or "0" if it does not
    say), or None if nobody holds it. Read-only: creates nothing and leaves no lock behind. Lets a
    client tell a daemon that lost its socket from one that is not running."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return read_pid(fd) or 0
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None
