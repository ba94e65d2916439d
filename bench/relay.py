"""What the relay costs: the same MCP client against the same server, directly and through the shim.

Theory of operation
-------------------
One run measures three things with the real `mcp` client (legacy mode) and the fixture server
tests/fixtures/servers/full.py, against a `bouncerd` this script starts in a temporary BOUNCER_HOME:

1. **Round trips.** A direct client and a shim client are connected side by side for the whole phase.
   Three kinds of `tools/call` are timed one by one, in blocks that alternate between the two (and
   alternate which goes first), so a burst of machine noise lands on both sides instead of one: a
   read-only call (`read_inbox`, which the shim forwards before it asks: docs/how-it-works.md,
   "Decided before it is asked"), a call that takes the round trip to the daemon (`weather`), and
   a gated send the sink gate allows (`send_message` to an address the bench's policy trusts).
   Reported: median and p99 per side, their ratios, the shim's and the daemon's CPU time and
   wake-ups (voluntary context switches) per call, the CPU a call of every process on each side (the
   client, which is this process and runs one side's calls at a time, and the fixture server, beside
   the shim and the daemon: on a host with few CPUs their sum is what the call's wall time is made
   of), and how many calls the audit log records as forwarded on the fast path. Targets: a read
   median ≤ 1.10 × direct and p99 ≤ 1.3 ×; a round trip median ≤ 1.15 ×, p99 ≤ 1.5 ×; a gated send
   median ≤ 1.5 ×. Then the shim's resident memory, now and at its peak (Linux /proc). Target:
   ≤ 30 MB.
2. **Start-up.** Spawn → initialize → first `tools/list` result, for a new client and server each time,
   direct and through the shim alternately, with the daemon already running. Reported: medians and
   the difference. Target: ≤ +80 ms. The fixture server's own start (it imports `mcp`, ~1.3 s) varies
   by more than the target, so the same is also timed with bench/rawserver.py (standard library
   only, raw JSON-RPC lines over the pipes), where the shim's part is what varies.
3. **A 10 MB result.** One `tools/call` whose text result is 10,000,000 bytes of ordinary prose (the
   fixture's `big` tool), direct and through the shim, alternately. Reported: end-to-end MB/s both
   ways (the client's own JSON and pydantic work is most of it), and the relay's throughput: the bytes
   divided by the time the shim added, which is what the relay itself costs. Target: the relay's
   throughput ≥ 200 MB/s (1 MB = 10^6 bytes).

Every figure is printed, each target marked met or missed, with the machine's load average at the
start and the end (the ratios hold up under load better than the absolute times do). Nothing here
asserts: a benchmark informs, tests decide. Run `python bench/relay.py` (or `--quick` for a short
run); see bench/README.md.

**Against a baseline.** `--baseline PATH` names another checkout with its own virtualenv (its
``.venv/bin`` holds a ``bouncerd`` and a ``bouncer-shim`` that run that checkout's code). The round
trips then run three sides in the same blocks (direct, this tree's shim and daemon, the baseline's
shim and daemon, each daemon in its own temporary BOUNCER_HOME), rotating which goes first, and the
report gives each relayed side's ratios, CPU and wake-ups, then the CPU per call this/baseline. On
a shared machine the wall-clock ratios move with the load; the CPU a call and the wake-ups are what
a change to the shim or the daemon moves. `--round-trips-only` skips start-up and the 10 MB result;
`--profile DIR` runs this tree's shim and daemon under cProfile for the round trips and prints
where each spends its time (`profile_report`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from bouncerd.client import Client as DaemonClient
from bouncerd.errors import DaemonUnavailableError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstats import child_pid, cpu_seconds, load_average, memory_mb, profile_report, shim_pid, sleeps

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "servers" / "full.py"
BARE_RELAY = Path(__file__).resolve().parent / "barerelay.py"
RAW_SERVER = REPO / "bench" / "rawserver.py"
RAW_STARTUP_REPS = 20
BIN = Path(sys.executable).parent  # the console scripts sit next to the interpreter (.venv/bin)

# Targets from the foundation issue, and for calls decided before they are asked.
TARGET_CALL_RATIO = 1.15  # median relayed call ≤ 1.15 × median direct call
TARGET_P99_RATIO = 1.5  # p99 relayed call ≤ 1.5 × p99 direct call
TARGET_READ_RATIO = 1.10  # a read-only call (the fast path): median ≤ 1.10 × direct
TARGET_READ_P99_RATIO = 1.3  # ... and p99 ≤ 1.3 × direct
TARGET_SEND_RATIO = 1.5  # a gated send (the sink gate's round trip): median ≤ 1.5 × direct
# The gated send goes to an address the bench's policy trusts, so it is allowed through the gate.
TRUSTED_ADDRESS = "team@corp.example"
BENCH_POLICY = f"""tools:
  send_message:
    exfiltrating: true
    sink_params: [to]
    trusted_destinations: [{TRUSTED_ADDRESS}]
