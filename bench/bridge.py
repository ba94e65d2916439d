"""What the bridge costs: a client talking HTTP to a remote server itself, against the same client
reaching the same server through ``bouncer-shim --url`` (stdio → shim → bridge → HTTP), in one run.

Theory of operation
-------------------
One fixture server (tests/fixtures/servers/remote.py serving full.py over streamable HTTP on
127.0.0.1, a port chosen free) and one `bouncerd` in a temporary BOUNCER_HOME serve both sides.

1. **Start-up.** Connect → initialize → first `tools/list` result, a new client each time, directly
   over HTTP and through the shim alternately (the server is already up: only the client side
   starts). Reported: medians and the difference. The shim's stdio start is unchanged by bridge
   mode; what the bridge adds is its own interpreter importing the SDK.
2. **Round trips.** A direct client and a bridged client are connected side by side; trivial
   `tools/call`s (`echo`) are timed one by one in blocks that alternate between the two, so machine
   noise lands on both sides. Reported: median and p99 per side, and their ratios.

Every figure is printed with the machine's load average at the start and the end. Nothing here
asserts: a benchmark informs, tests decide. Run ``.venv/bin/python bench/bridge.py`` (``--quick``
for a short run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[1]
REMOTE = REPO / "tests" / "fixtures" / "servers" / "remote.py"
BIN = Path(sys.executable).parent
BLOCK = 20  # calls per side before switching


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{what} did not start")
        time.sleep(0.05)


@contextmanager
def processes(home: Path) -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(REMOTE), "full", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    env = {**os.environ, "BOUNCER_HOME": str(home), "BOUNCER_NO_NOTIFY": "1"}
    daemon = subprocess.Popen([str(BIN / "bouncerd"), "--foreground"], env=env, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, server, "the fixture server")
        deadline = time.monotonic() + 30
        while not (home / "run" / "bouncerd.sock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        for proc in (server, daemon):
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)


def bridged(url: str, home: Path) -> StdioServerParameters:
    env = {**os.environ, "BOUNCER_HOME": str(home), "BOUNCER_NO_AUTOSTART": "1", "BOUNCER_NO_NOTIFY": "1"}
    return StdioServerParameters(
        command=str(BIN / "bouncer-shim"), args=["--name", "full", "--url", url], env=env
    )


async def startup(target: object) -> float:
    started = time.perf_counter()
    async with Client(target, mode="legacy", cache=None) as client:  # type: ignore[arg-type]
        await client.list_tools()
        return time.perf_counter() - started


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(reps: int, calls: int) -> None:
    home = Path(tempfile.mkdtemp(prefix="bb", dir="/tmp"))
    print(f"load average at start: {os.getloadavg()}")
    try:
        with processes(home) as url:
            direct_up: list[float] = []
            bridge_up: list[float] = []
            for i in range(reps):
                order = [("direct", url), ("bridge", bridged(url, home))]
                for kind, target in order if i % 2 == 0 else reversed(order):
                    (direct_up if kind == "direct" else bridge_up).append(await startup(target))
            d, b = statistics.median(direct_up), statistics.median(bridge_up)
            print(f"start-up to first tools/list ({reps} a side): direct {d * 1e3:.0f} ms, "
                  f"bridge {b * 1e3:.0f} ms, extra {(b - d) * 1e3:+.0f} ms")  # fmt: skip

            times: dict[str, list[float]] = {"direct": [], "bridge": []}
            async with (
                Client(url, mode="legacy", cache=None) as direct,
                Client(bridged(url, home), mode="legacy", cache=None) as bridge,
            ):
                sides = [("direct", direct), ("bridge", bridge)]
                for _, client in sides:  # warm both paths (pins, first verdict)
                    await client.call_tool("echo", {"message": "warm"})
                for block in range(max(1, calls // BLOCK)):
                    for kind, client in sides if block % 2 == 0 else reversed(sides):
                        for _ in range(BLOCK):
                            started = time.perf_counter()
                            await client.call_tool("echo", {"message": "hello"})
                            times[kind].append(time.perf_counter() - started)
            dm, bm = statistics.median(times["direct"]), statistics.median(times["bridge"])
            dp, bp = quantile(times["direct"], 0.99), quantile(times["bridge"], 0.99)
            n = len(times["direct"])
            print(f"round trip, {n} calls a side: median direct {dm * 1e3:.2f} ms, bridge {bm * 1e3:.2f} ms "
                  f"({bm / dm:.2f}x, {(bm - dm) * 1e3:+.2f} ms); p99 direct {dp * 1e3:.2f} ms, "
                  f"bridge {bp * 1e3:.2f} ms ({bp / dp:.2f}x)")  # fmt: skip
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run: 3 start-ups and 100 calls a side")
    parser.add_argument("--startup-reps", type=int, default=10)
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    reps, calls = (3, 100) if args.quick else (args.startup_reps, args.calls)
    anyio.run(run, reps, calls)


if __name__ == "__main__":
    main()
