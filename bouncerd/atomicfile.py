"""Replacing a file whole: a reader sees the old bytes or the new ones, never half of either.

Theory of operation
-------------------
Every state and output file Bouncer rewrites (the journal when compacted, policy.yaml, the OAuth
tokens, the autostart record, service units, reports, edited client configs, init's undo record) is
written the one way python-tuf writes its metadata: the new bytes go into a temporary file in the
same directory (created exclusively, never through a link, with the final mode from the start), are
fsync-ed, and are renamed over the path with `os.replace`, which is atomic on POSIX. Then the
directory is fsync-ed, so the rename itself survives a power loss where the filesystem allows that
(some refuse to fsync a directory; the rename is done either way). On any error before the rename,
the temporary file is removed and the old file stays as it was.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def replace_file(
    path: Path, write: Callable[[int], None], *, mode: int = 0o600, owner: tuple[int, int] | None = None
) -> None:
    """Replace `path` with what `write` writes to the file descriptor it is given (see the module).

    `mode` is the new file's permission bits; `owner` (uid, gid) is given to it when it differs from
    this process's, which only root can do (otherwise the file stays this user's)."""
    tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, _CREATE, mode & 0o777)
    try:
        try:
            write(fd)
            os.fchmod(fd, mode)  # the umask may have narrowed the mode given to open
            if owner is not None and owner != (os.getuid(), os.getgid()):
                with contextlib.suppress(OSError):
                    os.fchown(fd, *owner)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (`os.write` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_atomically(
    path: Path, data: bytes, *, mode: int = 0o600, owner: tuple[int, int] | None = None
) -> None:
    """Replace `path` with `data` (see the module)."""
    replace_file(path, lambda fd: write_all(fd, data), mode=mode, owner=owner)
