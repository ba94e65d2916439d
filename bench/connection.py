"""What one daemon connection costs per request: the ordering machine and its protocol, over a raw socket.

Theory of operation
-------------------
bench/relay.py measures a whole call (client, shim, daemon, server) and on a loaded machine its figures
move by more than the daemon's share of them. This bench talks to `bouncerd` alone, as a shim does, with
the wire's own codec, so what varies is the daemon's read, order, dispatch and reply path:

1. **verdict round trips**: one ``verdict`` in flight at a time (the shim's pattern), on a tool the
   engine denies without reading taint. Reported: median and p99 wall time, daemon CPU per call.
2. **observe, then verdict**: a small ``observe`` (its ack deferred) followed by a ``verdict`` on a tool
   that reads taint, whose reply carries the ack: the same-connection ordering of how-it-works.md.
3. **a forwarded read, then its output**: the daemon's side of a call decided before it is asked
   (docs/how-it-works.md): the ``forwarded`` record of a read, its answer awaited, then the read's
   result (a small inbox with addresses in it, as tests/fixtures/servers/full.py's ``read_inbox``
   returns) as an ``observe``, indexed for taint. The daemon CPU per call is what bench/relay.py's
   read-only call costs the daemon, without the client, the shim and the server beside it.
4. **pipelined pings**: BURST pings in one write, the time until every reply is in.

Daemon CPU comes from /proc/<pid>/schedstat (nanoseconds; Linux), else /proc/<pid>/stat. With
``--baseline BINDIR`` (the directory holding another tree's ``bouncerd``, e.g. its .venv/bin) the
same rounds run against that daemon too, alternating which goes first, and the ratios
this/baseline are printed: run both in one command.
Nothing here asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bouncerd import wire
from bouncerd.client import Client
from bouncerd.errors import DaemonUnavailableError
from bouncerd.paths import resolve

CALLS = 2000  # round trips per phase and round (daemon CPU is read in 10 ms ticks)
BURST = 2000  # pings in one write
ROUNDS = 3  # rounds per daemon, alternated with the baseline's
START_TIMEOUT_SECONDS = 30.0  # a bound for a broken daemon, not an expectation
READ_TOOL = "read_inbox"
# What the fixture server's read_inbox returns: two messages, four addresses and a URL to index.
INBOX_TEXT = json.dumps(
    [
        {"from": "alice@example.com", "subject": "lunch", "body": "Shall we meet at noon?"},
        {
            "from": "newsletter@shop.example",
            "subject": "offer",
            "body": "Reply to deals@shop.example or visit https://shop.example/deals for more.",
        },
    ],
    indent=2,
)
_read_seq = 0
READ_SEQ_BASE = 10**15  # "observe, then verdict" numbers its observations up to 10^7 x its last request id
_instances = itertools.count(1)


class Daemon:
    def __init__(self, bindir: Path) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="bcn-", dir="/tmp"))
        env = {**os.environ, "BOUNCER_HOME": str(self.home), "BOUNCER_NO_NOTIFY": "1"}
        for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "BOUNCER_SESSION"):
            env.pop(name, None)
        log = (self.home / "bouncerd.log").open("ab")
        self.proc = subprocess.Popen(
            [str(bindir / "bouncerd"), "--foreground"], env=env, stdout=log, stderr=log
        )
        log.close()
        self.socket = resolve(env).socket
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            try:
                with Client.connect(self.socket, timeout=1.0) as c:
                    c.request("ping")
                break
            except DaemonUnavailableError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"bouncerd from {bindir} did not start: see {self.home}") from None
                time.sleep(0.05)

    def cpu(self) -> float:
        """CPU seconds so far: the scheduler's nanoseconds where Linux has them, else 10 ms ticks."""
        with contextlib.suppress(OSError, IndexError, ValueError):
            return int(Path(f"/proc/{self.proc.pid}/schedstat").read_text().split()[0]) / 1e9
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.home, ignore_errors=True)


class Conn:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.decoder = wire.FrameDecoder()
        self.rid = 0
        # A new shim instance each connection: an observation's seq is checked against its instance's last.
        hello = {"session": "bench", "server": "mail", "upstream": ["m"], "instance": f"i{next(_instances)}"}
        self.ask("hello", version=wire.PROTOCOL_VERSION, role="shim", pid=os.getpid(), client_pid=1, **hello)
        tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("send_email", READ_TOOL)]
        self.ask("tools", tools=tools)
        self.ask("pins_accept", server="mail")

    def send(self, op: str, **fields: Any) -> int:
        self.rid += 1
        self.sock.sendall(wire.encode(wire.request(op, self.rid, **fields)))
        return self.rid

    def until(self, rid: int) -> dict[str, Any]:
        while True:
            while (message := self.decoder.next_message()) is not None:
                if message["id"] == rid:
                    return message
            data = self.sock.recv(1 << 16)
            if not data:
                raise SystemExit("the daemon closed the connection")
            self.decoder.receive_data(data)

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        return self.until(self.send(op, **fields))


