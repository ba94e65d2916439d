"""The daemon the benchmark drivers share: one `bouncerd --foreground` in a fresh short home.

bench/agentdojo and bench/opentasks (with bench/heldout on its driver) start one for a whole run and
speak to it as the hook (`vouch`) and as `bouncerctl` (`approve`) would. Every episode or task is a
session of its own, over when its shim exits: a short grace archives it, so its open codes do not
fill the daemon's MAX_PENDING for the ones after it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bouncerd.client import Client
from bouncerd.errors import DaemonUnavailableError
from bouncerd.paths import resolve

BIN = Path(sys.executable).parent
# A bound, not an expectation: the daemon answers in well under a second; this only turns a hang
# into a failure.
DAEMON_START_SECONDS = 15.0


class BenchDaemon:
    """`bouncerd --foreground` in a fresh temporary BOUNCER_HOME, with `policy` as its policy.yaml
    (None: no policy file, the shipped packs only)."""

    def __init__(self, *, prefix: str, policy: str | None = None) -> None:
        self.home = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
        if policy is not None:
            (self.home / "config").mkdir(mode=0o700)
            (self.home / "config" / "policy.yaml").write_text(policy, encoding="utf-8")
        env = {
            **os.environ,
            "BOUNCER_HOME": str(self.home),
            "BOUNCER_NO_NOTIFY": "1",
            "BOUNCER_SESSION_GRACE_SECONDS": "2",
        }
        env.pop("BOUNCER_SESSION", None)
        self.env = env
        self.paths = resolve(env)
        self.log = (self.home / "bouncerd.stderr").open("ab")
        self.proc = subprocess.Popen(
            [str(BIN / "bouncerd"), "--foreground"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
        )
        deadline = time.monotonic() + DAEMON_START_SECONDS
        while True:
            try:
                with Client.connect(self.paths) as c:
                    c.request("ping")
                break
            except DaemonUnavailableError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.05)

    def vouch(self, session: str, prompt: str) -> int:
        """Hand the prompt to the daemon as the UserPromptSubmit hook does."""
        with Client.connect(self.paths, role="hook", session=session, candidates=[session]) as c:
            return int(c.request("vouch", text=prompt).get("vouched", 0))

    def approve(self, code: str) -> None:
        """What `bouncerctl approve CODE` sends."""
        with Client.connect(self.paths, role="ctl") as c:
            c.request("approve", code=code)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)
