"""A small synchronous client for bouncerd: connect, hello, request/reply by id.

Theory of operation
-------------------
`Client.connect` opens the daemon's Unix socket (``paths.socket``), sends ``hello`` and waits for its
reply. `request` sends one request and returns its reply; `send` + `wait` pipeline several (replies
that arrive for other ids are kept until asked for). Frames go through `bouncerd.wire`, so this
client and the daemon share one codec. Everything is blocking with a timeout: this is for
``bouncerctl``, hooks, start-up probes and tests, not for the shim's hot path.

One error family: a daemon that is absent, refuses us, closes the connection or does not answer in
time raises `DaemonUnavailableError` (its message is one line a person can act on); an error reply
raises `DaemonRequestError` with the daemon's code and message.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from types import TracebackType
from typing import Any

from bouncerd import wire
from bouncerd.errors import DaemonRequestError, DaemonUnavailableError, ProtocolError, UnsafeDirectoryError
from bouncerd.paths import Paths, check_private_dir

# A local daemon answers in microseconds; a few seconds covers a daemon still replaying its journal
# after a restart, and is short enough that a person at `bouncerctl` is not left waiting.
DEFAULT_TIMEOUT_SECONDS = 5.0

RECV_BYTES = 256 * 1024


def check_runtime_dir(paths: Paths) -> None:
    """DaemonUnavailableError unless `paths.runtime` is private; a missing one means no daemon."""
    try:
        check_private_dir(paths.runtime)
    except FileNotFoundError:
        raise DaemonUnavailableError(f"bouncerd is not running (no socket at {paths.socket})") from None
    except UnsafeDirectoryError as exc:
        raise DaemonUnavailableError(f"not connecting to bouncerd: {exc}") from None
    except OSError as exc:
        raise DaemonUnavailableError(f"cannot examine {paths.runtime}: {exc.strerror or exc}") from None


class Client:
    def __init__(self, sock: socket.socket, socket_path: Path) -> None:
        self._sock = sock
        self.socket_path = socket_path
        self._decoder = wire.FrameDecoder()
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self.hello_reply: dict[str, Any] = {}

    @classmethod
    def connect(
        cls,
        where: Paths | Path | str,
        *,
        role: str = "ctl",
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        **hello: Any,
    ) -> Client:
        """Connect and say hello. `hello` adds fields (session, server, upstream, instance, ...).

        Given `Paths`, the runtime directory is first checked as the daemon and the shim check it (ours,
        0700, not a symlink): a socket in a directory someone else controls could be theirs, and a ctl
        connection carries approvals and policy reloads."""
        if isinstance(where, Paths):
            check_runtime_dir(where)
        path = where.socket if isinstance(where, Paths) else Path(where)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except FileNotFoundError:
            sock.close()
            raise DaemonUnavailableError(f"bouncerd is not running (no socket at {path})") from None
        except ConnectionRefusedError:
            sock.close()
            raise DaemonUnavailableError(f"bouncerd is not running (nothing listens on {path})") from None
        except PermissionError:
            sock.close()
            raise DaemonUnavailableError(f"cannot reach bouncerd: permission denied on {path}") from None
        except OSError as exc:
            sock.close()
            raise DaemonUnavailableError(f"cannot reach bouncerd at {path}: {exc.strerror or exc}") from None
        client = cls(sock, path)
        fields: dict[str, Any] = {"version": wire.PROTOCOL_VERSION, "role": role, "pid": os.getpid()}
        fields.update(hello)
        try:
            client.hello_reply = client.request("hello", **fields)
        except BaseException:
            client.close()
            raise
        return client

    def send(self, op: str, **fields: Any) -> int:
        """Send one request without waiting; return its id."""
        rid = self._next_id
        self._next_id += 1
        frame = wire.encode(wire.request(op, rid, **fields))
        try:
            self._sock.sendall(frame)
        except OSError as exc:
            raise DaemonUnavailableError(f"lost the connection to bouncerd: {exc.strerror or exc}") from None
        return rid

    def wait(self, rid: int) -> dict[str, Any]:
        """The reply to request `rid` (raw: check ``ok`` yourself, or use `request`)."""
        while rid not in self._replies:
            try:
                msg = self._decoder.next_message()
            except ProtocolError as exc:
                raise DaemonUnavailableError(f"bouncerd sent something that is not a frame: {exc}") from None
            if msg is None:
                self._receive()
                continue
            got = msg.get("id")
            if isinstance(got, int):
                self._replies[got] = msg
        return self._replies.pop(rid)

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request and return its reply; DaemonRequestError if the daemon refused it."""
        reply = self.wait(self.send(op, **fields))
        if not reply.get("ok"):
            error = reply.get("error") or {}
            raise DaemonRequestError(str(error.get("code", "error")), str(error.get("message", "")))
        return reply

    def _receive(self) -> None:
        try:
            data = self._sock.recv(RECV_BYTES)
        except TimeoutError:
            raise DaemonUnavailableError("bouncerd did not answer in time") from None
        except OSError as exc:
            raise DaemonUnavailableError(f"lost the connection to bouncerd: {exc.strerror or exc}") from None
        if not data:
            raise DaemonUnavailableError("bouncerd closed the connection")
        self._decoder.receive_data(data)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
