"""Audit export benchmark: verdict latency with export off, on (live collectors) and on (dead ones).

Run:  .venv/bin/python bench/export.py [--calls 2000]

Three real daemons (``bouncerd --foreground``, each in its own temporary BOUNCER_HOME) are started:

- **off**: no ``audit_export`` (the baseline);
- **on**: syslog RFC 5424 to a Unix datagram socket read by a thread of this process, and, with the
  ``otel`` extra installed, OTLP/HTTP to a local HTTP server that accepts every request;
- **dead**: the same targets, but nothing listens (the socket path and the port are closed), so every
  export fails and is counted.

One shim connection per daemon asks for verdicts on an allowed tool; the calls are interleaved (each
round asks all three, the first of a round rotating) so drift in the machine's load hits every daemon
alike; the first rounds are a warm-up and not counted. Each line gives the median, the 95th percentile
and the median as a multiple of the baseline's, then what the exporters counted (status). The figures
are printed, not asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bouncerd.client import Client
from bouncerd.errors import DaemonUnavailableError

BOUNCERD = Path(sys.executable).parent / "bouncerd"
WARM_UP_ROUNDS = 50
START_TIMEOUT_SECONDS = 15.0


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _start(home: Path, policy: str | None) -> subprocess.Popen[bytes]:
    if policy is not None:
        (home / "config").mkdir(mode=0o700)
        (home / "config" / "policy.yaml").write_text(policy)
    env = {**os.environ, "BOUNCER_HOME": str(home), "BOUNCER_NO_NOTIFY": "1"}
    log = (home / "stderr").open("wb")
    proc = subprocess.Popen([str(BOUNCERD), "--foreground"], env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            with Client.connect(home / "run" / "bouncerd.sock", timeout=1.0) as c:
                c.request("ping")
            return proc
        except DaemonUnavailableError:
            if proc.poll() is not None:
                break
            time.sleep(0.02)
    raise SystemExit(f"bouncerd did not start: {(home / 'stderr').read_text()[-2000:]}")


def _policy(syslog_path: str, otlp: str | None) -> str:
    text = f"audit_export:\n  syslog:\n    address: {syslog_path}\n"
    if otlp is not None:
        text += f"  otlp:\n    endpoint: {otlp}\n    timeout: 1\n"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="counted verdicts per daemon")
    args = parser.parse_args()
    otel = importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is not None
    root = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    procs: list[subprocess.Popen[bytes]] = []
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(root / "log"))
    received = [0]

    def drain() -> None:
        while True:
            try:
                receiver.recv(1 << 20)
            except OSError:
                return
            received[0] += 1

    threading.Thread(target=drain, daemon=True).start()
    http = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    dead_port = socket.socket()
    dead_port.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    live_otlp = f"http://127.0.0.1:{http.server_address[1]}/v1/logs" if otel else None
    dead_otlp = f"http://127.0.0.1:{dead_port.getsockname()[1]}/v1/logs" if otel else None
    configs = {
        "off": None,
        "on": _policy(str(root / "log"), live_otlp),
        "dead": _policy(str(root / "nobody"), dead_otlp),
    }
    print(f"python {sys.version.split()[0]}, otel extra {'installed' if otel else 'absent (syslog only)'}")
    clients: dict[str, Client] = {}
    try:
        for name, policy in configs.items():
            home = root / name
            home.mkdir(mode=0o700)
            procs.append(_start(home, policy))
            c = Client.connect(
                home / "run" / "bouncerd.sock", role="shim", session="b", server="n", upstream=["n"]
            )
            c.request("tools", tools=[{"name": "read_note", "inputSchema": {"type": "object"}}])
            clients[name] = c
        names = list(configs)
        times: dict[str, list[float]] = {n: [] for n in names}
        for i in range(WARM_UP_ROUNDS + args.calls):
            order = names[i % len(names) :] + names[: i % len(names)]
            for name in order:
                t0 = time.perf_counter()
                reply = clients[name].request("verdict", request_id=i, tool="read_note", arguments={"id": i})
                elapsed = time.perf_counter() - t0
                assert reply["verdict"] == "allow", reply
                if i >= WARM_UP_ROUNDS:
                    times[name].append(elapsed)
        base = statistics.median(times["off"])
        print(f"{args.calls} verdicts per daemon, interleaved; latency per verdict (socket round trip):")
        for name in names:
            t = sorted(times[name])
            med, p95 = statistics.median(t), t[int(0.95 * (len(t) - 1))]
            print(
                f"  export {name:<4}  median {med * 1e6:7.1f} us  p95 {p95 * 1e6:7.1f} us  "
                f"x{med / base:.2f} of off"
            )
        for name in ("on", "dead"):
            with Client.connect(root / name / "run" / "bouncerd.sock", role="ctl") as ctl:
                export = ctl.request("status")["daemon"]["export"]
            for t in export["targets"]:
                print(
                    f"  {name:<4} {t['target']}: sent {t['sent']}, dropped {t['dropped']} (queue full), "
                    f"failed {t['failed']}, still queued {t['queued']}"
                )
        print(f"  datagrams received by the live syslog socket: {received[0]}")
    finally:
        for c in clients.values():
            c.close()
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
        http.shutdown()
        receiver.close()
        dead_port.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
