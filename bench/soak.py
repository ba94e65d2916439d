"""The fault campaign: N shims, M calls, K `kill -9`s of bouncerd, and upstream servers that misbehave.

Theory of operation
-------------------
The bench makes a temporary BOUNCER_HOME under /tmp with a policy (a gated send tool that trusts one
address, a write tool confined to one directory) and starts N clients. Each client is a thread that
drives one real `bouncer-shim` over its stdin/stdout with raw JSON-RPC lines (no SDK: the bench
measures the shim and the daemon, not pydantic), in front of bench/soak_server.py. No daemon is
started by the bench: the shims autostart it, as they would for a user without systemd. Each client
has its own session (BOUNCER_SESSION) and first reads an inbox that names the attacker's address.

Every call carries a nonce unique in the run. The mix (per call, at random from a seeded PRNG):
allowed calls (echo, a send to the trusted address, a write inside the prefix); must-deny calls (a
send to the attacker's address, which the session saw in the inbox; a write outside the prefix);
and upstream faults: the server kills itself mid-call (the shim exits with it and the client starts
a new one), writes garbage lines around its answer, or answers slowly.

Meanwhile a killer thread sends SIGKILL to the daemon K times, spread over the run by the number of
calls decided, each time waiting until some shim has brought a daemon back before the next kill.
Then (unless turned off) it freezes the daemon with SIGSTOP for ``--stop-seconds`` (a daemon alive but
not answering: every wait must end within its bound, and no call refused then may be forwarded once
it answers again), and damages its journal (a flipped byte in the first record, written while the
daemon is stopped, then SIGKILL): the daemon a shim starts next must come up restricted, and the
bench then accepts the loss and the tools as a person would (``pins_accept``, ``accept_loss``).
Refusals inside those steps (the shim's "did not answer in time" and "could not record", as well as
"unreachable") are counted as refusal windows of the step, apart from the kills' windows, which keep
their target; the longest wait of any call is printed with them.

At the end the bench (soak_reckon.py) reads what the servers recorded (soak_server.py appends one
line per call it received, before handling it) and the daemon's audit log, and prints:

- calls reached without allow: nonces a server recorded that have no ``allow`` audit record;
- must-deny reached: nonces of must-deny calls a server recorded;
- audit lines lost: calls the client saw decided by the daemon (a result, or a refusal that is not
  the shim's own "unreachable") with no audit record of their nonce; torn: lines that do not parse,
  plus torn tails the daemon set aside; and the chain as `bouncerctl audit verify` judges it;
- unanswered: requests that got no answer (a ``die`` call is the only one allowed none);
- refusal windows: per client, the longest run of "bouncerd is unreachable" refusals, from the first
  refused call to the next call the daemon decided (the client retries every REFUSED_RETRY_SECONDS);
- daemon RSS after warm-up and at the end (and of each daemon just before it was killed);
- allowed answers the server never saw: results a client got for a call no server recorded;
- tracebacks in the daemon's log and the shims' stderr.

Then one line: PASS or FAIL against the targets (0 reached without allow, 0 must-deny reached, 0 lost
or torn, 0 unanswered, longest refusal window ≤ 5 s; and no made-up results, no tracebacks). Nothing
here asserts; the figures are the point. RSS "at the end" is of the last daemon, a process started
after the last kill, so it says little about growth; the week-long memory figure is another bench's.

Run ``python bench/soak.py`` (defaults: 10 shims, 20,000 calls, 3 kills); ``--quick`` for a short run;
``--fuzz-counts`` runs the fuzz tests in tests/fuzz and prints their per-target counts instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bouncer_shim.jsonrpc import (
    BLOCKED_PREFIX,
    LOST_REASON,
    NOT_ANSWERING_REASON,
    UNREACHABLE_REASON,
    UNRECORDED_REASON,
)
from bouncer_shim.sync import VERDICT_WAIT_SECONDS
from soak_reckon import MUST_DENY, Run, Stats, reckon

from bouncerd.client import Client as DaemonClient
from bouncerd.errors import BouncerError

REPO = Path(__file__).resolve().parents[1]

BIN = Path(sys.executable).parent
SERVER = REPO / "bench" / "soak_server.py"

ATTACKER = "attacker@evil.example"
TRUSTED = "ops@corp.example"
POLICY = """\
version: 1
tools:
  send_message:
    exfiltrating: true
    sink_params: [to]
    trusted_destinations: [{trusted}]
    on_tainted: deny
  write_note:
    write_params: [path]
    allowed_path_prefixes: [{notes}]
