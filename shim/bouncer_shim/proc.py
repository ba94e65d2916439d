"""The upstream server as a child process: start it, signal it, read its exit status.

Theory of operation
-------------------
The upstream is the first thing the shim starts, so this module imports nothing but `os`, `sys` and
`signal`: every millisecond before the spawn adds to the client's start-up, every millisecond after
it overlaps with the server's own. It uses ``os.posix_spawnp`` rather than `subprocess` (which costs
more to import than the shim spends before the spawn).

The upstream runs with the shim's own environment (as the client passed it: not the LC_CTYPE the
interpreter adds under the C locale), working directory and stderr (its diagnostics reach the
client's log unchanged); only stdin and stdout are pipes to the shim. Signal dispositions
the interpreter changed (Python ignores SIGPIPE) are reset to the defaults. It stays in the shim's
process group, so a client that kills the group it started (the MCP SDK does) reaches it too. On Linux
the stdout pipe is enlarged so a large result arrives in few reads.

Shutting it down is bounded, in the order the MCP stdio transport prescribes: close its stdin, give
it UPSTREAM_EXIT_GRACE_SECONDS, SIGTERM, give it UPSTREAM_TERM_GRACE_SECONDS, SIGKILL. The pump owns
the clock; this module performs each step. An exit status is reported shell-style: the exit code, or
128 + N for a death by signal N.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs milliseconds at import; the spawn must not wait for it
    from collections.abc import Mapping, Sequence

# The MCP SDK's client waits 2 s after closing the shim's stdin before it signals the shim, then 2 s
# more before SIGKILL. The shim's own escalation fits inside that: 1 s for the upstream to exit on
# stdin close, 1 s after SIGTERM, then SIGKILL, so the upstream is never left behind.
UPSTREAM_EXIT_GRACE_SECONDS = 1.0
UPSTREAM_TERM_GRACE_SECONDS = 1.0

# The upstream's stdout pipe (and the shim's own stdout, when the client gave it a pipe) is enlarged to
# this on Linux (the unprivileged maximum by default), so a 10 MB result moves in ten reads and writes
# instead of 160; where it cannot be, the default pipe is fine.
PIPE_BYTES = 1024 * 1024

# Shell conventions for a command that could not be started.
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126

# Dispositions to reset in the child: the interpreter ignores these, a server expects the defaults.
_RESET_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ") if hasattr(signal, name)
)


class SpawnError(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Upstream:
    stdin_fd: int | None  # None once closed
    stdout_fd: int | None

    def __init__(self, argv: Sequence[str]) -> None:
        child_in, self.stdin_fd = os.pipe()  # both ends close-on-exec (PEP 446); dup2 clears it
        self.stdout_fd, child_out = os.pipe()
        try:
            self.pid = os.posix_spawnp(
                argv[0],
                list(argv),
                inherited_environment(),
                file_actions=[(os.POSIX_SPAWN_DUP2, child_in, 0), (os.POSIX_SPAWN_DUP2, child_out, 1)],
                setsigdef=_RESET_SIGNALS,
            )
        except OSError as exc:
            for fd in (child_in, child_out, self.stdin_fd, self.stdout_fd):
                os.close(fd)
            status = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
            raise SpawnError(f"cannot start {argv[0]!r}: {exc.strerror or exc}", status) from None
        os.close(child_in)
        os.close(child_out)
        os.set_blocking(self.stdin_fd, False)
        os.set_blocking(self.stdout_fd, False)
        enlarge_pipe(self.stdout_fd)
        self.status: int | None = None

    def poll(self) -> int | None:
        """The exit status if the upstream has exited (reaping it), else None."""
        if self.status is None:
            try:
                pid, wait_status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: the status is lost, report a failure
                self.status = 1
            else:
                if pid:
                    self.status = exit_status(os.waitstatus_to_exitcode(wait_status))
        return self.status

    def close_stdin(self) -> None:
        if self.stdin_fd is not None:
            os.close(self.stdin_fd)
            self.stdin_fd = None

    def close_stdout(self) -> None:
        if self.stdout_fd is not None:
            os.close(self.stdout_fd)
            self.stdout_fd = None

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self.poll() is None:  # never signal a pid we have reaped: it may be someone else's now
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)


# What Python's C-locale coercion (PEP 538) writes into its own environment when it starts under the C
# locale: the upstream must not see a variable the client never set.
_COERCED_LOCALES = ("C.UTF-8", "C.utf8", "UTF-8")


def inherited_environment() -> Mapping[bytes, bytes] | Mapping[str, str]:
    """The environment the shim was started with, as the client passed it.

    On Linux that is exactly /proc/self/environ (the block given to exec, untouched by the interpreter).
    Elsewhere it is os.environ without the LC_CTYPE that locale coercion adds when the locale was C.
    """
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/environ", "rb") as f:
                block = f.read()
        except OSError:
            pass
        else:
            pairs = (entry.partition(b"=") for entry in block.split(b"\0") if entry)
            return {key: value for key, eq, value in pairs if eq and key}
    environ = dict(os.environ)
    locale_unset = environ.get("LANG", "C") in ("", "C", "POSIX") and not environ.get("LC_ALL")
    if locale_unset and environ.get("LC_CTYPE") in _COERCED_LOCALES:
        del environ["LC_CTYPE"]
    return environ


def exit_status(returncode: int) -> int:
    """A returncode (negative for a signal, as subprocess reports it) as a shell exit status."""
    return 128 - returncode if returncode < 0 else returncode


def enlarge_pipe(fd: int) -> None:
    if sys.platform.startswith("linux"):
        import fcntl

        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
