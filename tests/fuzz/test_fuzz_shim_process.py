"""The real shim process over hostile client bytes and hostile server bytes, with a real daemon.

One `bouncer-shim` runs for the whole test in front of tests/fuzz/upstream.py (which logs every line
it receives), against a real `bouncerd` whose policy forbids the tool ``forbidden`` (``max_calls: 0``).
Each generated example writes hostile client lines (jsonish.py: truncated, huge ids, non-finite
numbers, lone surrogates, deep nesting, wrong types, batches, repeated keys, escaped spellings of
``forbidden``), then a call to ``emit`` that makes the server write generated hostile lines, then a
counted call ``fz-N`` to ``safe``, and waits for the counted call's answer. Invariants:

- the shim never exits (the attack: one bad line stops the server and every call in flight
  item 1), and each counted call is answered, exactly once;
- nothing unallowed reaches the server: no line the server logged is, under either reading of a
  repeated key, a ``tools/call`` of ``forbidden``;
- no traceback in the daemon's log or the shim's stderr, and the daemon still answers.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _counts import ran
from fuzzd import BIN, FuzzDaemon, short_home, start_daemon, stop_daemon
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonish import SENTINEL, lines

pytestmark = pytest.mark.e2e

UPSTREAM = Path(__file__).resolve().parent / "upstream.py"
POLICY = "version: 1\ntools:\n  forbidden:\n    max_calls: 0\n"
EXAMPLES = 120
# A bound, not an expectation: a counted call is answered in milliseconds; this only turns a lost
# answer into a failure instead of a hang.
ANSWER_TIMEOUT_SECONDS = 20.0


class ShimProcess:
    def __init__(self, daemon: FuzzDaemon) -> None:
        home = daemon.home
        self.log = home / "upstream.log"
        self.stderr_path = home / "shim.stderr"
        env = {
            **os.environ,
            "BOUNCER_HOME": str(home),
            "BOUNCER_NO_AUTOSTART": "1",
            "BOUNCER_NO_NOTIFY": "1",
            "BOUNCER_SESSION": "fuzz",
            "UPSTREAM_LOG": str(self.log),
        }
        argv = [str(BIN / "bouncer-shim"), "--name", "fuzz", "--", sys.executable, str(UPSTREAM)]
        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.fd = self.proc.stdout.fileno()
        self.buf = b""
        self.answers: Counter[str] = Counter()

    def write(self, data: bytes) -> None:
        self.stdin.write(data + b"\n")
        self.stdin.flush()

    def call(self, rid: str, tool: str, arguments: dict[str, Any]) -> None:
        params = {"name": tool, "arguments": arguments}
        self.write(
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()
        )

    def read_until(self, rid: str) -> None:
        deadline = time.monotonic() + ANSWER_TIMEOUT_SECONDS
        while not self.answers[rid]:
            left = deadline - time.monotonic()
            assert left > 0, (
                f"no answer to {rid}; shim stderr:\n{self.stderr_path.read_text(errors='replace')}"
            )
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                chunk = os.read(self.fd, 1 << 20)
                assert chunk, f"the shim closed its output (exit {self.proc.wait()})"
                self.take(chunk)

    def take(self, chunk: bytes) -> None:
        self.buf += chunk
        *complete, self.buf = self.buf.split(b"\n")
        for data in complete:
            try:
                message = json.loads(data)
            except (ValueError, RecursionError):
                continue  # server output relayed as it came
            rid = message.get("id") if isinstance(message, dict) else None
            if isinstance(rid, str) and rid.startswith(SENTINEL) and "method" not in message:
                self.answers[rid] += 1

    def finish(self) -> int:
        self.stdin.close()
        assert self.proc.stdout is not None
        with self.proc.stdout:
            self.take(self.proc.stdout.read() + b"\n")
        return self.proc.wait(10)


def keep_first(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        out.setdefault(k, v)
    return out


def forbidden_calls(log: Path) -> list[bytes]:
    found = []
    for data in log.read_bytes().splitlines():
        for hook in (None, keep_first):
            try:
                message = json.loads(data, object_pairs_hook=hook)
            except (ValueError, RecursionError):
                continue
            if isinstance(message, dict) and message.get("method") == "tools/call":
                params = message.get("params")
                if isinstance(params, dict) and params.get("name") == "forbidden":
                    found.append(data[:200])
    return found


def test_shim_process_survives_hostile_client_and_server_bytes_and_forwards_nothing_forbidden() -> None:
    home = short_home()
    daemon = start_daemon(home, POLICY)
    shim = ShimProcess(daemon)
    try:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "fz", "version": "1"},
        }
        shim.write(
            json.dumps(
                {"jsonrpc": "2.0", "id": f"{SENTINEL}init", "method": "initialize", "params": init}
            ).encode()
        )
        shim.read_until(f"{SENTINEL}init")
        shim.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        shim.call(f"{SENTINEL}control", "forbidden", {})  # the control: the policy does refuse it
        shim.read_until(f"{SENTINEL}control")
        counter = iter(range(10**9))

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        @given(client=st.lists(lines(), max_size=6), server=st.lists(lines(), max_size=4))
        def one(client: list[bytes], server: list[bytes]) -> None:
            ran("shim process (client and server bytes)")
            n = next(counter)
            for data in client:
                shim.write(data)
            shim.call(f"{SENTINEL}e{n}", "emit", {"hex": b"\n".join(server).hex()})
            shim.call(f"{SENTINEL}{n}", "safe", {"n": n})
            shim.read_until(f"{SENTINEL}{n}")
            assert shim.proc.poll() is None, f"the shim exited with {shim.proc.returncode}"

        one()
        total = next(counter)
        status = shim.finish()
        assert status == 0, f"the shim exited {status}: {shim.stderr_path.read_text(errors='replace')}"
        counted = {rid: k for rid, k in shim.answers.items() if rid[len(SENTINEL) :].isdigit()}
        assert counted == {f"{SENTINEL}{n}": 1 for n in range(total)}, (
            "each counted call answered exactly once"
        )
        assert shim.answers[f"{SENTINEL}control"] == 1
        assert forbidden_calls(shim.log) == [], "a forbidden call reached the server"
        assert "Traceback" not in shim.stderr_path.read_text(errors="replace")
        assert daemon.alive(), "the daemon stopped answering"
        assert "Traceback" not in daemon.stderr(), daemon.stderr()[-3000:]
    finally:
        if shim.proc.poll() is None:
            shim.proc.kill()
            shim.proc.wait()
        for pipe in (shim.proc.stdin, shim.proc.stdout):
            if pipe is not None:
                pipe.close()
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)
