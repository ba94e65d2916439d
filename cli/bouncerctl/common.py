"""Helpers shared by bouncerctl commands: reaching the daemon and the errors that map to exit codes.

Exit codes: 0 success, 1 a request failed (the daemon said why), 2 usage (click's own), 3 the daemon
is not running or cannot be reached. Scripts can tell "not running" apart from "refused".
"""

from __future__ import annotations

import os
from typing import IO, Any

import click

from bouncerctl import term
from bouncerd.client import Client
from bouncerd.errors import BouncerError, DaemonRequestError, DaemonUnavailableError
from bouncerd.paths import resolve

EXIT_REQUEST_FAILED = 1
EXIT_NOT_RUNNING = 3


# What a newcomer does next when nothing answers (right after `init`, the daemon has not started yet).
NOT_RUNNING_NEXT = (
    "It starts by itself when a client starts a wrapped server: restart the client after "
    "`bouncerctl init`, or start it now with `bouncerctl restart`. `bouncerctl doctor` checks the setup."
)


class DaemonNotRunning(click.ClickException):
    """The reason, then what to do next, on stderr; exit 3: the daemon is absent or unreachable."""

    exit_code = EXIT_NOT_RUNNING

    def show(self, file: IO[Any] | None = None) -> None:
        term.say(self.format_message(), err=True)


class RequestFailed(click.ClickException):
    """``Error: MESSAGE`` on stderr as click writes it, each line fitted to the terminal; exit 1."""

    exit_code = EXIT_REQUEST_FAILED

    def show(self, file: IO[Any] | None = None) -> None:
        term.say(f"Error: {self.format_message()}", err=True)


def connect() -> Client:
    """A ctl connection to the daemon of the current environment; DaemonNotRunning if there is none
    (or if one runs but cannot be reached: `unreachable_but_running` says which)."""
    paths = resolve(os.environ)
    try:
        return Client.connect(paths, role="ctl")
    except DaemonUnavailableError as exc:
        raise DaemonNotRunning(unreachable_but_running(paths) or f"{exc}\n{NOT_RUNNING_NEXT}") from None
    except DaemonRequestError as exc:  # e.g. a daemon of another protocol version
        raise RequestFailed(f"bouncerd refused the connection: {exc.message}") from None


def unreachable_but_running(paths: Any) -> str | None:
    """When no daemon answers on the socket: if one still holds the instance lock, say so (its socket
    file was removed or replaced, or it is not answering), else None (it is not running)."""
    from bouncerd.lockholder import lock_holder
    from bouncerd.paths import check_private_dir

    try:
        check_private_dir(paths.runtime)  # a directory we would refuse to connect through tells nothing
    except (BouncerError, OSError):
        return None
    pid = lock_holder(paths.pidfile)
    if pid is None:
        return None
    who = f"pid {pid}" if pid else "its pid unknown"
    return (
        f"bouncerd is running ({who}) but does not answer on {paths.socket}: its socket file was removed "
        f"or replaced, or it is not answering. A running bouncerd binds a deleted socket again within "
        f"seconds; if it does not, `bouncerctl restart` (or kill {pid or 'it'}) lets a new one start"
    )


def request(op: str, **fields: Any) -> dict[str, Any]:
    """One request on a fresh connection; the reply, or a ClickException with the right exit code."""
    with connect() as client:
        try:
            return client.request(op, **fields)
        except DaemonUnavailableError as exc:
            raise DaemonNotRunning(str(exc)) from None
        except DaemonRequestError as exc:
            raise RequestFailed(f"bouncerd refused {op}: {exc.message}") from None


def local_clock(ts: float, *, now: float | None = None) -> str:
    """A moment as the person's wall clock, with its zone: ``14:03:07 CET``, or with the date in front
    when it is not today (``2026-07-28 14:03:07 CET``). Every time bouncerctl prints goes through here,
    so ``approve``, ``pins`` and ``status`` never mix UTC and local time."""
    import datetime as dt
    import time

    moment = dt.datetime.fromtimestamp(ts).astimezone()
    today = dt.datetime.fromtimestamp(time.time() if now is None else now).astimezone().date()
    shown = (
        moment.strftime("%H:%M:%S %Z") if moment.date() == today else moment.strftime("%Y-%m-%d %H:%M:%S %Z")
    )
    return shown
