"""How Bouncer scales: many shims on one daemon, and one daemon after a gigabyte of recorded output.

Theory of operation
-------------------
One `bouncerd` in a temporary BOUNCER_HOME; upstreams are bench/rawserver.py (standard library only,
so a hundred of them measure Bouncer, not the MCP SDK); clients are raw JSON-RPC over the processes'
pipes, all in this one process, so the client side costs the same at every step.

1. **Concurrency curve.** For each step N (default 1, 10, 50, 100): N direct connections to N raw
   servers, and N shims (each its own client session, `BOUNCER_SESSION`) in front of N more. Every
   connection runs trivial `echo` calls in a closed loop; blocks alternate direct / shim (and which
   goes first), so machine noise lands on both. Printed per step: relayed verdicts per second, p50 and
   p99 latency each side, the added latency (shim minus direct) and the ratio, the daemon's RSS, and
   the shim calls Bouncer refused, warm-up included (a daemon so far behind that a verdict takes over
   10 s refuses the call: fail closed).
2. **A gigabyte of output.** One shim reads `read_inbox` results (fresh addresses and URLs in every
   message) until `--gb` GB have passed through it, so the daemon indexes all of it. Before and after,
   the same number of gated sends (`send_message` to a never-seen address, so the destination is looked
   up in the taint index) are timed: their latency after the gigabyte against before it is the lookup
   cost of a big index. The daemon's RSS is printed at both ends.

Figures are printed, never asserted. Run `.venv/bin/python bench/scale.py` (`--quick` for a look).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relay import BIN, daemon

RAW = Path(__file__).resolve().parent / "rawserver.py"
STEPS = (1, 10, 50, 100)
CALLS_PER_BLOCK = 20  # per connection per block
BLOCKS = 6  # blocks a side per step
QUICK_BLOCKS = 2
WARMUP_CALLS = 10  # per connection, before timing: imports, caches, the daemon's pin bookkeeping
GATED_SENDS = 300
MAIL_PER_CALL = 2000  # ≈1.9 MB per result: large enough to be realistic, small enough to stream
LINE_LIMIT = 64 * 1024 * 1024  # a reply line bound for the pipe reader


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Conn:
    """One stdio JSON-RPC connection: requests out, the reply with the same id back."""

    def __init__(self, proc: Process) -> None:
        self.proc = proc
        self.next_id = 0
        self.buf = b""

    async def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send(json.dumps(msg).encode() + b"\n")

    async def _line(self) -> bytes:
        assert self.proc.stdout is not None
        while b"\n" not in self.buf:
            chunk = await self.proc.stdout.receive(1 << 20)
            self.buf += chunk
            if len(self.buf) > LINE_LIMIT:
                raise RuntimeError("reply line too long")
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        rid = self.next_id
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        while True:
            msg = json.loads(await self._line())
            if msg.get("id") == rid and "method" not in msg:
                return dict(msg)

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return await self.request("tools/call", {"name": tool, "arguments": arguments})

    async def close(self) -> None:
        if self.proc.stdin is not None:
            await self.proc.stdin.aclose()
        with anyio.move_on_after(5):
            await self.proc.wait()
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def open_conn(home: Path, *, shim: bool, session: str) -> Conn:
    env = {**os.environ, "BOUNCER_HOME": str(home), "BOUNCER_NO_AUTOSTART": "1", "BOUNCER_SESSION": session}
    argv = [sys.executable, str(RAW)]
    if shim:
        argv = [str(BIN / "bouncer-shim"), "--name", "raw", "--", *argv]
    proc = await anyio.open_process(argv, env=env, stderr=None)
    conn = Conn(proc)
    init = await conn.request(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "scale", "version": "1"},
        },
    )
    if "result" not in init:
        raise SystemExit(f"initialize failed: {init}")
    await conn.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    await conn.request("tools/list")
    return conn


REFUSALS: dict[str, int] = {}  # why calls were refused (a daemon too far behind refuses, fail closed)


async def timed_loop(conn: Conn, calls: int, sink: list[float]) -> None:
    for i in range(calls):
        t0 = time.perf_counter()
        reply = await conn.call("echo", text=f"ping {i}")
        sink.append(time.perf_counter() - t0)
        if "result" not in reply or reply["result"].get("isError"):
            why = json.dumps(reply.get("result") or reply.get("error"))
            if "[bouncer" not in why:
                raise SystemExit(f"echo failed: {reply}")
            key = why.split("]", 1)[1][:70].strip()
            REFUSALS[key] = REFUSALS.get(key, 0) + 1


async def block(conns: list[Conn], calls: int, sink: list[float]) -> float:
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for c in conns:
            tg.start_soon(timed_loop, c, calls, sink)
    return time.perf_counter() - t0


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * q))]


async def step(home: Path, n: int, blocks: int, daemon_pid: int) -> None:
    direct: list[Conn] = []
    shims: list[Conn] = []
    try:
        async with anyio.create_task_group() as tg:

            async def add(shim: bool, k: int) -> None:
                c = await open_conn(home, shim=shim, session=f"scale-{n}-{k}")
                (shims if shim else direct).append(c)

            for k in range(n):
                tg.start_soon(add, False, k)
                tg.start_soon(add, True, k)
        await block(direct, WARMUP_CALLS, [])
        await block(shims, WARMUP_CALLS, [])
        d_lat: list[float] = []
        s_lat: list[float] = []
        s_wall = 0.0
        for b in range(blocks):
            order = [(direct, d_lat), (shims, s_lat)]
            if b % 2:
                order.reverse()
            for conns, sink in order:
                wall = await block(conns, CALLS_PER_BLOCK, sink)
                if conns is shims:
                    s_wall += wall
        refused = sum(REFUSALS.values())
        REFUSALS.clear()
        d50, s50 = statistics.median(d_lat), statistics.median(s_lat)
        d99, s99 = pct(d_lat, 0.99), pct(s_lat, 0.99)
        print(
            f"{n:>6} {len(s_lat) / s_wall:>10.0f} {d50 * 1e3:>8.2f} {s50 * 1e3:>8.2f} "
            f"{(s50 - d50) * 1e3:>+8.2f} {s50 / d50:>6.2f}x {d99 * 1e3:>8.2f} {s99 * 1e3:>8.2f} "
            f"{(s99 - d99) * 1e3:>+8.2f} {s99 / d99:>6.2f}x {rss_mb(daemon_pid):>8.1f} {refused:>8}",
            flush=True,
        )
    finally:
        for c in direct + shims:
            await c.close()


async def gated_sends(conn: Conn, count: int, tag: str) -> tuple[float, float, dict[str, int]]:
    lat: list[float] = []
    outcomes: dict[str, int] = {}
    for i in range(count):
        t0 = time.perf_counter()
        reply = await conn.call("send_message", to=f"fresh.{tag}.{i}@never-seen-{i}.example", body="hi")
        lat.append(time.perf_counter() - t0)
        res = reply.get("result") or {}
        text = json.dumps(res)[:200]
        kind = "refused" if res.get("isError") or "error" in reply else "allowed"
        if "[bouncer" in text:
            kind = "bouncer:" + ("asked" if "approve" in text else "blocked")
        outcomes[kind] = outcomes.get(kind, 0) + 1
    return statistics.median(lat), pct(lat, 0.99), outcomes


async def gigabyte(home: Path, gb: float, daemon_pid: int) -> None:
    conn = await open_conn(home, shim=True, session="scale-gb")
    try:
        await gated_sends(conn, 20, "warm")
        b50, b99, b_out = await gated_sends(conn, GATED_SENDS, "before")
        rss0 = rss_mb(daemon_pid)
        goal, seen, seed = gb * 1e9, 0, 0
        t0 = time.perf_counter()
        next_note = 0.1
        while seen < goal:
            reply = await conn.call("read_inbox", count=MAIL_PER_CALL, seed=seed)
            seed += 1
            seen += len(reply["result"]["content"][0]["text"])
            if seen / goal >= next_note:
                print(f"  … {seen / 1e9:.2f} GB recorded, daemon RSS {rss_mb(daemon_pid):.0f} MB", flush=True)
                next_note += 0.1
        wall = time.perf_counter() - t0
        a50, a99, a_out = await gated_sends(conn, GATED_SENDS, "after")
        rss1 = rss_mb(daemon_pid)
    finally:
        await conn.close()
    print(
        f"\nrecorded {seen / 1e9:.2f} GB through one shim in {wall:.0f} s "
        f"({seen / 1e6 / wall:.1f} MB/s end to end)"
    )
    print(f"daemon RSS: {rss0:.1f} MB before, {rss1:.1f} MB after")
    print(
        f"gated send, p50 / p99 ms: before {b50 * 1e3:.2f} / {b99 * 1e3:.2f}; "
        f"after {a50 * 1e3:.2f} / {a99 * 1e3:.2f} "
        f"(ratio p50 {a50 / b50:.2f}x); verdicts before {b_out}, after {a_out}"
    )


async def run(args: argparse.Namespace) -> None:
    steps = [int(s) for s in args.steps.split(",")]
    with tempfile.TemporaryDirectory(prefix="bsc-", dir="/tmp") as tmp:
        home = Path(tmp)
        with daemon(home) as proc:
            print(f"# python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
            print(
                f"{'shims':>6} {'verdicts/s':>10} {'d p50':>8} {'s p50':>8} {'+p50':>8} {'ratio':>7} "
                f"{'d p99':>8} {'s p99':>8} {'+p99':>8} {'ratio':>7} {'RSS MB':>8} {'refused':>8}   (ms)"
            )
            for n in steps:
                await step(home, n, args.blocks, proc.pid)
            if args.gb > 0:
                await gigabyte(home, args.gb, proc.pid)
            print(f"# load at end {os.getloadavg()[0]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", default=",".join(map(str, STEPS)))
    ap.add_argument("--blocks", type=int, default=BLOCKS)
    ap.add_argument("--gb", type=float, default=1.0, help="GB of output to record in phase 2 (0: skip)")
    ap.add_argument("--quick", action="store_true", help="steps 1,10; 2 blocks; 0.02 GB")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.blocks, args.gb = "1,10", QUICK_BLOCKS, 0.02
    anyio.run(run, args)


if __name__ == "__main__":
    main()