"""

# The mix of calls, as weights. Mostly allowed traffic (what a client does all day); enough must-deny
# calls that a gate failing 1 in 1000 shows; upstream faults rare enough that the run is mostly calls.
# Server deaths are rarest (a handful a run): each one brings a new shim, and a new shim may autostart
# a daemon at once, so frequent deaths would hide how long the long-lived shims stay refused.
MIX = {
    "echo": 80,
    "send_trusted": 3,
    "write_inside": 3,
    "send_attacker": 5,
    "write_outside": 5,
    "garbage": 2,
    "slow": 1.5,
    "die": 0.02,
}
SLOW_MS = (20, 400)  # a slow server, not a hung one
# A client whose call was refused because bouncerd is away retries this often: the resolution of the
# refusal windows.
REFUSED_RETRY_SECONDS = 0.1
# Bounds, not expectations: only a broken shim or daemon waits this long.
ANSWER_TIMEOUT_S = 30.0
DAEMON_UP_TIMEOUT_S = 60.0
# After a kill, the next is due no sooner than this after the daemon is back: the clients must have
# reconnected and worked a little with the new daemon, or kills would hit the same recovery.
SETTLE_AFTER_RECOVERY_S = 2.0
# Warm-up: RSS "before" is taken once this many calls were decided (imports, caches, first sessions).
WARMUP_CALLS = 500
# The freeze step's default length: longer than the shim's bound on a verdict, so it must show.
STOP_SECONDS = 15.0
# After the journal damage the bench, as a person, accepts the loss this long after the restricted
# daemon is up (calls meanwhile are refused as the restricted state says).
ACCEPT_AFTER_S = 2.0
# Where in the journal the damage step flips a byte: inside the first record's body (after the
# 8-byte header and the record's 8-byte length and checksum), where it still decodes.
DAMAGE_OFFSET = 8 + 8 + 12


# ---- one client ------------------------------------------------------------------------------------


class ShimGone(Exception):
    pass


class Shim:
    """One `bouncer-shim` in front of one soak server, spoken to with raw JSON-RPC lines."""

    def __init__(self, home: Path, index: int, start: int) -> None:
        env = {
            **os.environ,
            "BOUNCER_HOME": str(home),
            "BOUNCER_NO_NOTIFY": "1",
            "BOUNCER_SESSION": f"soak-{index}",
            "SOAK_RECORD": str(home / "records" / f"client-{index}.jsonl"),
        }
        env.pop("BOUNCER_NO_AUTOSTART", None)
        stderr = (home / "shims" / f"client-{index}-{start}.stderr").open("wb")
        argv = [str(BIN / "bouncer-shim"), "--name", "soak", "--", sys.executable, str(SERVER)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env
        )
        stderr.close()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.fd = self.proc.stdout.fileno()
        self.buf = b""
        self.next_id = 1

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = self.next_id
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
        try:
            self.stdin.write(line + b"\n")
            self.stdin.flush()
        except (BrokenPipeError, OSError):
            raise ShimGone from None
        return self._answer(rid)

    def notify(self, method: str) -> None:
        self.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.stdin.flush()

    def _answer(self, rid: int) -> dict[str, Any]:
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                try:
                    message = json.loads(line)
                except ValueError:
                    continue  # the garbage the server wrote, relayed as it is
                if isinstance(message, dict) and message.get("id") == rid and "method" not in message:
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    raise ShimGone
                self.buf += chunk

    def close(self) -> int:
        with contextlib.suppress(OSError):
            self.stdin.close()
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class Campaign:
    def __init__(
        self,
        home: Path,
        clients: int,
        calls: int,
        kills: int,
        seed: int,
        die_weight: float,
        stop_seconds: float = 0.0,
        damage: bool = False,
    ) -> None:
        self.home = home
        self.stop_seconds = stop_seconds
        self.damage = damage
        self.steps: dict[str, tuple[float, float]] = {}  # step -> (start, end) on the monotonic clock
        self.step_windows: dict[str, list[float]] = {}  # refusal windows overlapping a step
        self.longest_wait = 0.0  # the longest any tools/call waited for its answer
        self.restricted_seen: str | None = None
        self.die_weight = die_weight
        self.clients = clients
        self.calls = calls
        self.kills = kills
        self.seed = seed
        self.stats = [Stats() for _ in range(clients)]
        self.lock = threading.Lock()
        self.decided_total = 0
        self.stop = threading.Event()
        self.kill_log: list[dict[str, Any]] = []
        self.rss_before: int | None = None
        self.rss_after: int | None = None
        self.started = time.monotonic()

    # ---- the clients ---------------------------------------------------------------------------

    def client(self, index: int) -> None:
        rnd = random.Random(self.seed * 1000 + index)
        stats = self.stats[index]
        mix = {**MIX, "die": self.die_weight}
        kinds, weights = list(mix), list(mix.values())
        shim = self._start(index, stats)
        refused_since: float | None = None
        n = 0
        while not self.stop.is_set():
            kind = rnd.choices(kinds, weights)[0]
            nonce = f"c{index}-{n}"
            n += 1
            name, args = call_for(kind, nonce, self.home, rnd)
            stats.sent[kind] += 1
            if kind in MUST_DENY:
                stats.must_deny_nonces.add(nonce)
            asked = time.monotonic()
            try:
                answer = shim.request("tools/call", {"name": name, "arguments": args})
            except (ShimGone, TimeoutError) as exc:
                if kind != "die":
                    stats.unanswered.append(f"{nonce} ({kind}): {type(exc).__name__}")
                stats.shim_exits[shim.close()] += 1
                shim = self._start(index, stats)
                continue
            waited = time.monotonic() - asked
            with self.lock:
                self.longest_wait = max(self.longest_wait, waited)
            text = blocked(answer)
            if text is not None and (
                UNREACHABLE_REASON in text or NOT_ANSWERING_REASON in text or UNRECORDED_REASON in text
            ):
                stats.refused_unreachable += 1
                if refused_since is None:
                    refused_since = time.monotonic()
                time.sleep(REFUSED_RETRY_SECONDS)
                continue
            if text is not None and text.endswith(LOST_REASON):
                stats.refused_lost += 1  # this shim is done for: a new one, as a client restart would
                stats.shim_exits[shim.close()] += 1
                shim = self._start(index, stats)
                continue
            if refused_since is not None:
                self._window(stats, refused_since, time.monotonic())
                refused_since = None
            stats.decided[kind] += 1
            stats.decided_nonces.add(nonce)
            if text is None:
                stats.allowed_nonces.add(nonce)
            with self.lock:
                self.decided_total += 1
        if refused_since is not None:
            self._window(stats, refused_since, time.monotonic())
        stats.shim_exits[shim.close()] += 1

    def _window(self, stats: Stats, start: float, end: float) -> None:
        """A refusal window: the freeze's and the damage's are theirs, the rest the kills'."""
        with self.lock:
            for step, (begin, finish) in self.steps.items():
                if start <= finish and end >= begin:
                    self.step_windows.setdefault(step, []).append(end - start)
                    return
        stats.windows.append(end - start)

    def _start(self, index: int, stats: Stats) -> Shim:
        """A new shim and server, initialised, with the inbox read (the session sees the attacker)."""
        while not self.stop.is_set():
            stats.shim_starts += 1
            shim = Shim(self.home, index, stats.shim_starts)
            try:
                init = {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "soak", "version": "1"},
                }
                shim.request("initialize", init)
                shim.notify("notifications/initialized")
                shim.request("tools/list", {})
                shim.request(
                    "tools/call",
                    {"name": "inbox", "arguments": {"nonce": f"inbox{index}-{stats.shim_starts}"}},
                )
                return shim
            except (ShimGone, TimeoutError, OSError) as exc:
                stats.unanswered.append(f"start {stats.shim_starts}: {type(exc).__name__}")
                stats.shim_exits[shim.close()] += 1
                time.sleep(0.5)
        return shim

    # ---- the killer ----------------------------------------------------------------------------

    def killer(self) -> None:
        pid = self.wait_daemon(None)
        for k in range(1, self.kills + 1):
            due = self.calls * k // (self.kills + 1)
            while not self.stop.is_set() and self.decided() < due:
                if self.rss_before is None and self.decided() >= min(WARMUP_CALLS, due // 2):
                    self.rss_before = rss(pid)
                time.sleep(0.05)
            if self.stop.is_set():
                return
            if self.rss_before is None:
                self.rss_before = rss(pid)
            entry: dict[str, Any] = {"kill": k, "pid": pid, "rss": rss(pid), "at": self.elapsed()}
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            pid = self.wait_daemon(pid)
            entry["back_after_s"] = time.monotonic() - killed
            entry["new_pid"] = pid
            self.kill_log.append(entry)
            time.sleep(SETTLE_AFTER_RECOVERY_S)
        if self.stop_seconds > 0 and not self.stop.is_set():
            pid = self.freeze(pid)
        if self.damage and not self.stop.is_set():
            pid = self.damage_journal(pid)
        while not self.stop.is_set() and self.decided() < self.calls:
            time.sleep(0.05)
        self.rss_after = rss(pid)
        self.stop.set()

    def _step(self, name: str, begin: float) -> None:
        with self.lock:
            self.steps[name] = (begin, float("inf"))

    def _step_done(self, name: str) -> None:
        with self.lock:
            begin, _ = self.steps[name]
            # a refusal is the step's until the clients have had a verdict's bound to get through
            self.steps[name] = (begin, time.monotonic() + VERDICT_WAIT_SECONDS)

    def freeze(self, pid: int) -> int:
        """SIGSTOP the daemon for `stop_seconds`, then SIGCONT; return the pid serving afterwards."""
        self._step("freeze", time.monotonic())
        os.kill(pid, signal.SIGSTOP)
        time.sleep(self.stop_seconds)
        os.kill(pid, signal.SIGCONT)
        self._step_done("freeze")
        time.sleep(SETTLE_AFTER_RECOVERY_S)
        return self.wait_daemon(None)

    def damage_journal(self, pid: int) -> int:
        """Flip a byte of the stopped daemon's journal, kill it, and accept the loss once its
        successor came up restricted; return the successor's pid."""
        self._step("damage", time.monotonic())
        journal = self.home / "state" / "journal.bin"
        os.kill(pid, signal.SIGSTOP)
        data = bytearray(journal.read_bytes())
        if len(data) > DAMAGE_OFFSET:
            data[DAMAGE_OFFSET] ^= 0x20
            journal.write_bytes(bytes(data))
        os.kill(pid, signal.SIGKILL)
        pid = self.wait_daemon(pid)
        sock = self.home / "run" / "bouncerd.sock"
        with DaemonClient.connect(sock, timeout=5.0) as c:
            restricted = c.request("status")["daemon"].get("restricted")
        self.restricted_seen = restricted.get("reason") if isinstance(restricted, dict) else None
        time.sleep(ACCEPT_AFTER_S)
        with DaemonClient.connect(sock, timeout=5.0) as c:
            c.request("pins_accept", server="soak", tools=None)
            c.request("accept_loss")
        self._step_done("damage")
        time.sleep(SETTLE_AFTER_RECOVERY_S)
        return pid

    def wait_daemon(self, old: int | None) -> int:
        """The pid of a serving daemon other than `old` (started by some shim)."""
        deadline = time.monotonic() + DAEMON_UP_TIMEOUT_S
        sock = self.home / "run" / "bouncerd.sock"
        while time.monotonic() < deadline:
            try:
                with DaemonClient.connect(sock, timeout=1.0) as c:
                    pid = int(c.request("status")["daemon"]["pid"])
                if pid != old:
                    return pid
            except (BouncerError, OSError, KeyError, TypeError, ValueError):
                pass
            time.sleep(0.05)
        self.stop.set()
        raise SystemExit("no daemon came back in time; see " + str(self.home / "state" / "bouncerd.log"))

    def decided(self) -> int:
        with self.lock:
            return self.decided_total

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def call_for(kind: str, nonce: str, home: Path, rnd: random.Random) -> tuple[str, dict[str, Any]]:
    notes = home / "notes"
    if kind == "send_trusted":
        return "send_message", {"to": TRUSTED, "body": "status", "nonce": nonce}
    if kind == "send_attacker":
        return "send_message", {"to": ATTACKER, "body": "the numbers", "nonce": nonce}
    if kind == "write_inside":
        return "write_note", {"path": str(notes / f"{nonce}.txt"), "text": "x", "nonce": nonce}
    if kind == "write_outside":
        target = rnd.choice(
            [f"{home}/config/policy.yaml", "/etc/cron.d/x", f"{notes}/../escape", f"{notes}x/y"]
        )
        return "write_note", {"path": target, "text": "x", "nonce": nonce}
    if kind == "slow":
        return "slow", {"ms": rnd.randint(*SLOW_MS), "nonce": nonce}
    if kind in ("garbage", "die"):
        return kind, {"nonce": nonce}
    return "echo", {"n": rnd.random(), "nonce": nonce}


def blocked(answer: dict[str, Any]) -> str | None:
    result = answer.get("result")
    if not isinstance(result, dict) or not result.get("isError"):
        return None
    for block in result.get("content") or ():
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str) and text.startswith(BLOCKED_PREFIX):
            return text
    return None