def verdicts(conn: Conn, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        conn.ask("verdict", request_id=1, tool="no_such_tool", arguments={"q": "x"})
        times.append(time.perf_counter() - start)
    return times


def observe_then_verdict(conn: Conn, calls: int) -> list[float]:
    times = []
    for seq in range(calls):
        start = time.perf_counter()
        line = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"hello"}]}}' % seq
        conn.send(
            "observe",
            seq=seq + 10_000_000 * conn.rid,
            kind="result",
            tool="read",
            request_id=seq,
            payload=line,
        )
        conn.ask("verdict", request_id=seq, tool="send_email", arguments={"to": "a@example.com"})
        times.append(time.perf_counter() - start)
    return times


def forwarded_reads(conn: Conn, calls: int) -> list[float]:
    global _read_seq
    times = []
    for _ in range(calls):
        _read_seq += 1
        seq = READ_SEQ_BASE + _read_seq  # above the other phase's seqs: a lower one is skipped as a replay
        start = time.perf_counter()
        conn.ask("forwarded", request_id=seq, tool=READ_TOOL, arguments={}, epoch=1, seq=seq)
        result = {"content": [{"type": "text", "text": INBOX_TEXT}], "isError": False}
        line = json.dumps({"jsonrpc": "2.0", "id": seq, "result": result}).encode()
        conn.send("observe", seq=seq, kind="result", tool=READ_TOOL, request_id=seq, payload=line)
        times.append(time.perf_counter() - start)
    return times


def pings(conn: Conn, burst: int) -> list[float]:
    frames = []
    for _ in range(burst):
        conn.rid += 1
        frames.append(wire.encode(wire.request("ping", conn.rid)))
    start = time.perf_counter()
    conn.sock.sendall(b"".join(frames))
    conn.until(conn.rid)
    return [time.perf_counter() - start]


PHASES: dict[str, tuple[Callable[[Conn, int], list[float]], int]] = {
    "verdict round trip": (verdicts, CALLS),
    "observe, then verdict": (observe_then_verdict, CALLS),
    "forwarded read, then its output": (forwarded_reads, CALLS),
    f"{BURST} pipelined pings": (pings, BURST),
}


def run_round(daemon: Daemon, results: dict[str, dict[str, list[float]]]) -> None:
    conn = Conn(daemon.socket)
    try:
        for name, (phase, n) in PHASES.items():
            cpu = daemon.cpu()
            times = phase(conn, n)
            results[name]["wall"].extend(times)
            results[name]["cpu"].append((daemon.cpu() - cpu) / n)
    finally:
        conn.sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="the bin directory of another tree's bouncerd")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    ns = parser.parse_args()
    sides = {"this": Path(sys.executable).parent}
    if ns.baseline:
        sides["baseline"] = ns.baseline
    print(
        f"bench/connection.py: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()}"
    )
    daemons = {side: Daemon(bindir) for side, bindir in sides.items()}
    results = {side: {name: {"wall": [], "cpu": []} for name in PHASES} for side in sides}
    try:
        for r in range(ns.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for side in order:
                run_round(daemons[side], results[side])
    finally:
        for daemon in daemons.values():
            daemon.stop()
    for name in PHASES:
        print(f"\n{name}:")
        for side in sides:
            wall = sorted(results[side][name]["wall"])
            p99 = wall[min(len(wall) - 1, int(len(wall) * 0.99))]
            cpu = statistics.median(results[side][name]["cpu"]) * 1e6
            print(
                f"  {side:9} median {statistics.median(wall) * 1e3:8.3f} ms  p99 {p99 * 1e3:8.3f} ms"
                f"  daemon CPU {cpu:7.1f} µs a request"
            )
        if "baseline" in sides:
            ratio = statistics.median(results["this"][name]["wall"]) / statistics.median(
                results["baseline"][name]["wall"]
            )
            cpu_ratio = statistics.median(results["this"][name]["cpu"]) / max(
                statistics.median(results["baseline"][name]["cpu"]), 1e-9
            )
            print(f"  this/baseline: median wall {ratio:.3f}x, daemon CPU {cpu_ratio:.3f}x")
    print(f"\nat the end: load {os.getloadavg()}")


if __name__ == "__main__":
    main()
