"""What a closed connection leaves in the daemon: RSS growth per connection, by kind of connection.

Starts a daemon of its own (bench/daemonproc.py), warms it up, then opens and closes N connections of
each kind, one after another, and prints the daemon's RSS growth per connection: a bouncerctl ping
(the baseline: nothing is kept for it), a shim of one session (a new instance each time: its dedup
entry stays until the session is archived), and a shim that sends a 300 KB observation (its frame
buffer must be freed with it). Nothing asserts; the figures are the point.

Run ``python bench/connections.py`` (``--connections``).
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from daemonproc import start_daemon

from bouncerd.client import Client

PAYLOAD = (
    b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"' + b"a b c " * 50_000 + b'"}]}}'
)
SETTLE_SECONDS = 2.0  # let the daemon index and free what it was sent before RSS is read


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit(f"no RSS for pid {pid}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--connections", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bconn", dir="/tmp") as tmp:
        proc, sock = start_daemon(Path(tmp))
        try:

            def ctl(i: int) -> None:
                with Client.connect(sock, role="ctl") as c:
                    c.request("ping")

            def shim(i: int) -> None:
                with Client.connect(
                    sock, role="shim", session="bench", server="m", upstream=["m"], instance=f"s{i}"
                ) as c:
                    c.request("tools", tools=[{"name": "t", "inputSchema": {"type": "object"}}])

            def observer(i: int) -> None:
                with Client.connect(
                    sock, role="shim", session="bench", server="m", upstream=["m"], instance=f"o{i}"
                ) as c:
                    fields = {"kind": "result", "method": "tools/call", "tool": "t", "request_id": 1}
                    c.request("observe", seq=1, payload=PAYLOAD, **fields)

            kinds: list[tuple[str, Callable[[int], None]]] = [
                ("bouncerctl ping (baseline)", ctl),
                ("shim, one session", shim),
                ("shim with a 300 KB observation", observer),
            ]
            for _, run in kinds:  # warm-up: imports, caches, the session
                for i in range(20):
                    run(-1 - i)
            time.sleep(SETTLE_SECONDS)
            print(f"daemon RSS growth per closed connection, {args.connections} each (KB)")
            for name, run in kinds:
                before = rss_kb(proc.pid)
                for i in range(args.connections):
                    run(i)
                time.sleep(SETTLE_SECONDS)
                print(f"  {name:<34} {(rss_kb(proc.pid) - before) / args.connections:8.2f}")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
