"""The `daemon` fixture: a real `bouncerd --foreground` in a short temporary BOUNCER_HOME.

It yields a `RunningDaemon` (.home, .paths, .proc, .env, .stderr_path, .stop(), .restart()) once
the socket answers a ping, and stops the daemon with SIGTERM at the end (SIGKILL only if it does not
exit in time). The daemon's stderr goes to a file in the home (appended across restarts), never to a
pipe nobody reads.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

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


@pytest.fixture
def daemon() -> Iterator[RunningDaemon]:
    home = short_home()
    running = spawn_daemon(home)
    try:
        wait_until_serving(running)
        yield running
    finally:
        running.stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def start(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., RunningDaemon]]:
    """start(policy=None, **env) -> a serving daemon of its own (no desktop notifications unless a
    test sets BOUNCER_NO_NOTIFY itself); all are stopped and their homes removed afterwards."""
    from harness import write_policy  # harness imports this module: import it late

    started: list[RunningDaemon] = []
    monkeypatch.setenv("BOUNCER_NO_NOTIFY", "1")

    def _start(policy: str | None = None, **env: str) -> RunningDaemon:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        home = short_home()
        if policy is not None:
            write_policy(home, policy)
        running = spawn_daemon(home)
        started.append(running)
        wait_until_serving(running)
        return running

    yield _start
    for running in started:
        running.stop()
        shutil.rmtree(running.home, ignore_errors=True)
