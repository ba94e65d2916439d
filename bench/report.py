"""Report benchmark: `bouncerctl report` over a generated audit log; seconds and peak memory.

Run:  .venv/bin/python bench/report.py [--lines 1000000] [--format md,html] [--keep] [--seed 1]

The log is generated into a temp directory as the daemon writes it: valid chained records (each
line's ``prev`` is the hash of the line before, each ``hash`` the SHA-256 of the canonical record),
full arguments, a realistic mix over 30 days: five servers, mostly allowed reads, sends asked or
denied with destinations and provenance, path and budget denials, unknown tools, and now and then a
policy reload or pins accepted. Lines are built from pre-encoded pieces (the canonical form and the
line differ only in key order), so generating a million takes seconds; the report's own chain check
proves them valid (the run fails if the chain does not verify).

Each format is rendered by a child process (``python -m bouncerctl report --no-daemon``, so no
running daemon is asked); its wall time and its peak resident memory (``ru_maxrss`` from
``os.wait4``) are printed against the targets (under 30 s and 200 MB for a million lines), with its
CPU time and the load average: on a busy machine the wall time includes waiting for a CPU, the CPU
time does not. The figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bouncerd.core.audit import GENESIS  # noqa: E402

TARGET_SECONDS = 30.0
TARGET_MB = 200.0
START = 1_767_225_600  # 2026-01-01T00:00:00Z
SPAN_SECONDS = 30 * 86400
SESSION_EVERY = 500  # records per agent session

SERVERS: dict[str, list[str]] = {
    "mail": ["read_inbox", "search_mail", "send_email", "delete_email"],
    "chat": ["read_channel", "post_message", "send_dm"],
    "files": ["read_file", "write_file", "list_directory", "move_file"],
    "github": ["list_issues", "create_issue", "get_file_contents", "create_pull_request"],
    "fetch": ["fetch"],
}
ATTACKERS = ["exfil@attacker.example", "https://evil.example/c?d=", "drop@pastebin.example"]
PEOPLE = ["bob@corp.example", "ann@partner.example", "#general", "@carol"]


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _plain(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class Variant:
    """One kind of record with everything but ts, session, request_id and prev pre-encoded."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.c = {k: _canon(v) for k, v in fields.items()}
        self.p = {k: _plain(v) for k, v in fields.items()}

    def line(self, ts: str, session: str, rid: int, prev: str) -> tuple[bytes, str]:
        c, p = self.c, self.p
        sess = _plain(session)
        canonical = (
            f'{{"arguments":{c["arguments"]},"client":{c["client"]},"destination":{c["destination"]},'
            f'"prev":"{prev}","provenance":{c["provenance"]},"reason":{c["reason"]},"request_id":{rid},'
            f'"rule":{c["rule"]},"server":{c["server"]},"session":{sess},"tool":{c["tool"]},'
            f'"ts":"{ts}","verdict":{c["verdict"]}}}'
        )
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        line = (
            f'{{"ts":"{ts}","session":{sess},"client":{p["client"]},"server":{p["server"]},'
            f'"request_id":{rid},"tool":{p["tool"]},"arguments":{p["arguments"]},"verdict":{p["verdict"]},'
            f'"rule":{p["rule"]},"reason":{p["reason"]},"destination":{p["destination"]},'
            f'"provenance":{p["provenance"]},"prev":"{prev}","hash":"{digest}"}}\n'
        )
        return line.encode(), digest


def variants(rnd: random.Random) -> list[tuple[float, Variant]]:
    """(weight, variant): about 86% allow, 8% ask, 6% deny."""
    out: list[tuple[float, Variant]] = []

    def add(weight: float, **fields: Any) -> None:
        base = {"client": "claude-code", "destination": None, "provenance": None}
        base.update(fields)
        out.append((weight, Variant(base)))

    body = " ".join(
        rnd.choice(["report", "budget", "meeting", "draft", "numbers", "thanks"]) for _ in range(30)
    )
    for server, tools in SERVERS.items():
        for tool in tools:
            add(
                60 / 16,
                server=server,
                tool=tool,
                arguments={"query": f"q {tool}", "limit": 20, "note": body[:120]},
                verdict="allow",
                rule="default.allow",
                reason="no rule objected",
            )
    for dest in PEOPLE:
        add(
            4,
            server="mail",
            tool="send_email",
            arguments={"to": dest, "subject": "Quarterly numbers", "body": body},
            verdict="ask",
            rule="sink.unproven",
            reason=f"destination {dest!r} in argument 'to' is not allowlisted, approved or typed by you",
            destination=dest,
        )
        add(
            2,
            server="mail",
            tool="send_email",
            arguments={"to": dest, "subject": "Re: numbers", "body": body},
            verdict="allow",
            rule="sink.trusted",
            reason="every destination is trusted (to: allowlisted)",
            destination=dest,
        )
    for dest in ATTACKERS:
        prov = {"server": "mail", "tool": "read_inbox", "request_id": 7, "ts": START + 60.5, "field": None}
        add(
            1.5,
            server="chat" if dest.startswith("drop") else "mail",
            tool="send_dm" if dest.startswith("drop") else "send_email",
            arguments={"to": dest, "body": body},
            verdict="deny",
            rule="sink.tainted_destination",
            reason=f"destination {dest!r} first appeared in the output of mail/read_inbox (request 7)",
            destination=dest,
            provenance={**prov, "identity": False},
        )
    add(
        1,
        server="files",
        tool="write_file",
        arguments={"path": "/etc/cron.d/job", "content": body},
        verdict="deny",
        rule="constraint.path",
        reason="write parameter 'path' '/etc/cron.d/job' is outside the allowed path prefixes",
    )
    add(
        0.5,
        server="mail",
        tool="delete_email",
        arguments={"id": "m-1"},
        verdict="deny",
        rule="budget.exceeded",
        reason="tool 'delete_email' may be called 5 time(s) per session; this is attempt 6",
    )
    add(
        0.5,
        server="github",
        tool="delete_repository",
        arguments={"repo": "x"},
        verdict="deny",
        rule="pin.unknown_tool",
        reason="tool 'delete_repository' is not in the pinned tool list of server 'github'",
    )
    return out


