"""Policy reload benchmark: how long a large reload takes, and how long it holds up verdicts.

Run:  .venv/bin/python bench/reload.py [--bytes 530000] [--reloads 5]

It starts its own `bouncerd` in a temporary `BOUNCER_HOME` under /tmp (removed afterwards), writes a
valid policy of about `--bytes` bytes (tool entries with sinks, allowlists and budgets: the shape of
a large hand-kept allowlist; the limit is 1 MiB) and connects one shim that asks for verdicts back to
back, each timed. First a baseline: verdicts with no reload, for as long as the reloads will take.
Then `--reloads` reloads, one after another on a second connection, while the verdicts go on. It
prints the time of each reload (from the request to its reply) and, for the verdicts of each phase,
the median, p99 and the longest one: the longest verdict during the reloads, against the longest
without, is the stall a reload causes. The figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from daemonproc import start_daemon

from bouncerd.client import Client


def big_policy(target: int) -> str:
    lines = ["version: 1", "tools:"]
    size = 0
    i = 0
    while size < target:
        block = [
            f"  tool_{i}:",
            "    exfiltrating: true",
            "    sink_params: [to, cc]",
            "    trusted_destinations:",
            *(f"      - user{i}_{j}@example{j}.com" for j in range(8)),
            "    trusted_domains: [corp.example.com, partner.example.org]",
            "    max_calls: 100000",
        ]
        lines += block
        size += sum(len(line) + 1 for line in block)
        i += 1
    return "\n".join(lines) + "\n"


def _verdicts(shim: Client, until: threading.Event) -> list[float]:
    times: list[float] = []
    n = 0
    while not until.is_set():
        n += 1
        t = time.perf_counter()
        shim.request("verdict", request_id=n, tool="tool_0", arguments={"to": "user0_0@example0.com"})
        times.append(time.perf_counter() - t)
    return times


def _summary(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{name:<26} {len(times):>6} verdicts   median {statistics.median(times) * 1e3:7.2f} ms   "
        f"p99 {p99 * 1e3:7.2f} ms   longest {max(times) * 1e3:8.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=530_000)
    parser.add_argument("--reloads", type=int, default=5)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bre", dir="/tmp"))
    (home / "config").mkdir(mode=0o700)
    policy = home / "config" / "policy.yaml"
    text = big_policy(args.bytes)
    policy.write_text(text)
    proc, socket = start_daemon(home)
    try:
        with (
            Client.connect(socket, role="shim", session="bench", server="mail", upstream=["m"]) as shim,
            Client.connect(socket, role="ctl", timeout=120.0) as ctl,
        ):
            shim.request("tools", tools=[{"name": "tool_0"}])
            shim.request("pins_accept", server="mail")
            ctl.request("reload")  # warm: the first reload also loads what the packs cache
            reload_times: list[float] = []
            during: list[float] = []
            stop = threading.Event()
            box: list[list[float]] = []
            worker = threading.Thread(target=lambda: box.append(_verdicts(shim, stop)))
            worker.start()
            for _ in range(args.reloads):
                t = time.perf_counter()
                error = ctl.request("reload")["error"]
                reload_times.append(time.perf_counter() - t)
                if error:
                    raise SystemExit(f"reload failed: {error}")
            stop.set()
            worker.join()
            during = box.pop()
            stop = threading.Event()
            timer = threading.Timer(sum(reload_times), stop.set)
            timer.start()
            baseline = _verdicts(shim, stop)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        shutil.rmtree(home, ignore_errors=True)
    print(f"policy: {len(text.encode())} bytes, {text.count('  tool_')} tool entries")
    print(
        "reload time (request to reply): "
        + ", ".join(f"{t:.2f} s" for t in reload_times)
        + f"   median {statistics.median(reload_times):.2f} s"
    )
    print(_summary("baseline (no reload)", baseline))
    print(_summary("during reloads", during))
    print(f"stall a reload adds to the longest verdict: {(max(during) - max(baseline)) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
