"""Who is asking: the state one connection's hello established, as the ops see it.

The ops (bouncerd/server/daemon.py, approvals.py, hooks.py) need to know the peer's role, session and
server, not the connection that frames its bytes; so they get a `Caller`, and the connection
(bouncerd/server/connection.py) holds one. An op that needs a session or a server the hello did not
name raises `RefusedError`, which the connection turns into an error reply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bouncerd.errors import BouncerError
from bouncerd.server.sessions import ServerEntry, Session


class RefusedError(BouncerError):
    """A well-formed request this connection may not make (e.g. a verdict before a shim hello)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Caller:
    def __init__(self) -> None:
        self.role: str | None = None
        self.instance: str | None = None
        self.session: Session | None = None
        self.server: ServerEntry | None = None
        self.policy_path: str | None = None  # the shim's --policy, layered over the user's policy

    def require_session(self) -> Session:
        if self.session is None:
            raise RefusedError("no_session", "this op needs a session: send hello with a session key")
        return self.session

    def require_server(self) -> tuple[Session, ServerEntry]:
        session = self.require_session()
        if self.server is None:
            raise RefusedError("no_server", "this op needs a server: send hello with role shim and a server")
        return session, self.server


# One op: (who asks, request id, the request as `wire.check_request` validated it) -> the reply.
# The request is that op's TypedDict in bouncerd/wire.py; the table is keyed by op name, so its
# value type cannot name each one.
Handler = Callable[[Caller, int, Any], dict[str, Any]]
# An op whose reply waits on work off the event loop (a policy reload): the same, awaited.
AsyncHandler = Callable[[Caller, int, Any], Awaitable[dict[str, Any]]]
