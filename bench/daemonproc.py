"""A `bouncerd --foreground` of the benches' own, in a temporary BOUNCER_HOME (reload.py, week.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from bouncerd.client import Client
from bouncerd.errors import DaemonUnavailableError
from bouncerd.paths import resolve

START_TIMEOUT_SECONDS = 30.0  # a bound for a broken daemon, not an expectation


def start_daemon(
    home: Path, extra_env: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], Path]:
    """Start bouncerd on `home` (no notifications, no socket activation, no inherited session) and
    return it with its socket once it answers a ping; its output goes to home/bouncerd.log."""
    env = {**os.environ, "BOUNCER_HOME": str(home), "BOUNCER_NO_NOTIFY": "1", **(extra_env or {})}
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "BOUNCER_SESSION"):
        env.pop(name, None)
    bouncerd = Path(sys.executable).parent / "bouncerd"
    log = (home / "bouncerd.log").open("ab")
    proc = subprocess.Popen([str(bouncerd), "--foreground"], env=env, stdout=log, stderr=log)
    log.close()
    socket = resolve(env).socket
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        try:
            with Client.connect(socket, timeout=1.0) as c:
                c.request("ping")
            return proc, socket
        except DaemonUnavailableError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"bouncerd did not start: {(home / 'bouncerd.log').read_text()}") from None
            time.sleep(0.05)