def _ts(epoch_ms: int) -> str:
    secs, ms = divmod(epoch_ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{ms:03d}Z"


def generate(path: Path, lines: int, seed: int) -> str:
    """Write `lines` chained records to `path`; return the head hash."""
    rnd = random.Random(seed)
    weighted = variants(rnd)
    weights = [w for w, _ in weighted]
    kinds = [v for _, v in weighted]
    picks: Iterator[Variant] = iter(rnd.choices(kinds, weights, k=lines))
    step_ms = max(1, SPAN_SECONDS * 1000 // max(lines, 1))
    prev = GENESIS
    second_cache: dict[int, str] = {}
    with path.open("wb", buffering=1024 * 1024) as out:
        for i in range(lines):
            epoch_ms = START * 1000 + i * step_ms
            secs = epoch_ms // 1000
            stamp = second_cache.get(secs)
            if stamp is None:
                second_cache.clear()
                stamp = second_cache[secs] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
            ts = f"{stamp}.{epoch_ms % 1000:03d}Z"
            line, prev = next(picks).line(ts, f"proc:{1000 + i // SESSION_EVERY}:17", i, prev)
            out.write(line)
    return prev


def run_report(audit: Path, home: Path, tools: Path, fmt: str, out: Path) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak MB, stderr) of one `bouncerctl report` child."""
    env = {**os.environ, "BOUNCER_HOME": str(home), "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'cli'}"}
    cmd = [sys.executable, "-m", "bouncerctl", "report", "--no-daemon", "--audit", str(audit)]
    cmd += ["--tools", str(tools), "--format", fmt, "-o", str(out)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"report failed ({proc.returncode}):\n{err}")
    peak_kb = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss / 1024
    return seconds, usage.ru_utime + usage.ru_stime, peak_kb / 1024, err.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--format", default="md,html", help="comma-separated: md, html")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the temp directory and print it")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        audit = tmp / "audit.jsonl"
        t0 = time.perf_counter()
        head = generate(audit, args.lines, args.seed)
        gen = time.perf_counter() - t0
        size_mb = audit.stat().st_size / (1024 * 1024)
        print(f"generated {args.lines:,} lines ({size_mb:,.0f} MB) in {gen:.1f} s; head {head[:16]}…")
        tools = tmp / "tools.json"
        tools.write_text(json.dumps({s: {"tools": [{"name": t} for t in ts]} for s, ts in SERVERS.items()}))
        scale = args.lines / 1_000_000
        print(f"targets for 1,000,000 lines: under {TARGET_SECONDS:.0f} s and {TARGET_MB:.0f} MB")
        for fmt in [f.strip() for f in args.format.split(",") if f.strip()]:
            out = tmp / f"report.{fmt}"
            load = os.getloadavg()[0]
            seconds, cpu, peak, err = run_report(audit, tmp / "home", tools, fmt, out)
            if "chain intact" not in err:
                raise SystemExit(f"the generated chain did not verify: {err}")
            verdict = (
                "within targets"
                if seconds <= TARGET_SECONDS * max(scale, 1e-9) and peak <= TARGET_MB
                else "OVER TARGET"
            )
            rate = args.lines / seconds if seconds else 0.0
            print(
                f"report --format {fmt}: {seconds:.1f} s wall ({rate:,.0f} lines/s), {cpu:.1f} s CPU, "
                f"peak {peak:.0f} MB, output {out.stat().st_size / 1024:.0f} KB, load average {load:.1f} "
                f"on {os.cpu_count()} CPUs  [{verdict}"
                + (f", time target scaled to {args.lines:,} lines]" if scale != 1 else "]")
            )
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
