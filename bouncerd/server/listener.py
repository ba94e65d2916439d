"""Getting a listening socket safely: the instance lock, systemd activation, live-daemon detection, bind.

Theory of operation
-------------------
Start-up takes these steps, in this order, each one refusing rather than guessing:

1. **Lock.** `InstanceLock` opens ``bouncerd.pid`` in the (already checked, 0700) runtime directory
   and takes a non-blocking ``flock``, held for the life of the process. A second daemon fails here
   with `AlreadyRunningError` naming the pid written in the file. The lock file is unlinked at exit
   while still locked; a locker that raced with that unlink would hold a lock on a dead inode, so
   after locking we check that the path still names the inode we locked, and retry if not.
2. **Activation.** If systemd (or ``systemd-socket-activate``) passed a socket (``LISTEN_PID`` equals
   our pid, ``LISTEN_FDS`` >= 1), fd 3 is the listener; the variables are removed from the environment
   either way, as sd_listen_fds(3) does, so no child inherits them. The socket file then belongs to
   systemd and is never removed by us.
3. **Stale socket.** Only with the lock held do we look at an existing socket path: if something
   answers a connect, it is a live daemon (perhaps one that predates the lock) and we refuse; if the
   connect is refused, the file is a leftover of a crash and is removed. Anything that is not a socket
   is refused and left alone.
4. **Bind** under umask 077, so the socket is never visible with looser permissions, then chmod 0600
   (some systems ignore the umask for sockets) and listen. anyio's `create_unix_listener` is not used:
   it unlinks an existing path and chmods after bind, both of which this module must control.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
from collections.abc import MutableMapping
from pathlib import Path

from bouncerd.errors import AlreadyRunningError, BouncerError
from bouncerd.lockholder import read_pid

SD_LISTEN_FDS_START = 3  # the first passed fd, fixed by the sd_listen_fds(3) protocol
ACTIVATION_VARIABLES = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")

# Connections waiting for accept(). Every shim of every client connects at start-up, and clients such
# as Claude Code start a dozen servers at once; 128 is SOMAXCONN on most systems.
LISTEN_BACKLOG = 128

# How long a probe waits for a connect to the socket path. A live daemon accepts within microseconds
# (the kernel completes the connect before accept()); a second is generous even for a loaded machine.
PROBE_TIMEOUT_SECONDS = 1.0

# Retries when the lock file is swapped under us by an exiting daemon (see the module docstring).
LOCK_ATTEMPTS = 5


class InstanceLock:
    """An exclusive flock on the pid file, held until `release`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        for _ in range(LOCK_ATTEMPTS):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = read_pid(fd)
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    who = f"pid {holder}" if holder else "pid unknown"
                    raise AlreadyRunningError(f"bouncerd is already running ({who})") from None
                raise
            try:
                same = os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            self._fd = fd
            return
        raise AlreadyRunningError(f"could not take the lock {self.path}: it keeps being replaced")

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(self._fd).st_ino:
                os.unlink(self.path)
        os.close(self._fd)
        self._fd = None


def take_activated_socket(environ: MutableMapping[str, str], pid: int) -> socket.socket | None:
    """The listener systemd passed us, or None. Removes the activation variables from `environ`."""
    listen_pid = environ.get("LISTEN_PID", "")
    listen_fds = environ.get("LISTEN_FDS", "")
    for name in ACTIVATION_VARIABLES:
        environ.pop(name, None)
    if not (
        listen_pid.isdigit() and int(listen_pid) == pid and listen_fds.isdigit() and int(listen_fds) >= 1
    ):
        return None
    fd = SD_LISTEN_FDS_START
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise BouncerError(f"LISTEN_FDS says fd {fd} is our socket, but it is not one: {exc}") from None
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.detach()
        raise BouncerError(f"the activated socket (fd {fd}) is not a Unix stream socket")
    os.set_inheritable(fd, False)
    # Further fds (LISTEN_FDS > 1) are not ours to use; close them so no child inherits them.
    for extra in range(fd + 1, fd + int(listen_fds)):
        with contextlib.suppress(OSError):
            os.close(extra)
    return sock


def is_live(path: Path) -> bool:
    """Does something accept connections on the socket at `path`?"""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(PROBE_TIMEOUT_SECONDS)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except TimeoutError:
        return True  # a full backlog: someone is listening, just busy
    except OSError:
        return False
    finally:
        probe.close()
    return True


def remove_stale_socket(path: Path) -> bool:
    """Remove a dead socket at `path` (True), or leave nothing to remove (False). Call with the lock held."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(st.st_mode):
        raise BouncerError(f"{path} exists and is not a socket; refusing to remove it")
    if is_live(path):
        raise AlreadyRunningError(f"another process is listening on {path}; leaving it alone")
    os.unlink(path)
    return True


def bind_socket(path: Path) -> socket.socket:
    """A listening Unix socket at `path`, 0600 from the moment it exists."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o077)
        try:
            sock.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(LISTEN_BACKLOG)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


def socket_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, to check at exit that it is still the one we bound."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def remove_own_socket(path: Path, identity: tuple[int, int] | None) -> None:
    if identity is not None and socket_identity(path) == identity:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
