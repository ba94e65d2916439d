"""Who is on the other end of a Unix socket: the kernel's word, checked on every accepted connection.

Theory of operation
-------------------
The socket file is 0600 in a 0700 directory, so another user should not be able to connect at all.
The peer check is the second wall: it holds when the socket came from systemd (whose mode we did not
choose), when a directory's mode was loosened after start, and when root-owned helpers connect on
someone's behalf. The credentials come from the kernel, not from anything the peer sent:

- Linux: ``SO_PEERCRED`` returns ``struct ucred {pid_t pid; uid_t uid; gid_t gid;}``, captured at
  ``connect()`` time.
- macOS / BSD: ``LOCAL_PEERCRED`` returns ``struct xucred`` (uid, groups), and ``LOCAL_PEERPID`` the
  pid where available. That path is kept small and separate below (`_peer_bsd`).

`check_peer` takes the expected uid as an argument (the daemon passes its own uid) so the rule is
one comparison a test can drive. A peer whose uid differs is refused with `PeerRejectedError`; the
daemon then closes the connection without a reply.
"""

from __future__ import annotations

import socket
import struct
import sys
from dataclasses import dataclass

from bouncerd.errors import PeerRejectedError

_UCRED = struct.Struct("=iII")  # Linux struct ucred: pid_t, uid_t, gid_t

# macOS <sys/un.h>: SOL_LOCAL is 0; LOCAL_PEERCRED 0x001 returns struct xucred; LOCAL_PEERPID 0x002.
_SOL_LOCAL = 0
_LOCAL_PEERCRED = 0x001
_LOCAL_PEERPID = 0x002
# struct xucred { u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]; }
_XUCRED = struct.Struct("=IIh2x16I")


@dataclass(frozen=True)
class PeerCred:
    pid: int | None  # None where the platform does not say
    uid: int
    gid: int | None


def peer_credentials(sock: socket.socket) -> PeerCred:
    """The kernel's record of the connecting process. Raises PeerRejectedError if it cannot be read."""
    try:
        if hasattr(socket, "SO_PEERCRED"):
            return _peer_linux(sock)
        if sys.platform == "darwin" or "bsd" in sys.platform:
            return _peer_bsd(sock)
    except OSError as exc:
        raise PeerRejectedError(f"cannot read the peer's credentials: {exc}") from None
    raise PeerRejectedError(f"no way to read a Unix socket peer's credentials on {sys.platform}")


def check_peer(sock: socket.socket, expected_uid: int) -> PeerCred:
    """The peer's credentials if its uid is `expected_uid`; PeerRejectedError otherwise."""
    cred = peer_credentials(sock)
    if cred.uid != expected_uid:
        raise PeerRejectedError(
            f"connection from uid {cred.uid} (pid {cred.pid}); only uid {expected_uid} may connect"
        )
    return cred


def _peer_linux(sock: socket.socket) -> PeerCred:
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return PeerCred(pid=pid if pid > 0 else None, uid=uid, gid=gid)


def _peer_bsd(sock: socket.socket) -> PeerCred:
    # Best effort: getpeereid(3) is not exposed by Python, but it is LOCAL_PEERCRED underneath.
    level = getattr(socket, "SOL_LOCAL", _SOL_LOCAL)
    raw = sock.getsockopt(level, getattr(socket, "LOCAL_PEERCRED", _LOCAL_PEERCRED), _XUCRED.size)
    fields = _XUCRED.unpack(raw.ljust(_XUCRED.size, b"\0"))
    uid, ngroups = fields[1], fields[2]
    gid = fields[3] if ngroups > 0 else None
    pid: int | None
    try:
        pid = struct.unpack("=i", sock.getsockopt(level, _LOCAL_PEERPID, 4))[0]
    except OSError:
        pid = None  # FreeBSD has no LOCAL_PEERPID
    return PeerCred(pid=pid, uid=uid, gid=gid)
