"""A simulated week of client runs: the daemon's memory and journal must stay flat, not grow per run.

Run:  .venv/bin/python bench/week.py [--runs 40] [--day 4.0] [--days 7]

It starts its own `bouncerd` in a temporary `BOUNCER_HOME` under /tmp (removed afterwards) with a
short grace period (`BOUNCER_SESSION_GRACE_SECONDS=0.2`) and a policy whose `taint_retention` is
three quarters of a simulated day, and compresses a day into `--day` seconds of wall time. Each day,
`--runs` client runs each open a new session (one shim of a mail server): a tools/list, ten outputs
of about 2 KB that name fresh addresses (taint), a verdict on a send to one of them (denied) and one
to a clean address (asked); then the shim leaves. The runs take the first part of the day; then it
waits until every session of the day is archived and prints the daemon's resident memory (VmRSS),
the journal's size and the sessions still listed (the day's taint is within retention then, the day
before's past it). Day 1 warms the interpreter's allocator; days 2 to 7 are the figures: flat means
within 10% of their median. The journal is compacted when a rewrite drops more than the daemon's
ARCHIVE_COMPACT_MIN_BYTES (64 KiB), so between compactions it is up to that much above what it
keeps. The figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from daemonproc import start_daemon

from bouncerd.client import Client

# a bound for a stuck archive sweep, not an expectation
ARCHIVE_TIMEOUT_SECONDS = 30.0
GRACE_SECONDS = "0.2"
OUTPUTS_PER_RUN = 10
TOOLS = [
    {"name": "read_mail", "description": "Read mail", "inputSchema": {"type": "object"}},
    {
        "name": "send_mail",
        "description": "Send mail",
        "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}},
    },
]
POLICY = (
    "taint_retention: {retention}s\ntools:\n  send_mail:\n    exfiltrating: true\n    sink_params: [to]\n"
)


def _output(day: int, run: int, n: int) -> bytes:
    people = " ".join(f"p{day}x{run}x{n}x{k}@corp{k}.example" for k in range(8))
    prose = "Quarterly figures attached, see the thread below for context. " * 28
    text = f"From the archive: {prose} Contacts: {people}"
    return b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"' + text.encode() + b'"}]}}'


def _client_run(socket: Path, day: int, run: int) -> None:
    session = f"run-{day}-{run}"
    with Client.connect(
        socket, role="shim", session=session, server="mail", upstream=["mail"], instance=session
    ) as shim:
        shim.request("tools", tools=TOOLS)
        for n in range(OUTPUTS_PER_RUN):
            shim.request(
                "observe",
                seq=n + 1,
                kind="result",
                method="tools/call",
                tool="read_mail",
                request_id=n,
                payload=_output(day, run, n),
            )
        tainted = shim.request(
            "verdict", tool="send_mail", arguments={"to": f"p{day}x{run}x0x0@corp0.example"}
        )
        clean = shim.request("verdict", tool="send_mail", arguments={"to": "colleague@partner.example"})
        if (tainted["verdict"], clean["verdict"]) != ("deny", "ask"):
            raise SystemExit(f"unexpected verdicts: {tainted['rule']}, {clean['rule']}")


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def _sessions(socket: Path) -> int:
    with Client.connect(socket, role="ctl") as ctl:
        return len(ctl.request("status")["sessions"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="client runs a day")
    parser.add_argument("--day", type=float, default=4.0, help="seconds of wall time a day (at least 2)")
    parser.add_argument("--days", type=int, default=7)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bwk", dir="/tmp"))
    (home / "config").mkdir(mode=0o700)
    retention = max(1, round(args.day * 0.75))
    (home / "config" / "policy.yaml").write_text(POLICY.format(retention=retention))
    proc, socket = start_daemon(home, {"BOUNCER_SESSION_GRACE_SECONDS": GRACE_SECONDS})
    journal = home / "state" / "journal.bin"
    rows: list[tuple[int, int, int, int]] = []
    try:
        print(f"{args.runs} client runs a day, a day is {args.day:g} s, taint_retention {retention}s")
        print(f"{'day':>3} {'rss KiB':>9} {'journal bytes':>14} {'sessions left':>14}")
        for day in range(1, args.days + 1):
            begun = time.monotonic()
            for run in range(args.runs):
                _client_run(socket, day, run)
            deadline = time.monotonic() + ARCHIVE_TIMEOUT_SECONDS
            while _sessions(socket) and time.monotonic() < deadline:
                time.sleep(0.05)
            row = (day, _rss_kib(proc.pid), journal.stat().st_size, _sessions(socket))
            rows.append(row)
            print(f"{row[0]:>3} {row[1]:>9} {row[2]:>14} {row[3]:>14}", flush=True)
            time.sleep(max(0.0, args.day - (time.monotonic() - begun)))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        shutil.rmtree(home, ignore_errors=True)
    steady = rows[1:] if len(rows) > 2 else rows
    for name, col in (("rss", 1), ("journal", 2)):
        values = [r[col] for r in steady]
        median = statistics.median(values)
        spread = max(abs(v - median) for v in values) / median * 100 if median else 0.0
        print(
            f"{name}: days {steady[0][0]}-{steady[-1][0]} within {spread:.1f}% of their median {median:.0f}"
        )


if __name__ == "__main__":
    main()
