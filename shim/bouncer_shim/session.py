"""Which session a shim belongs to, and the hello that tells bouncerd.

Theory of operation
-------------------
A session is one MCP client process: every shim that client launched shares taint, budgets and
approvals. The shim's parent is the client, so the key is the parent's pid *and* its start time
(pids are reused; a start time makes the pair unique for the life of the machine):
``proc:<ppid>:<start>``. ``BOUNCER_SESSION`` overrides it, for clients that launch servers through a
wrapper shell (then the parent is the shell, not the client).

- Linux: field 22 of ``/proc/<ppid>/stat`` (start time in clock ticks since boot). The second field
  is the command name in parentheses and may itself contain spaces and ``)``, so the line is split
  after the *last* ``)``.
- macOS: ``ps -o lstart= -p <ppid>`` (a date to the second; the kernel keeps the microseconds, but ps
  is the portable way to ask and seconds are enough to tell a reused pid apart).
- Anywhere else, or if the parent vanished already: the start time is ``unknown``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

from bouncerd import wire

SESSION_VARIABLE: Final = "BOUNCER_SESSION"
UNKNOWN_START: Final = "unknown"

# `ps` answers in milliseconds; a second bounds a hung process table without stalling start-up much.
PS_TIMEOUT_SECONDS: Final = 1.0

# Fields of /proc/<pid>/stat counted from the one after the command name (field 3 is index 0).
_STAT_START_TIME_INDEX: Final = 22 - 3


def session_key(environ: Mapping[str, str], ppid: int, platform: str = sys.platform) -> str:
    override = environ.get(SESSION_VARIABLE)
    if override:
        return override
    return f"proc:{ppid}:{start_time(ppid, platform) or UNKNOWN_START}"


def start_time(pid: int, platform: str = sys.platform) -> str | None:
    if platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                return parse_proc_stat(f.read())
        except OSError:
            return None
    if platform == "darwin":
        import subprocess  # only on macOS: elsewhere the shim need not pay for importing it

        try:
            done = subprocess.run(  # noqa: S603 - fixed argv, no shell
                ["/bin/ps", "-o", "lstart=", "-p", str(pid)],
                capture_output=True,
                timeout=PS_TIMEOUT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        text = " ".join(done.stdout.decode("utf-8", "replace").split())
        return text or None
    return None


def parse_proc_stat(data: bytes) -> str | None:
    """The start time (field 22) from the contents of /proc/<pid>/stat, or None if malformed."""
    close = data.rfind(b")")
    if close < 0:
        return None
    fields = data[close + 1 :].split()
    if len(fields) <= _STAT_START_TIME_INDEX:
        return None
    value = fields[_STAT_START_TIME_INDEX]
    return value.decode("ascii") if value.isdigit() else None


def _clean(text: str) -> str:
    """A command-line string as valid UTF-8 (argv may hold undecodable bytes; msgpack would refuse them)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def hello_fields(
    *,
    environ: Mapping[str, str],
    server: str,
    upstream: Sequence[str],
    policy_path: str | None,
) -> dict[str, Any]:
    """What the shim says in hello (see bouncerd.wire.OPS["hello"])."""
    ppid = os.getppid()
    return {
        "version": wire.PROTOCOL_VERSION,
        "role": "shim",
        "session": _clean(session_key(environ, ppid)),
        "server": _clean(server),
        "upstream": [_clean(arg) for arg in upstream],
        "policy_path": _clean(policy_path) if policy_path is not None else None,
        "instance": os.urandom(8).hex(),
        "pid": os.getpid(),
        "client_pid": ppid,
    }
