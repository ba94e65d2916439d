"""``bouncerctl stop``, ``restart`` and ``logs``: the daemon by hand, for whoever runs it without a
service manager.

Theory of operation
-------------------
- ``stop`` finds the daemon by asking it (its ``hello`` reply carries its pid), else by its pid file if
  that names a live ``bouncerd`` process of this user, and sends SIGTERM: the daemon compacts its
  journal and syncs its audit log before it exits, so nothing is lost. It waits up to
  `STOP_WAIT_SECONDS`. Running shims start a new daemon when they next need one (autostart), and a
  systemd socket starts one at the next connection; ``stop`` says so.
- ``restart`` stops the daemon if one runs, clears the autostart backoff (a person restarting after
  fixing policy.yaml wants a start now, not in a minute) and starts one through `bouncerd.autostart`,
  the path shims and hooks use, waiting until it answers. The new pid is printed; if a shim's
  autostart won the race, that daemon is the one reported.
- ``logs [-n N] [-f]`` prints the end of the daemon's log (``paths.daemon_log``, where an autostarted
  or detached daemon writes) and, with ``-f``, follows it. A daemon run by systemd logs to the journal.

Exit codes as everywhere in bouncerctl: 3 when there is no daemon to stop (or no log), 1 on failure.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import click

from bouncerctl.common import DaemonNotRunning, RequestFailed
from bouncerd import autostart
from bouncerd.client import Client
from bouncerd.errors import BouncerError
from bouncerd.paths import Paths, resolve

# A daemon stops in well under a second (journal compaction, fsyncs); ten covers a large journal on
# a slow disk. After that the command says the daemon did not stop and leaves it be.
STOP_WAIT_SECONDS = 10.0
STOP_POLL_SECONDS = 0.05
# A live daemon answers a ping in microseconds.
PROBE_TIMEOUT_SECONDS = 1.0
# Lines `logs` prints before following; enough for a start-up and its failure.
DEFAULT_LOG_LINES = 40
FOLLOW_POLL_SECONDS = 0.25
SYSTEMD_JOURNAL_HINT = "journalctl --user -u bouncerd.service"


def answering_pid(paths: Paths) -> int | None:
    """The pid the daemon on the socket gives for itself, or None if none answers."""
    try:
        with Client.connect(paths, timeout=PROBE_TIMEOUT_SECONDS) as client:
            client.request("ping")
            pid = client.hello_reply.get("daemon_pid")
    except BouncerError:
        return None
    return pid if isinstance(pid, int) and pid > 1 else None


def pidfile_daemon(paths: Paths) -> int | None:
    """The pid in the pid file if it is a live bouncerd of this user (a hung daemon still has one)."""
    try:
        text = paths.pidfile.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    if not text.isdigit() or int(text) <= 1:
        return None
    pid = int(text)
    return pid if is_our_bouncerd(pid) else None


def is_our_bouncerd(pid: int) -> bool:
    """Whether `pid` runs bouncerd as this user: never signal a process the pid file no longer names."""
    proc = Path(f"/proc/{pid}")
    if proc.is_dir():
        try:
            if proc.stat().st_uid != os.getuid():
                return False
            return b"bouncerd" in (proc / "cmdline").read_bytes() and alive(pid)
        except OSError:
            return False
    return alive(pid)  # no /proc (macOS): the pid file is all there is


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # someone else's: not a daemon of ours
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[:1] not in ([b"Z"], [b"X"])
    except OSError:
        return True


def stop_daemon(paths: Paths) -> int:
    """SIGTERM the daemon and wait until it is gone; its pid. DaemonNotRunning / RequestFailed."""
    pid = answering_pid(paths) or pidfile_daemon(paths)
    if pid is None:
        raise DaemonNotRunning(f"bouncerd is not running (nothing answers on {paths.socket})")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return pid
    except PermissionError:
        raise RequestFailed(f"cannot stop bouncerd (pid {pid}): permission denied") from None
    deadline = time.monotonic() + STOP_WAIT_SECONDS
    while alive(pid):
        if time.monotonic() > deadline:
            raise RequestFailed(
                f"bouncerd (pid {pid}) did not stop within {STOP_WAIT_SECONDS:g} s; see {paths.daemon_log}"
            )
        time.sleep(STOP_POLL_SECONDS)
    return pid


def _autostart_note(environ: Mapping[str, str]) -> str:
    if not autostart.autostart_enabled(environ):
        return ""
    return (
        "running shims start it again when they next need it (BOUNCER_NO_AUTOSTART=1 in their env stops that)"
    )


@click.command()
def stop() -> None:
    """Stop the running bouncerd (SIGTERM: it saves its journal and audit log first)."""
    paths = resolve(os.environ)
    pid = stop_daemon(paths)
    click.echo(f"stopped bouncerd (pid {pid})")
    note = _autostart_note(os.environ)
    if note:
        click.echo(f"note: {note}")


@click.command()
def restart() -> None:
    """Stop bouncerd if it runs and start it again, now (the autostart backoff is cleared)."""
    environ = {k: v for k, v in os.environ.items() if k != autostart.AUTOSTART_VARIABLE}
    paths = resolve(environ)
    try:
        old = stop_daemon(paths)
    except DaemonNotRunning:
        old = None
    autostart.mark_healthy(paths)  # a person asked: start now, whatever the backoff says
    outcome = autostart.ensure_running(paths, environ)
    if outcome.kind not in (autostart.STARTED, autostart.RUNNING):
        raise RequestFailed(f"bouncerd did not start: {outcome.message}")
    pid = answering_pid(paths)
    was = f" (was pid {old})" if old is not None else ""
    click.echo(f"bouncerd is running: pid {pid}{was}; log: {paths.daemon_log}")


@click.command()
@click.option(
    "-n",
    "--lines",
    "count",
    type=click.IntRange(min=0),
    default=DEFAULT_LOG_LINES,
    show_default=True,
    help="Lines to print from the end.",
)
@click.option("-f", "--follow", is_flag=True, help="Keep printing lines as the daemon writes them.")
def logs(count: int, follow: bool) -> None:
    """Print the end of the daemon's log; -f follows it as it grows."""  # fmt: skip
    from itertools import islice

    from bouncerctl.audit_select import lines_backwards  # the audit tail's readers, for any text file
    from bouncerctl.tail import Follower

    path = resolve(os.environ).daemon_log
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise DaemonNotRunning(
            f"no daemon log at {path} (a daemon run by systemd logs to its journal: {SYSTEMD_JOURNAL_HINT})"
        ) from None
    except OSError as exc:
        raise RequestFailed(f"cannot read {path}: {exc.strerror or exc}") from None
    out = sys.stdout
    # Followed from the end as it is now, taken before a line is printed: a line the daemon writes
    # while the last ones are shown (or just after, once the reader has seen them) is printed once.
    end = fh.seek(0, os.SEEK_END)
    for line in reversed(list(islice(lines_backwards(fh, end), count))):
        out.write(line.decode("utf-8", "replace"))
    fh.seek(end)
    out.flush()
    if not follow:
        fh.close()
        return
    follower = Follower(path, fh)
    try:
        while True:
            for line in follower.poll():
                out.write(line.decode("utf-8", "replace"))
            out.flush()
            time.sleep(FOLLOW_POLL_SECONDS)
    except KeyboardInterrupt:
        pass
    finally:
        follower.close()
