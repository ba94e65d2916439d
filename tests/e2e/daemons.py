"""A real `bouncerd --foreground` in a short temporary BOUNCER_HOME, for the e2e tests.

`RunningDaemon` (.home, .paths, .proc, .env, .stderr_path, .stop(), .restart()); `spawn_daemon`
starts one, `wait_until_serving` waits until its socket answers a ping. The daemon's stderr goes to
a file in the home (appended across restarts), never to a pipe nobody reads. The fixtures that use
them are in conftest.py; a test imports from here, never from conftest (pytest keeps one module
named conftest at a time, so `from conftest import` depends on which folder was collected last).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bouncerd.client import Client
from bouncerd.errors import DaemonUnavailableError
from bouncerd.paths import Paths, resolve

BOUNCERD = Path(sys.executable).parent / "bouncerd"

# Bounds, not expectations: a cold daemon is up in well under a second; these only stop a broken
# daemon from hanging the suite.
START_TIMEOUT_SECONDS = 15.0
STOP_TIMEOUT_SECONDS = 10.0


@dataclass
class RunningDaemon:
    home: Path
    paths: Paths
    proc: subprocess.Popen[bytes]
    env: dict[str, str]

    @property
    def stderr_path(self) -> Path:
        return self.home / "bouncerd.stderr"

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> int:
        """SIGTERM, wait, return the exit status (SIGKILL after STOP_TIMEOUT_SECONDS)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def restart(self) -> None:
        """Start a new daemon on the same home (after `stop` or a kill) and wait until it serves."""
        self.proc = spawn_daemon(self.home).proc
        wait_until_serving(self)


def spawn_daemon(home: Path) -> RunningDaemon:
    """Start `bouncerd --foreground` for `home` without waiting for it."""
    env = {**os.environ, "BOUNCER_HOME": str(home)}
    env.setdefault("BOUNCER_NO_NOTIFY", "1")  # an ask in a test must not pop a desktop notification
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "BOUNCER_SESSION"):
        env.pop(name, None)
    with (home / "bouncerd.stderr").open("ab") as log:
        proc = subprocess.Popen(
            [str(BOUNCERD), "--foreground"], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
    return RunningDaemon(home=home, paths=resolve(env), proc=proc, env=env)


def wait_until_serving(daemon: RunningDaemon) -> None:
    path = daemon.paths.socket
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        if daemon.proc.poll() is not None:
            raise RuntimeError(f"bouncerd exited with {daemon.proc.returncode}:\n{daemon.stderr()}")
        try:
            with Client.connect(path, timeout=1.0) as client:
                client.request("ping")
            return
        except DaemonUnavailableError:
            if time.monotonic() > deadline:
                daemon.stop()
                raise RuntimeError(f"bouncerd did not answer on {path}:\n{daemon.stderr()}") from None
            time.sleep(0.02)


def short_home() -> Path:
    """AF_UNIX paths are limited to ~108 bytes: homes live directly under /tmp with a short name."""
    return Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
