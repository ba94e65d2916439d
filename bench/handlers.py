"""What the daemon's op handlers cost in Python, called in this process: no socket, no event loop.

Theory of operation
-------------------
bench/relay.py times a whole call (client, shim, daemon, server) and bench/connection.py the daemon
behind its socket. Neither says how much of the daemon's CPU a call is its handlers' own work (the
engine's decision, the audit and journal records, indexing the output) and how much the way to them
(waking up, reading and ordering frames, writing the reply). This bench starts a daemon's state the
way `bouncerd` does (`Daemon.start`, in a temporary home, with bench/relay.py's policy and the tools of
tests/fixtures/servers/full.py, listed from the running fixture) and calls the handlers of a shim's
ops directly, as the connection would after decoding the frames:

1. **gated send**: a ``verdict`` on ``send_message`` to the address the policy trusts, then the
   ``observe`` of its result (what bench/relay.py's gated send costs the daemon);
2. **fast-path read**: the ``forwarded`` record of ``read_inbox``, then the ``observe`` of its result,
   a small inbox with addresses in it (bench/relay.py's read-only call).

Each is run ROUNDS times in batches; printed is the CPU time a call (process time), the best batch and
the median batch. The best is the steadiest figure on a shared host; set it beside the daemon's CPU a
call in bench/connection.py and bench/relay.py to see what the rest of the daemon costs. For where the
time goes inside, run it under a sampling profiler: `py-spy record -- .venv/bin/python
bench/handlers.py`. With `--baseline PATH` (another checkout) the same rounds run in a second process
on that checkout's code, alternating which goes first, and the ratios this/baseline are printed.
Nothing here asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connection import INBOX_TEXT  # what the fixture's read_inbox returns
from relay import BENCH_POLICY, TRUSTED_ADDRESS

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
FIXTURE = ROOT / "tests" / "fixtures" / "servers" / "full.py"
ROUNDS = 15
CALLS = 400  # a batch: long enough for the process clock, short enough to dodge a noisy neighbour
WARMUP = 300


def fixture_tools() -> list[dict[str, Any]]:
    """The fixture server's tools/list, as a shim reports it (`tools` op)."""
    from mcp import Client, StdioServerParameters

    async def listed() -> list[dict[str, Any]]:
        params = StdioServerParameters(command=sys.executable, args=[str(FIXTURE)])
        async with Client(params, mode="legacy") as client:
            result = await client.list_tools()
        return [t.model_dump(mode="json", exclude_none=True, by_alias=True) for t in result.tools]

    return asyncio.run(listed())


class Handlers:
    """One daemon's state and a shim's connection to it, its handlers called directly."""

    def __init__(self, home: Path, tools: list[dict[str, Any]]) -> None:
        from bouncerd import wire
        from bouncerd.paths import Paths
        from bouncerd.server.caller import Caller
        from bouncerd.server.daemon import Daemon

        paths = Paths(runtime=home / "run", state=home / "state", config=home / "config")
        for directory in (paths.runtime, paths.state, paths.config):
            directory.mkdir(parents=True, mode=0o700)
        (paths.config / "policy.yaml").write_text(BENCH_POLICY)
        (paths.config / "policy.yaml").chmod(0o600)
        self.daemon = Daemon.start(
            paths, str(paths.runtime / "s.sock"), expected_uid=os.getuid(), now=time.time()
        )
        self.caller = Caller()
        self._check = wire.check_request
        self._rid = 0
        self.seq = 0
        hello: Any = {
            "op": "hello",
            "id": 0,
            "version": wire.PROTOCOL_VERSION,
            "role": "shim",
            "session": "bench",
            "server": "full",
            "upstream": [sys.executable, str(FIXTURE)],
            "instance": "bench-1",
            "pid": 1,
            "client_pid": 2,
        }
        self._check(hello)
        reply, kept = self.daemon.hello(self.caller, 0, hello)
        if not kept:
            raise SystemExit(f"the daemon refused the hello: {reply}")
        self.call("tools", tools=tools)
        self.gated_send(0)  # the first call closes the first-use window; only then is the set granted
        self._rid += 1
        asked = {"op": "fastpath", "id": self._rid}
        self._check(asked)
        fastpath = self.daemon.async_handlers["fastpath"]

        async def granted() -> dict[str, Any]:
            return await fastpath(self.caller, self._rid, asked)

        held = asyncio.run(granted())
        if "read_inbox" not in (held.get("tools") or {}):
            raise SystemExit(f"read_inbox is not in the fast-path set: {held}")
        self.epoch = held["epoch"]

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        self._rid += 1
        message = {"op": op, "id": self._rid, **fields}
        self._check(message)
        reply = self.daemon.handlers[op](self.caller, self._rid, message)
        if reply.get("ok") is not True:
            raise SystemExit(f"{op} failed: {reply}")
        return reply

    def observe(self, request_id: int, tool: str, text: str) -> None:
        self.seq += 1
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
        self.call("observe", seq=self.seq, kind="result", tool=tool, request_id=request_id, payload=line)

    def gated_send(self, request_id: int) -> None:
        reply = self.call("verdict", request_id=request_id, tool="send_message",
                          arguments={"to": TRUSTED_ADDRESS, "body": "the minutes"})  # fmt: skip
        if reply.get("verdict") != "allow":
            raise SystemExit(f"the send was not allowed: {reply}")
        self.observe(request_id, "send_message", f"sent 11 characters to {TRUSTED_ADDRESS}")

    def fast_read(self, request_id: int) -> None:
        self.seq += 1
        self.call("forwarded", request_id=request_id, tool="read_inbox", arguments={}, epoch=self.epoch,
                  seq=self.seq)  # fmt: skip
        self.observe(request_id, "read_inbox", INBOX_TEXT)