def rss(pid: int) -> int | None:
    """Resident set size of `pid` in bytes, or None if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


# ---- main ------------------------------------------------------------------------------------------


def run_campaign(args: argparse.Namespace) -> int:
    home = Path(tempfile.mkdtemp(prefix="bsoak", dir="/tmp"))  # short: the socket path has a limit
    try:
        for sub in ("config", "records", "shims", "notes"):
            (home / sub).mkdir(mode=0o700)
        (home / "config" / "policy.yaml").write_text(POLICY.format(trusted=TRUSTED, notes=home / "notes"))
        print(
            f"soak: {args.clients} shims, {args.calls} calls, {args.kills} kills, seed {args.seed}; "
            f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; home {home}",
            flush=True,
        )
        c = Campaign(
            home,
            args.clients,
            args.calls,
            args.kills,
            args.seed,
            args.die_weight,
            stop_seconds=args.stop_seconds,
            damage=not args.no_damage,
        )
        threads = [threading.Thread(target=c.client, args=(i,), daemon=True) for i in range(args.clients)]
        for t in threads:
            t.start()
        killer_error: list[BaseException] = []

        def kill_loop() -> None:
            try:
                c.killer()
            except BaseException as exc:
                killer_error.append(exc)
                c.stop.set()

        killer = threading.Thread(target=kill_loop, daemon=True)
        killer.start()
        killer.join()
        for t in threads:
            t.join(ANSWER_TIMEOUT_S + 15)
        wall = c.elapsed()
        stop_daemon(home)
        if killer_error:
            print(f"the killer stopped: {killer_error[0]}")
        run = Run(home, c.clients, c.stats, c.kill_log, c.rss_before, c.rss_after)
        ok = reckon(run, wall) and not killer_error
        ok = report_steps(c) and ok
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


def report_steps(c: Campaign) -> bool:
    """The freeze and damage steps' figures; False if one missed its target."""
    ok = True
    print(
        f"longest wait of any call: {c.longest_wait:.2f} s (a verdict's bound: {VERDICT_WAIT_SECONDS:.0f} s)"
    )
    if c.longest_wait > VERDICT_WAIT_SECONDS + 5:
        print(f"FAIL: a call waited {c.longest_wait:.1f} s, past the verdict's bound")
        ok = False
    for step in ("freeze", "damage"):
        if step not in c.steps:
            continue
        windows = c.step_windows.get(step, [])
        print(f"{step}: refusal windows {len(windows)}, longest {max(windows, default=0.0):.2f} s")
    if "damage" in c.steps:
        print(f"damage: the next daemon came up restricted: {c.restricted_seen or 'NO'}")
        if c.restricted_seen is None:
            print("FAIL: the damaged journal did not make the next daemon restricted")
            ok = False
    return ok


