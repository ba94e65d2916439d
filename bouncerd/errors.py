"""One error tree. Each adapter promises one family; untrusted input raises exactly one type."""

from __future__ import annotations


class BouncerError(Exception):
    """Base of every error Bouncer raises on purpose."""


class PolicyError(BouncerError):
    """A policy file is wrong. The message names the file, line, key and reason."""


class ProtocolError(BouncerError):
    """A peer sent something that is not a valid frame or message. The connection is dropped."""


class PeerRejectedError(BouncerError):
    """A connection came from another user."""


class DaemonUnavailableError(BouncerError):
    """bouncerd is not running or cannot be reached."""


class UnsafeDirectoryError(BouncerError):
    """A runtime or state directory is a symlink, owned by someone else, or open to group/others."""


class AlreadyRunningError(BouncerError):
    """Another bouncerd already serves this socket."""


class DaemonRequestError(BouncerError):
    """bouncerd answered a request with an error reply. `code` is the reply's machine-readable code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
