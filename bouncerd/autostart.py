"""Starting bouncerd on demand: the one code path the shim and the hooks share.

Theory of operation
-------------------
A client that finds no daemon calls `start_daemon`. It decides, under a start lock (an exclusive
flock on ``bouncerd.start.lock`` in the runtime directory, never waited for), whether to start one:

1. The lock is held by someone else: another shim or hook is deciding or starting right now. Answer
   `STARTING`; the caller polls the socket.
2. The socket accepts a connection: a daemon serves. `RUNNING`.
3. The start record (``bouncerd.starts`` in the runtime directory: consecutive unhealthy starts, when
   the last one was made, its pid) names a daemon started less than `STARTING_GRACE_SECONDS` ago whose
   process is alive: it is still coming up. `STARTING`.
4. The last start is too recent for the backoff: `WAITING`, with how long and, once a daemon has
   failed `GIVE_UP_AFTER_STARTS` starts in a row, why (the last line of its log, and where the log is).
5. Otherwise ``python -m bouncerd --foreground`` is started in its own session (stdin /dev/null,
   output appended to the daemon log, cwd /), the record is written with one more start, and the
   answer is `STARTED`.

The backoff between starts is `FIRST_RESTART_DELAY_SECONDS` doubling per unhealthy start up to
`MAX_RESTART_DELAY_SECONDS`; after `GIVE_UP_AFTER_STARTS` it is `GIVE_UP_DELAY_SECONDS`. A daemon that
has served `HEALTHY_AFTER_SECONDS` removes the record (`mark_healthy`, called by the daemon), so the
next crash is restarted at once. The daemon's own instance lock stays the last word: two daemons never
serve one socket, whoever started them.

The record uses wall-clock time (it is shared between processes and may outlive a reboot in
/tmp/bouncer-UID); a record from the future is treated as stale. It is written atomically.

Cheap to import: the shim imports this on every start; `subprocess` is imported only to start one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from bouncerd.atomicfile import write_atomically
from bouncerd.errors import BouncerError
from bouncerd.paths import Paths, ensure_private_dir

if TYPE_CHECKING:
    import subprocess

AUTOSTART_VARIABLE: Final = "BOUNCER_NO_AUTOSTART"
START_LOCK_NAME: Final = "bouncerd.start.lock"
STARTS_NAME: Final = "bouncerd.starts"

# The first restart after a crash waits this long after the previous start: enough that a daemon
# which dies at once is not restarted in the same breath, short against a client's patience.
FIRST_RESTART_DELAY_SECONDS: Final = 0.2
# The backoff doubles to this ceiling: a refusal window after repeated crashes stays a few seconds.
MAX_RESTART_DELAY_SECONDS: Final = 3.0
# A daemon that served this long was a healthy start: it clears the record, the next crash restarts
# at once. Longer than a cold start (about a second) so a daemon that dies on its first verdicts
# still counts as unhealthy.
HEALTHY_AFTER_SECONDS: Final = 5.0
# Starts in a row that did not become healthy before the daemon is taken to be broken (a bad
# policy.yaml, an unsafe directory): with the backoff above that is about six seconds of trying.
GIVE_UP_AFTER_STARTS: Final = 6
# Then one start a minute, so a fixed policy is picked up without restarting every client, and a
# broken one costs one interpreter start a minute, not one per shim per second.
GIVE_UP_DELAY_SECONDS: Final = 60.0
# A daemon started this recently whose process lives is still coming up (imports, journal replay);
# after that a live pid is not trusted (it may have been reused) and the instance lock decides.
STARTING_GRACE_SECONDS: Final = 10.0
# A cold bouncerd (interpreter, imports, journal replay) listens within a second on a loaded machine;
# five bound the wait for one just started, during which a caller holds its request, not refuses it.
AUTOSTART_WAIT_SECONDS: Final = 5.0
AUTOSTART_POLL_SECONDS: Final = 0.05
# A serving daemon answers a ping in microseconds; one still loading holds the hello until it serves.
PING_TIMEOUT_SECONDS: Final = 1.0
EXIT_ALREADY_RUNNING: Final = 4  # bouncerd.server.run.EXIT_ALREADY_RUNNING (not imported: anyio)
# The record is a few numbers; anything longer is not ours.
MAX_RECORD_BYTES: Final = 256

RUNNING: Final = "running"
STARTED: Final = "started"
STARTING: Final = "starting"
WAITING: Final = "waiting"
FAILED: Final = "failed"
DISABLED: Final = "disabled"


class StartOutcome:
    __slots__ = ("broken", "kind", "message", "pid", "process", "retry_after")

    def __init__(
        self,
        kind: str,
        message: str = "",
        *,
        pid: int | None = None,
        retry_after: float = 0.0,
        process: subprocess.Popen[bytes] | None = None,
        broken: bool = False,
    ) -> None:
        self.broken = broken  # WAITING because the daemon failed GIVE_UP_AFTER_STARTS starts in a row
        self.kind = kind
        self.message = message  # for a person: why not, or what was started
        self.pid = pid
        self.retry_after = retry_after  # WAITING: seconds until a start is allowed
        self.process = process  # STARTED: the child, for the caller to reap

    def __repr__(self) -> str:
        return f"StartOutcome({self.kind!r}, {self.message!r}, pid={self.pid})"


def autostart_enabled(environ: Mapping[str, str]) -> bool:
    return environ.get(AUTOSTART_VARIABLE, "") not in ("1", "true", "yes")


def restart_delay(unhealthy_starts: int) -> float:
    """The least time between the last start and the next, after that many unhealthy starts."""
    if unhealthy_starts <= 0:
        return 0.0
    if unhealthy_starts >= GIVE_UP_AFTER_STARTS:
        return GIVE_UP_DELAY_SECONDS
    return min(FIRST_RESTART_DELAY_SECONDS * 2.0 ** (unhealthy_starts - 1), MAX_RESTART_DELAY_SECONDS)


def start_daemon(paths: Paths, environ: Mapping[str, str], *, now: float) -> StartOutcome:
    """Start bouncerd for `paths` if none runs and the backoff allows; `now` is wall-clock time."""
    if not autostart_enabled(environ):
        return StartOutcome(DISABLED, f"not starting bouncerd: {AUTOSTART_VARIABLE}=1")
    try:
        ensure_private_dir(paths.runtime)
        ensure_private_dir(paths.state)
        fd = os.open(
            paths.runtime / START_LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
        )
    except (BouncerError, OSError) as exc:
        return StartOutcome(FAILED, f"cannot start bouncerd: {exc}")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return StartOutcome(STARTING, "another process is starting bouncerd")
        return _decide(paths, environ, now)
    finally:
        os.close(fd)  # releases the lock


def _decide(paths: Paths, environ: Mapping[str, str], now: float) -> StartOutcome:
    if socket_accepts(paths):
        return StartOutcome(RUNNING)
    starts, last, pid = read_record(paths)
    since = now - last if now >= last else float("inf")  # a record from the future is stale
    if pid is not None and since < STARTING_GRACE_SECONDS and _alive(pid):
        return StartOutcome(STARTING, f"bouncerd (pid {pid}) is starting", pid=pid)
    wait = restart_delay(starts) - since
    if wait > 0:
        if starts >= GIVE_UP_AFTER_STARTS:
            message = (
                f"bouncerd failed {starts} starts in a row, so it is started only once a minute "
                f"(next in {wait:.0f} s)"
            )
        else:
            message = f"bouncerd, started {since:.1f} s ago, is not running; next start in {wait:.1f} s"
        message += f"; its log says why: {paths.daemon_log}"
        last_line = _last_log_line(paths)
        if last_line:
            message += f" (last line: {last_line})"
        return StartOutcome(WAITING, message, retry_after=wait, broken=starts >= GIVE_UP_AFTER_STARTS)
    return _spawn(paths, environ, starts, now)


def spawn_daemon(paths: Paths, environ: Mapping[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """Start `bouncerd --foreground` detached from its starter: a session of its own (a closing client
    or terminal does not take it down), stdin from /dev/null, stdout and stderr appended to the daemon
    log (0600), working directory `/` (a daemon outlives its starter and must not pin the starter's
    directory). Returns the child and the log's size before it started, where the child's own lines
    begin. OSError if the log cannot be opened or the program cannot be started."""
    import subprocess  # only here: it costs start-up time, and most callers find a daemon running

    log_fd = os.open(paths.daemon_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        offset = os.fstat(log_fd).st_size
        child = subprocess.Popen(
            [sys.executable, "-m", "bouncerd", "--foreground"],
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            start_new_session=True,
            env=dict(environ),
            cwd="/",
        )
    finally:
        os.close(log_fd)
    return child, offset


def _spawn(paths: Paths, environ: Mapping[str, str], starts: int, now: float) -> StartOutcome:
    try:
        child, _ = spawn_daemon(paths, environ)
    except OSError as exc:
        return StartOutcome(FAILED, f"cannot start bouncerd: {exc}")
    with contextlib.suppress(OSError):
        write_record(paths, starts + 1, now, child.pid)
    return StartOutcome(
        STARTED, f"started bouncerd (pid {child.pid}; log: {paths.daemon_log})", pid=child.pid, process=child
    )


def ensure_running(paths: Paths, environ: Mapping[str, str]) -> StartOutcome:
    """For one-shot callers (the hooks): start a daemon if needed and wait, up to
    `AUTOSTART_WAIT_SECONDS`, until it answers a ping (a daemon binds its socket before it loads the
    policy, so a socket that accepts is not yet one that serves). RUNNING or STARTED once it does;
    otherwise the last outcome (WAITING, FAILED, DISABLED, or FAILED for one that never answered)."""
    import time

    deadline = time.monotonic() + AUTOSTART_WAIT_SECONDS
    outcome = start_daemon(paths, environ, now=time.time())
    started = outcome if outcome.kind == STARTED else None
    while outcome.kind in (STARTED, STARTING):
        if _answers_ping(paths):
            return started or StartOutcome(RUNNING)
        if time.monotonic() >= deadline:
            break
        time.sleep(AUTOSTART_POLL_SECONDS)
        if started is not None and started.process is not None:
            code = started.process.poll()
            if code == EXIT_ALREADY_RUNNING:  # another daemon holds the lock: it is about to serve
                started, outcome = None, StartOutcome(STARTING)
            elif code is not None:  # ours exited: one start per call, the backoff paces the next
                return StartOutcome(FAILED, _exited(paths, code))
        elif outcome.kind == STARTING:  # someone else's start: take over if it is over
            outcome = start_daemon(paths, environ, now=time.time())
            if outcome.kind == STARTED:
                started = outcome
            elif outcome.kind == RUNNING:
                return outcome
    if outcome.kind in (STARTED, STARTING):
        return StartOutcome(FAILED, f"bouncerd did not answer at {paths.socket} (see {paths.daemon_log})")
    return outcome


def _exited(paths: Paths, code: int) -> str:
    message = f"bouncerd exited with status {code} as it started; its log says why: {paths.daemon_log}"
    last_line = _last_log_line(paths)
    return f"{message} (last line: {last_line})" if last_line else message


def _answers_ping(paths: Paths) -> bool:
    from bouncerd.client import Client  # the wire codec: not for the shim's start-up

    try:
        with Client.connect(paths, role="ctl", timeout=PING_TIMEOUT_SECONDS) as client:
            client.request("ping")
    except BouncerError:
        return False
    return True


def socket_accepts(paths: Paths) -> bool:
    """Whether a daemon listens on the socket (a connect succeeds; nothing is sent)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.connect(str(paths.socket))
    except OSError:
        return False  # absent, refused, or a backlog so full that the daemon is not keeping up
    finally:
        sock.close()
    return True


