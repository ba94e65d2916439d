"""Which session a client hook speaks for: the session keys of its ancestors, up to the client.

Theory of operation
-------------------
A shim's session key is its parent's, the MCP client: ``proc:<pid>:<start time>``
(`bouncer_shim.session`). A hook is started by the same client, but through a shell (``sh -c``), and
perhaps through wrappers (``env``, ``timeout``, ``uv run``). So the hook walks up from its parent and
collects the key of each ancestor, nearest first, up to and including the first one that is neither a
shell nor a wrapper: the client. The daemon takes the first of these keys that is a known session, or
else the last (`bouncerd/server/hooks.py` says why the walk stops at the client). Node is not a
wrapper: Claude Code itself is a node process.

``BOUNCER_SESSION`` overrides the walk, exactly as it overrides the shim's key.

- Linux: ``/proc/<pid>/stat`` gives the command name (field 2, in parentheses, may hold spaces and
  ``)``), the parent pid (field 4) and the start time (field 22, read by the shim's own parser, so the
  two keys agree by construction).
- macOS: one ``ps -A -o pid=,ppid=,comm=`` for the tree; start times come from the shim's
  `start_time` (``ps -o lstart=``), for the same reason.
- Elsewhere: only the parent is known (its start time ``unknown``, as the shim would say).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from bouncer_shim.session import SESSION_VARIABLE, UNKNOWN_START, parse_proc_stat, start_time

# Ancestors examined at most. A client runs its hooks through one shell and perhaps a wrapper or two;
# the daemon looks at no more than this many keys either (bouncerd.server.hooks.MAX_CANDIDATES).
MAX_ANCESTORS: Final = 8

# Programs that sit between a client and its hook without being the client. Names as the kernel
# reports them (Linux truncates to 15 characters), without a login shell's leading "-".
WRAPPERS: Final = frozenset(
    {
        "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "tcsh", "csh", "busybox",
        "env", "timeout", "nice", "nohup", "time", "stdbuf", "setsid", "flock", "ionice", "chrt",
        "taskset", "xargs", "uv", "uvx", "pipx", "sudo", "doas",
    }
)  # fmt: skip

# `ps` answers in milliseconds; a second bounds a hung process table.
PS_TIMEOUT_SECONDS: Final = 1.0


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    name: str  # basename of the command, "-" of a login shell removed


@dataclass(frozen=True)
class HookSession:
    session: str  # BOUNCER_SESSION, or the key of the nearest ancestor that is not a wrapper
    candidates: list[str]  # ancestor keys, nearest first, ending with `session` (empty with an override)
    client_pid: int | None  # the pid of that ancestor


def _name(command: str) -> str:
    return command.rsplit("/", 1)[-1].lstrip("-")


def parse_stat(data: bytes) -> Process | None:
    """pid, parent pid and name from the contents of /proc/<pid>/stat, or None if malformed."""
    open_, close = data.find(b"("), data.rfind(b")")
    if open_ < 0 or close < open_:
        return None
    fields = data[close + 1 :].split()
    try:
        pid, ppid = int(data[:open_]), int(fields[1])
    except (ValueError, IndexError):
        return None
    return Process(pid, ppid, _name(data[open_ + 1 : close].decode("utf-8", "replace")))


def _linux(pid: int) -> tuple[Process, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    proc = parse_stat(data)
    return None if proc is None else (proc, parse_proc_stat(data) or UNKNOWN_START)


def parse_ps_table(text: str) -> dict[int, Process]:
    """`ps -A -o pid=,ppid=,comm=` output as pid -> Process (lines that do not parse are skipped)."""
    table: dict[int, Process] = {}
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            table[int(parts[0])] = Process(int(parts[0]), int(parts[1]), _name(parts[2].strip()))
    return table


def _ps_table() -> dict[int, Process]:
    import subprocess  # only on macOS

    try:
        done = subprocess.run(
            ["/bin/ps", "-A", "-o", "pid=,ppid=,comm="],
            capture_output=True,
            timeout=PS_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_ps_table(done.stdout.decode("utf-8", "replace"))


def ancestors(start: int, platform: str = sys.platform) -> list[tuple[Process, str]]:
    """(process, start time) from `start` upwards, nearest first, up to the first non-wrapper."""
    found: list[tuple[Process, str]] = []
    table = _ps_table() if platform == "darwin" else {}
    pid = start
    while pid > 1 and len(found) < MAX_ANCESTORS:
        if platform.startswith("linux"):
            got = _linux(pid)
        elif pid in table:
            got = (table[pid], start_time(pid, platform) or UNKNOWN_START)
        else:
            got = None
        if got is None:
            break
        found.append(got)
        if got[0].name not in WRAPPERS:
            break
        pid = got[0].ppid
    return found


def hook_session(environ: Mapping[str, str], platform: str = sys.platform) -> HookSession:
    override = environ.get(SESSION_VARIABLE)
    if override:
        return HookSession(override, [], None)
    ppid = os.getppid()
    chain = ancestors(ppid, platform)
    if not chain:  # an unknown platform, or the parent is gone: what the shim would say
        key = f"proc:{ppid}:{start_time(ppid, platform) or UNKNOWN_START}"
        return HookSession(key, [key], ppid)
    keys = [f"proc:{proc.pid}:{start}" for proc, start in chain]
    return HookSession(keys[-1], keys, chain[-1][0].pid)
