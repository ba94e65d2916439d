"""A real `bouncerd` in a short temp home, for the fuzz tests.

A fuzz test sends many examples to one daemon (starting one per example would make the bound on
examples a bound on process start-ups). It is stopped with SIGTERM at the end, and its stderr is kept
in the home so a test can look for tracebacks in it. Tests import from here, never from conftest
(pytest keeps one module named conftest at a time).
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

BIN = Path(sys.executable).parent
# A bound, not an expectation: a cold daemon listens in well under a second.
START_TIMEOUT_SECONDS = 15.0


@dataclass
class FuzzDaemon:
    home: Path
    proc: subprocess.Popen[bytes]

    @property
    def socket(self) -> Path:
        return self.home / "run" / "bouncerd.sock"

    def stderr(self) -> str:
        return (self.home / "bouncerd.stderr").read_text(encoding="utf-8", errors="replace")

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            return False
        with Client.connect(self.socket, timeout=5.0) as client:
            return client.request("ping").get("ok") is True


def start_daemon(home: Path, policy: str | None = None) -> FuzzDaemon:
    if policy is not None:
        (home / "config").mkdir(mode=0o700, exist_ok=True)
        (home / "config" / "policy.yaml").write_text(policy, encoding="utf-8")
    env = {**os.environ, "BOUNCER_HOME": str(home), "BOUNCER_NO_NOTIFY": "1"}
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "BOUNCER_SESSION"):
        env.pop(name, None)
    with (home / "bouncerd.stderr").open("ab") as log:
        proc = subprocess.Popen(
            [str(BIN / "bouncerd"), "--foreground"], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
    daemon = FuzzDaemon(home, proc)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"bouncerd exited with {proc.returncode}:\n{daemon.stderr()}")
        try:
            if daemon.alive():
                return daemon
        except DaemonUnavailableError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"bouncerd did not answer:\n{daemon.stderr()}")
        time.sleep(0.02)


def stop_daemon(daemon: FuzzDaemon) -> None:
    if daemon.proc.poll() is None:
        daemon.proc.send_signal(signal.SIGTERM)
        try:
            daemon.proc.wait(10)
        except subprocess.TimeoutExpired:
            daemon.proc.kill()
            daemon.proc.wait()


def short_home() -> Path:
    return Path(tempfile.mkdtemp(prefix="bf", dir="/tmp"))  # a socket path must stay under 108 bytes