def _alive(pid: int) -> bool:
    """Whether `pid` runs. A zombie does not (its starter may not have reaped it yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone's process: not ours to judge, so not a reason to start another
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[:1] not in ([b"Z"], [b"X"])
    except OSError:
        return True  # no /proc (macOS): kill(0) is all there is


# ---- the start record -------------------------------------------------------------------------------


def read_record(paths: Paths) -> tuple[int, float, int | None]:
    """(unhealthy starts in a row, wall time of the last start, its pid); (0, 0.0, None) if none or
    unreadable (a record we cannot read never blocks a start)."""
    try:
        fd = os.open(paths.runtime / STARTS_NAME, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return 0, 0.0, None
    try:
        data = os.read(fd, MAX_RECORD_BYTES + 1)
    except OSError:
        return 0, 0.0, None
    finally:
        os.close(fd)
    parts = data.decode("ascii", "replace").split()
    try:
        starts, last, pid = int(parts[0]), float(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        return 0, 0.0, None
    if len(data) > MAX_RECORD_BYTES or starts < 0 or pid <= 0 or last != last:  # last != last: NaN
        return 0, 0.0, None
    return starts, last, pid


def write_record(paths: Paths, starts: int, now: float, pid: int) -> None:
    write_atomically(paths.runtime / STARTS_NAME, f"{starts} {now:.6f} {pid}\n".encode("ascii"))


def mark_healthy(paths: Paths) -> None:
    """The daemon has served long enough: the next crash is restarted at once."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths.runtime / STARTS_NAME)


def _last_log_line(paths: Paths) -> str:
    """The last non-empty line of the daemon log (its reason for exiting), at most 300 characters."""
    try:
        with open(paths.daemon_log, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4096))
            lines = [line.strip() for line in fh.read().decode("utf-8", "replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    return lines[-1][:300] if lines else ""
