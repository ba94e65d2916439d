"""Restart benchmark: how long clients are refused after bouncerd dies, against a cold start.

Run:  .venv/bin/python bench/restart.py [--shims 3] [--kills 3] [--gap 2.0] [--broken-seconds 10]

Part 1, the refusal window. N shims (``bouncer-shim`` in front of the echo server of the e2e tests,
autostart on, one fresh temporary ``BOUNCER_HOME`` under /tmp) each send one ``tools/call`` after
another from a thread of their own. The first shim's autostart starts the daemon. Then the daemon
named in the pid file is killed with SIGKILL K times, ``--gap`` seconds after the previous daemon
answered again (so every kill after the first lands well inside the 5 s before a daemon counts as
healthy: the case that used to leave clients refused for 22-25 s). For each kill and shim the window
is the time from the kill to that shim's first call answered by a daemon again. The baseline, taken
in the same run, is a cold start: ``bouncerd --foreground`` spawned to its first ``ping`` answered,
K times in a home of its own. The window minus the baseline is what detection, the backoff and the
start lock add.

Part 2, a daemon that cannot start (a policy.yaml it refuses): the same N shims for
``--broken-seconds``; it counts the daemon starts (each one a line "refusing to start" in the log)
and prints the refusal the shims give. The backoff should give about six starts, then one a minute.

Figures are printed, never asserted; the target is a longest window of at most 5 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ECHO = REPO / "tests" / "e2e" / "upstreams" / "echo.py"
BIN = Path(sys.executable).parent
TARGET_SECONDS = 5.0
# Bounds, not expectations: a recovery that takes longer than this is reported as such.
GIVE_UP_SECONDS = 40.0
CALL_PAUSE_SECONDS = 0.01  # between a shim's calls: many samples a second, little load


class ShimDriver:
    """One shim and a thread calling `echo` through it; records (time, answered by a daemon)."""

    def __init__(self, home: Path, index: int, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [str(BIN / "bouncer-shim"), "--name", "echo", "--", sys.executable, str(ECHO)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**env, "BOUNCER_SESSION": f"bench-{index}"},
        )
        self.samples: list[tuple[float, float, bool]] = []  # (sent, answered, by a daemon)
        self.stop = threading.Event()
        self._id = 0
        self.stderr = b""
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        self._request("initialize", {"protocolVersion": "2025-11-25", "clientInfo": {"name": "bench",
                      "version": "1"}, "capabilities": {}})  # fmt: skip
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self._request("tools/list", {})
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr += line

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the shim exited: {self.stderr.decode(errors='replace')[-500:]}")
            message = json.loads(line)
            if message.get("id") == self._id and "method" not in message:
                return dict(message)

    def _loop(self) -> None:
        while not self.stop.is_set():
            sent = time.monotonic()
            try:
                answer = self._request("tools/call", {"name": "echo", "arguments": {"n": self._id}})
            except (RuntimeError, OSError, ValueError):
                return  # the shim was closed under us at the end of a run
            text = json.dumps(answer)
            self.samples.append((sent, time.monotonic(), "unreachable" not in text and "isError" not in text))
            time.sleep(CALL_PAUSE_SECONDS)

    def answered_since(self, since: float) -> float | None:
        """When the first call sent after `since` was answered by a daemon, or None."""
        for sent, answered, ok in list(self.samples):
            if sent > since and ok:
                return answered
        return None

    def close(self) -> None:
        self.stop.set()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def _pid(home: Path) -> int | None:
    try:
        text = (home / "run" / "bouncerd.pid").read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BOUNCER_NO_AUTOSTART", "BOUNCER_SESSION")}
    return {**env, "BOUNCER_HOME": str(home), "BOUNCER_NO_NOTIFY": "1"}


def cold_starts(runs: int) -> list[float]:
    sys.path.insert(0, str(REPO))
    from bouncerd.client import Client
    from bouncerd.errors import BouncerError
    from bouncerd.paths import resolve

    home = Path(tempfile.mkdtemp(prefix="bb", dir="/tmp"))
    times = []
    try:
        paths = resolve({"BOUNCER_HOME": str(home)})
        for _ in range(runs):
            start = time.monotonic()
            proc = subprocess.Popen(
                [str(BIN / "bouncerd"), "--foreground"], env=_env(home), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            while True:
                try:
                    with Client.connect(paths, timeout=1.0) as client:
                        client.request("ping")
                    break
                except BouncerError:
                    time.sleep(0.005)
            times.append(time.monotonic() - start)
            proc.send_signal(signal.SIGTERM)
            proc.wait()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return times


def refusal_windows(shims: int, kills: int, gap: float) -> list[list[float | None]]:
    home = Path(tempfile.mkdtemp(prefix="bb", dir="/tmp"))
    drivers: list[ShimDriver] = []
    windows: list[list[float | None]] = []
    try:
        drivers = [ShimDriver(home, i, _env(home)) for i in range(shims)]
        for driver in drivers:
            driver.thread.start()
        deadline = time.monotonic() + GIVE_UP_SECONDS
        while not all(d.answered_since(0) for d in drivers) and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(kills):
            time.sleep(gap)
            victim = _pid(home)
            if victim is None:
                print("  no daemon to kill (the pid file is missing)")
                break
            killed_at = time.monotonic()
            os.kill(victim, signal.SIGKILL)
            deadline = killed_at + GIVE_UP_SECONDS
            while not all(d.answered_since(killed_at) for d in drivers) and time.monotonic() < deadline:
                time.sleep(0.02)
            row: list[float | None] = []
            for d in drivers:
                at = d.answered_since(killed_at)
                row.append(None if at is None else at - killed_at)
            windows.append(row)
    finally:
        for driver in drivers:
            driver.close()
        _stop_daemon(home)
        shutil.rmtree(home, ignore_errors=True)
    return windows


def broken_daemon(shims: int, seconds: float) -> tuple[int, str]:
    home = Path(tempfile.mkdtemp(prefix="bb", dir="/tmp"))
    (home / "config").mkdir(mode=0o700)
    (home / "config" / "policy.yaml").write_text("servers:\n  echo:\n    no_such_key: 1\n")
    drivers: list[ShimDriver] = []
    try:
        drivers = [ShimDriver(home, i, _env(home)) for i in range(shims)]
        for driver in drivers:
            driver.thread.start()
        time.sleep(seconds)
        log = (home / "state" / "bouncerd.log").read_text(errors="replace")
        said = drivers[0].stderr.decode(errors="replace").strip().splitlines()
    finally:
        for driver in drivers:
            driver.close()
        _stop_daemon(home)
        shutil.rmtree(home, ignore_errors=True)
    gave_up = [line for line in said if "starts in a row" in line]
    return log.count("refusing to start"), (gave_up or said or [""])[-1]


def _stop_daemon(home: Path) -> None:
    pid = _pid(home)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _fmt(value: float | None) -> str:
    return "  none" if value is None else f"{value:6.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--shims", type=int, default=3)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between recovery and the next kill")
    parser.add_argument("--broken-seconds", type=float, default=10.0)
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.system()} {platform.machine()}, "
          f"{os.cpu_count()} CPUs; {args.shims} shims, {args.kills} kills, {args.gap:g} s apart")  # fmt: skip

    base = cold_starts(args.kills)
    base_median = statistics.median(base)
    print(f"baseline: cold start to first ping, median {base_median:.2f} s "
          f"(min {min(base):.2f}, max {max(base):.2f}, {len(base)} runs)")  # fmt: skip

    windows = refusal_windows(args.shims, args.kills, args.gap)
    print("refusal window after each kill -9, seconds (kill to the shim's first call answered again):")
    longest = 0.0
    for k, row in enumerate(windows, 1):
        known = [w for w in row if w is not None]
        worst = max(known) if known else float("inf")
        longest = max(longest, worst if len(known) == len(row) else float("inf"))
        print(f"  kill {k}: " + " ".join(_fmt(w) for w in row)
              + f"   longest {worst:.2f} s = baseline {worst - base_median:+.2f} s")  # fmt: skip
    verdict = "met" if longest <= TARGET_SECONDS else "MISSED"
    print(f"longest refusal window: {longest:.2f} s (target <= {TARGET_SECONDS:g} s: {verdict})")

    starts, said = broken_daemon(args.shims, args.broken_seconds)
    print(f"daemon that cannot start (bad policy.yaml), {args.shims} shims for {args.broken_seconds:g} s: "
          f"{starts} starts ({starts / args.broken_seconds:.2f}/s)")  # fmt: skip
    print(f"  the shims say: {said[:300]}")


if __name__ == "__main__":
    main()