def measure(rounds: int) -> dict[str, list[float]]:
    """CPU seconds a call, one figure per batch, for each kind of call."""
    tools = fixture_tools()
    out: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bh-") as tmp:
        handlers = Handlers(Path(tmp), tools)
        kinds: dict[str, Callable[[int], None]] = {
            "gated send (verdict + observe)": handlers.gated_send,
            "fast-path read (forwarded + observe)": handlers.fast_read,
        }
        request_id = 0
        for name, one in kinds.items():
            for _ in range(WARMUP):
                request_id += 1
                one(request_id)
            batches = []
            for _ in range(rounds):
                start = time.process_time()
                for _ in range(CALLS):
                    request_id += 1
                    one(request_id)
                batches.append((time.process_time() - start) / CALLS)
            out[name] = batches
        handlers.daemon.close()
    return out


def run_tree(tree: Path, rounds: int) -> dict[str, list[float]]:
    """`measure` in a process of its own on the checkout at `tree`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(tree / p) for p in ("", "cli", "shim"))}
    argv = [sys.executable, str(tree / "bench" / "handlers.py"), "--json", "--rounds", str(rounds)]
    if not (tree / "bench" / "handlers.py").exists():  # an older checkout: this script on its code
        argv[1] = str(Path(__file__).resolve())
    done = subprocess.run(argv, env=env, cwd=tree, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=ROUNDS, help=f"batches of {CALLS} calls (default {ROUNDS})"
    )
    parser.add_argument("--baseline", type=Path, help="another checkout to measure beside this one")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one side, for --baseline
    ns = parser.parse_args()
    if ns.json:
        print(json.dumps(measure(ns.rounds)))
        return
    print(
        f"bench/handlers.py: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()}"
    )
    sides = {"this": ROOT} | ({"baseline": ns.baseline.resolve()} if ns.baseline else {})
    results: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
    halves = 2 if ns.baseline else 1
    for half in range(halves):
        order = list(sides) if half % 2 == 0 else list(reversed(sides))
        for side in order:
            for name, batches in run_tree(sides[side], max(1, ns.rounds // halves)).items():
                results[side].setdefault(name, []).extend(batches)
    for name in results["this"]:
        print(f"\n{name}, {CALLS} calls a batch:")
        for side in sides:
            batches = results[side][name]
            best, middle = min(batches) * 1e6, statistics.median(batches) * 1e6
            print(f"  {side:9} best {best:7.1f} µs a call   median {middle:7.1f} µs")
        if ns.baseline:
            best = min(results["this"][name]) / min(results["baseline"][name])
            mid = statistics.median(results["this"][name]) / statistics.median(results["baseline"][name])
            print(f"  this/baseline: best {best:.3f}x, median {mid:.3f}x")
    print(f"\nat the end: load {os.getloadavg()}")


if __name__ == "__main__":
    main()
