"""``bouncerd``: start the per-user daemon, detached (default) or in the foreground.

Theory of operation
-------------------
``bouncerd --foreground`` runs the daemon in this process (`bouncerd.server.run.run_foreground`);
services and tests use it. Its log goes to stderr.

Plain ``bouncerd`` detaches: it re-executes itself with ``--foreground`` in a new session (so a
closing terminal or client does not take the daemon down), with stdin from /dev/null and stdout and
stderr appended to ``paths.daemon_log``, and working directory ``/``. It then waits until the socket
answers a ``ping`` and exits 0, or, if the daemon exits or does not answer within
`DETACH_WAIT_SECONDS`, exits non-zero with the reason (the tail of the daemon's log). If a daemon
is already answering, it says so and exits `EXIT_ALREADY_RUNNING` without starting another.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bouncerd import __version__
from bouncerd.autostart import spawn_daemon
from bouncerd.client import Client
from bouncerd.errors import BouncerError
from bouncerd.paths import Paths, ensure_private_dir, resolve

# How long a detaching start waits for the new daemon's socket to answer. Start-up is import time plus
# journal replay (bounded by compaction to well under a second); ten seconds also covers a slow disk.
DETACH_WAIT_SECONDS = 10.0

# Pause between probes of the socket while waiting; short enough that callers (the shim) barely wait.
PROBE_INTERVAL_SECONDS = 0.02

# Probe timeout: a live daemon answers a ping in microseconds.
PROBE_TIMEOUT_SECONDS = 1.0

# Lines of the daemon's log shown when a detached start fails.
LOG_TAIL_LINES = 5

EXIT_ALREADY_RUNNING = 4  # the same value as bouncerd.server.run.EXIT_ALREADY_RUNNING
EXIT_FAILED = 1


def _say(message: str) -> None:
    sys.stderr.write(f"bouncerd: {message}\n")
    sys.stderr.flush()


def _probe(paths: Paths) -> int | None:
    """The pid of the daemon answering on the socket, or None."""
    try:
        with Client.connect(paths, timeout=PROBE_TIMEOUT_SECONDS) as client:
            client.request("ping")
            pid = client.hello_reply.get("daemon_pid")
            return pid if isinstance(pid, int) else -1
    except BouncerError:  # absent, refusing, or not answering: not a daemon we can use
        return None


def _log_tail(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-LOG_TAIL_LINES:])


def detach(environ: dict[str, str]) -> int:
    paths = resolve(environ)
    running = _probe(paths)
    if running is not None:
        _say(f"bouncerd is already running (pid {running})")
        return EXIT_ALREADY_RUNNING
    old = os.umask(0o077)
    try:
        ensure_private_dir(paths.state)
    except (BouncerError, OSError) as exc:
        _say(f"cannot start: {exc}")
        return EXIT_FAILED
    finally:
        os.umask(old)
    try:
        child, offset = spawn_daemon(paths, environ)
    except OSError as exc:
        _say(f"cannot start: {exc}")
        return EXIT_FAILED
    deadline = time.monotonic() + DETACH_WAIT_SECONDS
    while time.monotonic() < deadline:
        pid = _probe(paths)
        if pid is not None:
            if pid == child.pid:
                return 0
            _say(f"bouncerd is already running (pid {pid})")
            return EXIT_ALREADY_RUNNING
        code = child.poll()
        if code is not None and code != EXIT_ALREADY_RUNNING:
            _say(f"the daemon exited with status {code}:\n{_log_tail(paths.daemon_log, offset)}")
            return code or EXIT_FAILED
        time.sleep(PROBE_INTERVAL_SECONDS)
    code = child.poll()
    if code == EXIT_ALREADY_RUNNING:
        _say(f"another bouncerd holds the lock but does not answer on {paths.socket}")
        return EXIT_ALREADY_RUNNING
    _say(
        f"the daemon (pid {child.pid}) did not answer on {paths.socket} within {DETACH_WAIT_SECONDS:g}s; "
        f"see {paths.daemon_log}"
    )
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bouncerd", description="The per-user Bouncer daemon.")
    parser.add_argument(
        "--foreground",
        action="store_true",
        help="run in this process (for services and tests); log to stderr",
    )
    parser.add_argument("--version", action="version", version=f"bouncerd {__version__}")
    args = parser.parse_args(argv)
    if not args.foreground:
        return detach(dict(os.environ))
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s bouncerd[%(process)d] %(levelname)s %(message)s",
    )
    from bouncerd.server.run import run_foreground  # the daemon's imports (anyio) only when serving

    return run_foreground(os.environ)


if __name__ == "__main__":
    sys.exit(main())