"""
TARGET_SHIM_RSS_MB = 30.0  # the shim's peak resident memory
TARGET_STARTUP_EXTRA_MS = 80.0  # start-up to the first tools/list ≤ direct + 80 ms
TARGET_RELAY_MB_PER_S = 200.0  # a 10 MB result relayed at ≥ 200 MB/s

# Full run: 1000 calls a side is enough for a stable p99 (ten samples above it). Blocks of 50 keep
# each side's run short enough that slow drifts (thermal, other jobs) hit both sides alike.
CALLS = 1000
QUICK_CALLS = 200
BLOCK = 50
# Calls before timing starts, per side: imports, first-call caches and the daemon's pin bookkeeping.
WARMUP_CALLS = 50
# Start-ups are expensive (a Python server process each); 10 a side gives a usable median.
STARTUP_REPS = 10
QUICK_STARTUP_REPS = 3
BIG_BYTES = 10_000_000
BIG_REPS = 7  # the relay rate is a difference of two medians: with 3 a side it swung 144-646 MB/s
QUICK_BIG_REPS = 1
MB = 1_000_000
# Bounds only (a daemon that never comes up must not hang the bench).
DAEMON_START_TIMEOUT = 15.0
DAEMON_STOP_TIMEOUT = 10.0


# ---- the daemon ------------------------------------------------------------------------------------


def profiled(script: Path, profile: Path | None) -> list[str]:
    """The argv that runs a console script, under cProfile writing `profile` when one is given."""
    if profile is None:
        return [str(script)]
    return [sys.executable, "-m", "cProfile", "-o", str(profile), str(script)]


@contextmanager
def daemon(home: Path, bindir: Path = BIN, profile: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """`bouncerd --foreground` from `bindir` with BOUNCER_HOME=home, serving until the block ends."""
    env = {**os.environ, "BOUNCER_HOME": str(home)}
    env.pop("BOUNCER_SESSION", None)
    log = (home / "bouncerd.stderr").open("ab")
    argv = [*profiled(bindir / "bouncerd", profile), "--foreground"]
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    log.close()
    try:
        deadline = time.monotonic() + DAEMON_START_TIMEOUT
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"bouncerd exited with {proc.returncode}; see {home / 'bouncerd.stderr'}")
            try:
                with DaemonClient.connect(home / "run" / "bouncerd.sock", timeout=1.0) as probe:
                    probe.request("ping")
                break
            except DaemonUnavailableError:
                if time.monotonic() > deadline:
                    raise SystemExit("bouncerd did not answer in time") from None
                time.sleep(0.02)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(DAEMON_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def server_params(
    home: Path, *, through_shim: bool, bindir: Path = BIN, profile: Path | None = None
) -> StdioServerParameters:
    # The same environment both ways; the shim must use the daemon started here, never start one.
    # The server is this tree's fixture under this interpreter on every side, the baseline's too.
    env = {"BOUNCER_HOME": str(home), "BOUNCER_NO_AUTOSTART": "1"}
    if not through_shim:
        return StdioServerParameters(command=sys.executable, args=[str(FIXTURE)], env=env)
    command, *first = profiled(bindir / "bouncer-shim", profile)
    args = [*first, "--name", "bench", "--", sys.executable, str(FIXTURE)]
    return StdioServerParameters(command=command, args=args, env=env)


@asynccontextmanager
async def connected(params: StdioServerParameters) -> AsyncIterator[Client]:
    async with Client(params, mode="legacy", cache=None) as client:
        yield client


# ---- statistics ------------------------------------------------------------------------------------


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


def mark(ok: bool) -> str:
    return "met" if ok else "MISSED"


@dataclass
class Report:
    lines: list[str]

    def add(self, line: str = "") -> None:
        self.lines.append(line)
        print(line, flush=True)


# ---- the three measurements ------------------------------------------------------------------------


@dataclass(frozen=True)
class CallKind:
    """One kind of tools/call timed direct against relayed, with the targets it is held to."""

    title: str
    tool: str
    arguments: dict[str, str]
    median_target: float
    p99_target: float | None


CALL_KINDS = (
    CallKind("read-only call (read_inbox: decided before it is asked)", "read_inbox", {}, TARGET_READ_RATIO,
             TARGET_READ_P99_RATIO),
    CallKind("call that takes the round trip (weather: no reading verb, so the backstop reads it)",
             "weather", {"city": "Paris"}, TARGET_CALL_RATIO, TARGET_P99_RATIO),
    CallKind("gated send (send_message to a trusted address)", "send_message",
             {"to": TRUSTED_ADDRESS, "body": "the minutes"}, TARGET_SEND_RATIO, None),
)  # fmt: skip


async def timed_calls(client: Client, kind: CallKind, count: int, sink: list[float]) -> None:
    for _ in range(count):
        start = time.perf_counter()
        await client.call_tool(kind.tool, kind.arguments)
        sink.append((time.perf_counter() - start) * 1000.0)


async def budgeted(
    client: Client,
    kind: CallKind,
    count: int,
    sink: list[float],
    server: int | None,
    budget: dict[str, list[float]],
) -> None:
    """`timed_calls`, adding the CPU the client (this process: it runs one side's calls at a time) and
    the server spent to `budget[kind.tool]`."""
    before = time.process_time(), cpu_seconds(server)
    await timed_calls(client, kind, count, sink)
    spent = budget.setdefault(kind.tool, [0.0, 0.0])
    spent[0] += time.process_time() - before[0]
    spent[1] += cpu_seconds(server) - before[1]


def fast_records(home: Path) -> int:
    """Calls the audit log records as forwarded on the fast path (docs/how-it-works.md)."""
    try:
        lines = (home / "state" / "audit.jsonl").read_bytes().splitlines()
    except FileNotFoundError:
        return 0
    return sum(1 for line in lines if b'"fast_path"' in line)


@dataclass
class Relayed:
    """One relayed side of the round trips: the shim and daemon of one tree, and what they cost."""

    label: str
    home: Path
    bindir: Path
    daemon_pid: int | None  # None: the floor (bench/barerelay.py), which has no daemon
    shim: int | None = None
    server: int | None = None  # the fixture server behind this side's shim (or bare relay)
    times: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)  # tool -> [shim, daemon] CPU seconds
    budget: dict[str, list[float]] = field(default_factory=dict)  # tool -> [client, server] CPU seconds
    waits: dict[str, list[int]] = field(default_factory=dict)  # tool -> [shim, daemon] sleeps
    fast: int = 0
    memory: tuple[float, float] | None = None
    profile: Path | None = None  # a directory: the shim and the daemon run under cProfile, written there

    @property
    def floor(self) -> bool:
        return self.daemon_pid is None

    def params(self) -> StdioServerParameters:
        if self.floor:
            env = {"BOUNCER_HOME": str(self.home), "BOUNCER_NO_AUTOSTART": "1"}
            return StdioServerParameters(
                command=sys.executable, args=[str(BARE_RELAY), sys.executable, str(FIXTURE)], env=env
            )
        shim = self.profile / "bouncer-shim.prof" if self.profile is not None else None
        return server_params(self.home, through_shim=True, bindir=self.bindir, profile=shim)

    async def timed(self, client: Client, kind: CallKind, count: int) -> None:
        before = cpu_seconds(self.shim), cpu_seconds(self.daemon_pid)
        slept = sleeps(self.shim), sleeps(self.daemon_pid)
        await budgeted(client, kind, count, self.times.setdefault(kind.tool, []), self.server, self.budget)
        cpu = self.cpu.setdefault(kind.tool, [0.0, 0.0])
        cpu[0] += cpu_seconds(self.shim) - before[0]
        cpu[1] += cpu_seconds(self.daemon_pid) - before[1]
        waits = self.waits.setdefault(kind.tool, [0, 0])
        waits[0] += sleeps(self.shim) - slept[0]
        waits[1] += sleeps(self.daemon_pid) - slept[1]

    def cpu_us(self, tool: str) -> tuple[float, float]:
        """(shim, daemon) CPU µs a call over the timed calls of `tool`."""
        shim, daemon = self.cpu[tool]
        calls = len(self.times[tool])
        return shim * 1e6 / calls, daemon * 1e6 / calls


async def round_trips(sides: list[Relayed], calls: int, report: Report) -> list[bool]:
    """The three kinds of call, direct against every relayed side; targets are counted for the first."""
    direct_times: dict[str, list[float]] = {k.tool: [] for k in CALL_KINDS}
    direct_budget: dict[str, list[float]] = {}  # tool -> [client, server] CPU seconds
    async with AsyncExitStack() as stack:
        d = await stack.enter_async_context(connected(server_params(sides[0].home, through_shim=False)))
        relayed = [await stack.enter_async_context(connected(side.params())) for side in sides]
        for client in (d, *relayed):
            await client.list_tools()  # pins the tools (first use) before any call
            for kind in CALL_KINDS:
                check = await client.call_tool(kind.tool, kind.arguments)
                if check.is_error:  # a refused call would time the deny path, not the relay
                    raise SystemExit(f"the bench's {kind.tool} call was refused: {check.content}")
                await timed_calls(client, kind, WARMUP_CALLS, [])
        direct_server = child_pid(FIXTURE)
        for side in sides:
            side.shim = child_pid(BARE_RELAY) if side.floor else shim_pid(side.bindir)
            side.server = child_pid(FIXTURE, side.shim) if side.shim is not None else None
            side.fast = -fast_records(side.home)
        blocks = max(1, calls // BLOCK)
        count = BLOCK if calls >= BLOCK else calls
        for i in range(blocks):
            for kind in CALL_KINDS:
                # Every side once a block, and which goes first rotates, so a drift hits all alike.
                order: list[Relayed | None] = [None, *sides]
                shift = i % len(order)
                for turn in order[shift:] + order[:shift]:
                    if turn is None:
                        await budgeted(d, kind, count, direct_times[kind.tool], direct_server, direct_budget)
                    else:
                        await turn.timed(relayed[sides.index(turn)], kind, count)
        for side in sides:
            side.memory = memory_mb(side.shim) if side.shim is not None else None
        await anyio.sleep(0.5)  # the last records reach the audit log off the client's path
        for side in sides:
            side.fast += fast_records(side.home)
    met: list[bool] = []
    for kind in CALL_KINDS:
        direct = direct_times[kind.tool]
        report.add(f"{kind.title}, {len(direct)} calls a side, interleaved in blocks of {BLOCK}:")
        report.add(f"  direct     median {median(direct):7.3f} ms   p99 {p99(direct):7.3f} ms")
        for n, side in enumerate(sides):
            times = side.times[kind.tool]
            ratio = median(times) / median(direct)
            tail = p99(times) / p99(direct)
            indent = "  " if len(sides) == 1 else "    "
            if len(sides) > 1:
                report.add(f"  {side.label}:")
            report.add(f"{indent}via shim   median {median(times):7.3f} ms   p99 {p99(times):7.3f} ms")
            report.add(f"{indent}ratio      median {ratio:7.3f}x     p99 {tail:7.3f}x")
            if side.floor:
                added = (median(times) - median(direct)) * 1000.0
                relay_cpu = side.cpu_us(kind.tool)[0]
                report.add(
                    f"{indent}the floor adds {added:.0f} µs a call; the bare relay's CPU {relay_cpu:.0f} µs"
                )
                continue
            ok = ratio <= kind.median_target
            report.add(f"{indent}target: median ≤ {kind.median_target:.2f}x direct ... {mark(ok)}")
            if n == 0:
                met.append(ok)
            if kind.p99_target is not None:
                ok = tail <= kind.p99_target
                report.add(f"{indent}target: p99 ≤ {kind.p99_target:.2f}x direct ... {mark(ok)}")
                if n == 0:
                    met.append(ok)
            shim_cpu, daemon_cpu = side.cpu_us(kind.tool)
            added = (median(times) - median(direct)) * 1000.0
            report.add(
                f"{indent}where the added {added:.0f} µs a call go: shim CPU {shim_cpu:.0f} µs, daemon CPU "
                f"{daemon_cpu:.0f} µs a call (/proc, over the relayed blocks; the daemon's includes indexing "
                "the output); the rest is waiting for processes to be woken and scheduled"
            )
            client_cpu, server_cpu = (c * 1e6 / len(times) for c in side.budget[kind.tool])
            direct_client, direct_server_cpu = (c * 1e6 / len(direct) for c in direct_budget[kind.tool])
            whole, whole_direct = (
                client_cpu + server_cpu + shim_cpu + daemon_cpu,
                direct_client + direct_server_cpu,
            )
            report.add(
                f"{indent}CPU a call, every process: direct {whole_direct:.0f} µs (client "
                f"{direct_client:.0f}, server {direct_server_cpu:.0f}); via shim {whole:.0f} µs (client "
                f"{client_cpu:.0f}, server {server_cpu:.0f}, shim {shim_cpu:.0f}, daemon {daemon_cpu:.0f}), "
                f"on {os.cpu_count()} CPUs"
            )
            shim_sleeps, daemon_sleeps = (w / len(times) for w in side.waits[kind.tool])
            report.add(
                f"{indent}wake-ups a call: shim {shim_sleeps:.1f}, daemon {daemon_sleeps:.1f} (times each "
                "went to sleep, /proc voluntary context switches; a direct call wakes the client and the "
                "server once)"
            )
    for n, side in enumerate(sides):
        if side.floor:
            continue
        total = sum(len(t) for t in side.times.values())
        label = "" if len(sides) == 1 else f"{side.label}: "
        report.add(f"{label}calls forwarded on the fast path (audit records): {side.fast} of {total} relayed")
        if side.memory is None:
            report.add(f"  {label}shim memory: not measured (needs Linux /proc)")
            continue
        rss, peak = side.memory
        report.add(f"  {label}shim memory after the calls: RSS {rss:.1f} MB, peak {peak:.1f} MB")
        report.add(f"  target: peak ≤ {TARGET_SHIM_RSS_MB:.0f} MB ... {mark(peak <= TARGET_SHIM_RSS_MB)}")
        if n == 0:
            met.append(peak <= TARGET_SHIM_RSS_MB)
    compared = [side for side in sides if not side.floor]
    if len(compared) > 1:
        this, base = compared[0], compared[1]
        report.add(f"CPU a call, {this.label} / {base.label} (shim, daemon):")
        for kind in CALL_KINDS:
            (ts, td), (bs, bd) = this.cpu_us(kind.tool), base.cpu_us(kind.tool)
            report.add(
                f"  {kind.tool:13} shim {ts:4.0f} / {bs:4.0f} µs ({ts / bs if bs else 0:.2f}x)   "
                f"daemon {td:4.0f} / {bd:4.0f} µs ({td / bd if bd else 0:.2f}x)"
            )
    return met


async def time_startup(params: StdioServerParameters) -> float:
    start = time.perf_counter()
    async with connected(params) as client:
        await client.list_tools()
        elapsed = (time.perf_counter() - start) * 1000.0
    return elapsed


async def startup(home: Path, reps: int, report: Report) -> bool:
    direct: list[float] = []
    relayed: list[float] = []
    await time_startup(server_params(home, through_shim=True))  # warm the page cache and the daemon
    for i in range(reps):
        pairs: list[tuple[bool, list[float]]] = [(False, direct), (True, relayed)]
        if i % 2:
            pairs.reverse()
        for through_shim, sink in pairs:
            sink.append(await time_startup(server_params(home, through_shim=through_shim)))
    return startup_report(
        report, f"start-up to the first tools/list result, {reps} a side, daemon running:", direct, relayed
    )


def startup_report(report: Report, heading: str, direct: list[float], relayed: list[float]) -> bool:
    extra = median(relayed) - median(direct)
    report.add(heading)
    for side, samples in (("direct  ", direct), ("via shim", relayed)):
        spread = f"(min {min(samples):.1f}, max {max(samples):.1f})"
        report.add(f"  {side}   median {median(samples):7.1f} ms   {spread}")
    report.add(f"  extra      {extra:+7.1f} ms")
    report.add(f"  target: ≤ +{TARGET_STARTUP_EXTRA_MS:.0f} ms ... {mark(extra <= TARGET_STARTUP_EXTRA_MS)}")
    return extra <= TARGET_STARTUP_EXTRA_MS


def raw_startup_ms(home: Path, *, through_shim: bool) -> float:
    """Spawn → initialize → tools/list result, raw lines, with the standard-library server."""
    server = [sys.executable, str(RAW_SERVER)]
    argv = [str(BIN / "bouncer-shim"), "--name", "bench-raw", "--", *server] if through_shim else server
    env = {**os.environ, "BOUNCER_HOME": str(home), "BOUNCER_NO_AUTOSTART": "1"}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"{argv[0]} closed its stdout before answering tools/list")
        if json.loads(line).get("id") == 2:
            break
    elapsed = (time.perf_counter() - start) * 1000.0
    proc.stdin.close()
    proc.wait(DAEMON_STOP_TIMEOUT)
    proc.stdout.close()
    return elapsed


def raw_startup(home: Path, reps: int, report: Report) -> bool:
    direct: list[float] = []
    relayed: list[float] = []
    raw_startup_ms(home, through_shim=True)  # warm the page cache
    for i in range(reps):
        order = [(False, direct), (True, relayed)] if i % 2 == 0 else [(True, relayed), (False, direct)]
        for through_shim, sink in order:
            sink.append(raw_startup_ms(home, through_shim=through_shim))
    return startup_report(
        report, f"the same with a standard-library server and raw lines, {reps} a side:", direct, relayed
    )


async def big_result(home: Path, reps: int, size: int, report: Report) -> bool:
    direct: list[float] = []
    relayed: list[float] = []
    async with (
        connected(server_params(home, through_shim=False)) as d,
        connected(server_params(home, through_shim=True)) as s,
    ):
        for client in (d, s):
            await client.list_tools()
            await client.call_tool("big", {"size": 1000})
        for i in range(reps):
            order: list[tuple[Client, list[float]]] = [(d, direct), (s, relayed)]
            if i % 2:
                order.reverse()
            for client, sink in order:
                start = time.perf_counter()
                result = await client.call_tool("big", {"size": size})
                sink.append(time.perf_counter() - start)
                text = getattr(result.content[0], "text", "")
                if len(text) != size:
                    raise SystemExit(f"the {size}-byte result arrived with {len(text)} bytes")
    t_direct, t_relayed = median(direct), median(relayed)
    added = t_relayed - t_direct
    relay_rate = size / MB / added if added > 0 else float("inf")
    report.add(f"one {size / MB:.0f} MB tool result, {reps} a side:")
    report.add(f"  direct     {t_direct * 1000:8.1f} ms   {size / MB / t_direct:7.1f} MB/s end to end")
    report.add(f"  via shim   {t_relayed * 1000:8.1f} ms   {size / MB / t_relayed:7.1f} MB/s end to end")
    report.add(f"  relay      {added * 1000:+8.1f} ms   {relay_rate:7.1f} MB/s (bytes / time the shim added)")
    ok = relay_rate >= TARGET_RELAY_MB_PER_S
    report.add(f"  target: relayed at ≥ {TARGET_RELAY_MB_PER_S:.0f} MB/s ... {mark(ok)}")
    return ok


# ---- main ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short run (fewer calls and repetitions)")
    parser.add_argument(
        "--calls", type=int, help=f"timed calls a side (default {CALLS}, quick {QUICK_CALLS})"
    )
    parser.add_argument("--startup-reps", type=int, help=f"start-ups a side (default {STARTUP_REPS})")
    parser.add_argument("--big-reps", type=int, help=f"10 MB calls a side (default {BIG_REPS})")
    parser.add_argument("--big-bytes", type=int, default=BIG_BYTES, help="size of the big result")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (with its .venv) whose shim and daemon run interleaved with this tree's",
    )
    parser.add_argument("--round-trips-only", action="store_true", help="skip start-up and the 10 MB result")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="add a side through bench/barerelay.py, a relay that only copies bytes: what any process in "
        "the path costs on this machine",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="run this tree's shim and daemon under cProfile (round trips only), write the profiles to DIR "
        "and print where each spends its time",
    )
    ns = parser.parse_args(argv)
    if ns.profile is not None:
        ns.round_trips_only = True
        ns.profile.mkdir(parents=True, exist_ok=True)
        for stale in ("bouncerd.prof", "bouncer-shim.prof"):
            (ns.profile / stale).unlink(missing_ok=True)
    calls = ns.calls or (QUICK_CALLS if ns.quick else CALLS)
    startup_reps = ns.startup_reps or (QUICK_STARTUP_REPS if ns.quick else STARTUP_REPS)
    big_reps = ns.big_reps or (QUICK_BIG_REPS if ns.quick else BIG_REPS)
    trees = [("this tree", BIN)]
    if ns.baseline is not None:
        bindir = ns.baseline.resolve() / ".venv" / "bin"
        if not (bindir / "bouncerd").exists() or not (bindir / "bouncer-shim").exists():
            parser.error(f"--baseline {ns.baseline}: no bouncerd and bouncer-shim in {bindir}")
        trees.append((f"baseline {ns.baseline}", bindir))
    report = Report([])
    homes: list[Path] = []

    async def run_all(sides: list[Relayed]) -> list[bool]:
        met = await round_trips(sides, calls, report)
        report.add()
        if ns.round_trips_only:
            return met
        home = sides[0].home  # start-up and the big result: this tree only
        met.append(await startup(home, startup_reps, report))
        met.append(raw_startup(home, RAW_STARTUP_REPS if not ns.quick else 5, report))
        report.add()
        met.append(await big_result(home, big_reps, ns.big_bytes, report))
        report.add()
        return met

    try:
        with ExitStack() as stack:
            sides: list[Relayed] = []
            for label, bindir in trees:
                home = Path(tempfile.mkdtemp(prefix="bb", dir="/tmp"))  # short: AF_UNIX path limit
                homes.append(home)
                (home / "config").mkdir(mode=0o700)
                (home / "config" / "policy.yaml").write_text(BENCH_POLICY)
                (home / "config" / "policy.yaml").chmod(0o600)
                profile = ns.profile if not sides else None  # this tree's side only
                daemon_profile = profile / "bouncerd.prof" if profile is not None else None
                proc = stack.enter_context(daemon(home, bindir, daemon_profile))
                sides.append(Relayed(label, home, bindir, proc.pid, profile=profile))
            if ns.floor:
                sides.append(Relayed("floor: bench/barerelay.py, bytes only", sides[0].home, BIN, None))
            cpus = os.cpu_count()
            report.add(f"bench/relay.py: Python {sys.version.split()[0]}, {cpus} CPUs, {sys.platform}")
            report.add(f"at the start: {load_average()}")
            report.add()
            met = anyio.run(run_all, sides)
            report.add(f"at the end: {load_average()}")
            report.add(f"targets met: {sum(met)} of {len(met)}")
        if ns.profile is not None:  # the daemon writes its profile as it exits, at the end of the block
            relayed = sum(len(t) for t in sides[0].times.values()) + (WARMUP_CALLS + 1) * len(CALL_KINDS)
            report.add()
            report.add(f"profiles in {ns.profile} (python -m pstats FILE to explore):")
            for name in ("bouncerd.prof", "bouncer-shim.prof"):
                profile_report(ns.profile / name, relayed, report.add)
    finally:
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
