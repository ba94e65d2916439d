"""A real `bouncerd --foreground` in a short temporary BOUNCER_HOME, for the e2e tests.

`RunningDaemon` (.home, .paths, .proc, .env, .stderr_path, .stop(), .restart()); `spawn_daemon`
starts one, `wait_until_serving` waits until its socket answers a ping. `DaemonPool` hands the
fixtures a fresh daemon started ahead of time and stops the used ones without waiting for them.
The daemon's stderr goes to a file in the home (appended across restarts), never to a pipe nobody
reads. The fixtures that use them are in conftest.py; a test imports from here, never from
conftest (pytest keeps one module named conftest at a time, so `from conftest import` depends on
which folder was collected last).
"""

from __future__ import annotations

import os
import shutil
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


def daemon_environ(home: Path) -> dict[str, str]:
    """The environment `spawn_daemon` gives a daemon for `home`, read from this process's now."""
    env = {**os.environ, "BOUNCER_HOME": str(home)}
    env.setdefault("BOUNCER_NO_NOTIFY", "1")  # an ask in a test must not pop a desktop notification
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "BOUNCER_SESSION"):
        env.pop(name, None)
    return env


def spawn_daemon(home: Path) -> RunningDaemon:
    """Start `bouncerd --foreground` for `home` without waiting for it."""
    env = daemon_environ(home)
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


# Set by pytest to the running test's name: it differs for every test and the daemon never reads it.
PER_TEST_VARIABLES = ("PYTEST_CURRENT_TEST",)


def _same(started: dict[str, str], now: dict[str, str]) -> bool:
    def kept(env: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if k not in PER_TEST_VARIABLES}

    return kept(started) == kept(now)


# Used daemons told to stop whose exit is not awaited yet: past this many, the oldest is waited for.
MAX_STOPPING = 4


class DaemonPool:
    """Fresh daemons without the wait for their start, and stops without the wait for their exit.

    `take()` returns a serving daemon in a fresh home, as `spawn_daemon` plus `wait_until_serving`
    would, and starts the next one at once, so that it starts while the test runs. The spare is
    used only if it was started with exactly the environment a daemon started now would get,
    pytest's PER_TEST_VARIABLES aside (a test or fixture may have changed the process environment
    since); otherwise it is stopped and a new one started. `retire(daemon)` sends SIGTERM and
    returns; the home is removed once the daemon has exited. `close()` stops the spare and waits
    for every retired daemon (SIGKILL after STOP_TIMEOUT_SECONDS), removing their homes.
    """

    def __init__(self) -> None:
        self._spare: RunningDaemon | None = None
        self._stopping: list[RunningDaemon] = []

    def take(self) -> RunningDaemon:
        spare, self._spare = self._spare, None
        if spare is not None and spare.proc.poll() is None and _same(spare.env, daemon_environ(spare.home)):
            running = spare
        else:
            if spare is not None:
                self.retire(spare)
            running = spawn_daemon(short_home())
        try:
            wait_until_serving(running)
        except BaseException:
            shutil.rmtree(running.home, ignore_errors=True)
            raise
        self._spare = spawn_daemon(short_home())
        return running

    def retire(self, daemon: RunningDaemon) -> None:
        if daemon.proc.poll() is None:
            daemon.proc.send_signal(signal.SIGTERM)
        self._stopping.append(daemon)
        self._reap()

    def close(self) -> None:
        if self._spare is not None:
            self.retire(self._spare)
            self._spare = None
        for daemon in self._stopping:
            daemon.stop()
        self._reap()

    def _reap(self) -> None:
        while len(self._stopping) > MAX_STOPPING:
            self._stopping[0].stop()
            self._forget(self._stopping[0])
        for daemon in [d for d in self._stopping if d.proc.poll() is not None]:
            self._forget(daemon)

    def _forget(self, daemon: RunningDaemon) -> None:
        self._stopping.remove(daemon)
        shutil.rmtree(daemon.home, ignore_errors=True)