def stop_daemon(home: Path) -> None:
    try:
        with DaemonClient.connect(home / "run" / "bouncerd.sock", timeout=1.0) as c:
            pid = int(c.request("status")["daemon"]["pid"])
    except (BouncerError, OSError, KeyError, TypeError, ValueError):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and rss(pid) is not None:
        time.sleep(0.05)


def fuzz_counts() -> int:
    """Run tests/fuzz and print the counts each target wrote (examples run, crashes)."""
    with tempfile.TemporaryDirectory(prefix="bfuzz", dir="/tmp") as tmp:
        out = Path(tmp) / "counts.jsonl"
        env = {**os.environ, "BOUNCER_FUZZ_COUNTS": str(out)}
        done = subprocess.run(
            [str(BIN / "pytest"), "-q", "-p", "no:randomly", str(REPO / "tests" / "fuzz")],
            env=env,
            check=False,
        )
        rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
        print(f"\n{'fuzz target':<48}  examples  crashes")
        for row in rows:
            print(f"{row['target']:<48}  {row['examples']:>8}  {row['crashes']:>7}")
        print("PASS" if done.returncode == 0 else "FAIL: a fuzz test failed (see above)")
        return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=10, help="shims at once (default 10)")
    parser.add_argument(
        "--calls", type=int, default=20_000, help="calls decided by the daemon (default 20,000)"
    )
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs of bouncerd (default 3)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--die-weight",
        type=float,
        default=MIX["die"],
        help=f"weight of server deaths in the mix (default {MIX['die']})",
    )
    parser.add_argument(
        "--stop-seconds",
        type=float,
        default=STOP_SECONDS,
        help=f"SIGSTOP the daemon this long after the kills; 0: no freeze (default {STOP_SECONDS:.0f})",
    )
    parser.add_argument("--no-damage", action="store_true", help="no journal damage step")
    parser.add_argument("--quick", action="store_true", help="4 shims, 2,000 calls, 1 kill")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home (logs, audit)")
    parser.add_argument(
        "--fuzz-counts", action="store_true", help="run tests/fuzz and print per-target counts"
    )
    args = parser.parse_args()
    if args.fuzz_counts:
        return fuzz_counts()
    if args.quick:
        args.clients, args.calls, args.kills = 4, 2000, 1
    return run_campaign(args)


if __name__ == "__main__":
    raise SystemExit(main())
