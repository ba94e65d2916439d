"""The reckoning of bench/soak.py: what the servers received, what the audit log says, what the clients saw.

Theory of operation
-------------------
`reckon` matches three records of one run by the nonce every call carries: the servers' own records
(bench/soak_server.py appends one line per call received, before handling it), the daemon's audit log
(every line parsed; the chain judged by `bouncerctl audit verify`, the project's own verifier) and
the clients' `Stats` (what each call got back). It prints the table and the PASS/FAIL line and
returns whether every target was met. Nothing here asserts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent

# The targets.
TARGET_REFUSAL_WINDOW_S = 5.0

MUST_DENY = frozenset({"send_attacker", "write_outside"})


@dataclass
class Stats:
    sent: Counter[str] = field(default_factory=Counter)
    decided: Counter[str] = field(default_factory=Counter)  # answered with a daemon's verdict
    refused_unreachable: int = 0
    refused_lost: int = 0
    unanswered: list[str] = field(default_factory=list)
    decided_nonces: set[str] = field(default_factory=set)
    allowed_nonces: set[str] = field(default_factory=set)  # answered with the server's result
    must_deny_nonces: set[str] = field(default_factory=set)
    windows: list[float] = field(default_factory=list)
    shim_starts: int = 0
    shim_exits: Counter[int] = field(default_factory=Counter)


@dataclass
class Run:
    """What the campaign leaves for the reckoning."""

    home: Path
    clients: int
    stats: list[Stats]
    kill_log: list[dict[str, Any]]
    rss_before: int | None
    rss_after: int | None


# ---- the reckoning ---------------------------------------------------------------------------------


def audit_lines(home: Path) -> tuple[list[dict[str, Any]], int, int]:
    """(records, lines that do not parse, torn tails set aside by the daemon)."""
    state = home / "state"
    rotated = sorted(state.glob("audit.jsonl.[0-9]*"), key=lambda p: -int(p.suffix[1:]))  # oldest first
    files = [*rotated, state / "audit.jsonl"]
    records: list[dict[str, Any]] = []
    bad = 0
    for path in files:
        if not path.exists():
            continue
        for line in path.read_bytes().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if isinstance(record, dict):
                records.append(record)
            else:
                bad += 1
    torn = len(list(state.glob("audit.jsonl.torn-*")))
    return records, bad, torn


def received(home: Path) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for path in sorted((home / "records").glob("*.jsonl")):
        seen.extend(json.loads(line) for line in path.read_bytes().splitlines() if line.strip())
    return seen


def tracebacks(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if "Traceback (most recent call last)" in text:
            found.append(str(path))
    return found


def reckon(c: Run, wall: float) -> bool:
    home = c.home
    records, bad_lines, torn_asides = audit_lines(home)
    allowed = {
        r["arguments"]["nonce"]
        for r in records
        if r.get("verdict") == "allow" and isinstance(r.get("arguments"), dict) and "nonce" in r["arguments"]
    }
    audited = {
        r["arguments"]["nonce"]
        for r in records
        if isinstance(r.get("arguments"), dict) and "nonce" in r["arguments"]
    }
    seen = received(home)
    seen_nonces = {s["nonce"] for s in seen}
    must_deny = set().union(*(s.must_deny_nonces for s in c.stats))
    decided = set().union(*(s.decided_nonces for s in c.stats))
    client_allowed = set().union(*(s.allowed_nonces for s in c.stats))
    reached_without_allow = sorted(seen_nonces - allowed)
    must_deny_reached = sorted(seen_nonces & must_deny)
    lost = sorted(decided - audited)
    allowed_not_seen = sorted(client_allowed - seen_nonces)
    verify = subprocess.run(
        [str(BIN / "bouncerctl"), "audit", "verify"],
        env={**os.environ, "BOUNCER_HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
    )
    chain_ok = verify.returncode == 0
    windows = [w for s in c.stats for w in s.windows]
    longest = max(windows, default=0.0)
    unanswered = [u for s in c.stats for u in s.unanswered]
    sent: Counter[str] = Counter()
    done: Counter[str] = Counter()
    for s in c.stats:
        sent.update(s.sent)
        done.update(s.decided)
    exits: Counter[int] = Counter()
    for s in c.stats:
        exits.update(s.shim_exits)
    logs = [home / "state" / "bouncerd.log", *sorted((home / "shims").glob("*.stderr"))]
    traces = tracebacks(logs)

    def mb(v: int | None) -> str:
        return "gone" if v is None else f"{v / 1e6:.1f} MB"

    rows = [
        ("clients (shims at once)", str(c.clients)),
        ("calls sent / decided by the daemon", f"{sum(sent.values())} / {sum(done.values())}"),
        (
            "  of which must-deny sent / decided",
            f"{sum(sent[k] for k in MUST_DENY)} / {sum(done[k] for k in MUST_DENY)}",
        ),
        ("  upstream faults: die / garbage / slow", f"{sent['die']} / {sent['garbage']} / {sent['slow']}"),
        (
            "refused as unreachable / as observations lost",
            f"{sum(s.refused_unreachable for s in c.stats)} / {sum(s.refused_lost for s in c.stats)}",
        ),
        (
            "shims started / exit statuses",
            f"{sum(s.shim_starts for s in c.stats)} / {dict(sorted(exits.items()))}",
        ),
        ("daemon kills (SIGKILL)", str(len(c.kill_log))),
        ("calls the servers received", str(len(seen))),
        ("calls reached without allow", str(len(reached_without_allow))),
        ("must-deny reached", str(len(must_deny_reached))),
        ("allowed answers the server never saw", str(len(allowed_not_seen))),
        (
            "audit records / unparseable lines / torn tails set aside",
            f"{len(records)} / {bad_lines} / {torn_asides}",
        ),
        ("decided calls with no audit record (lost)", str(len(lost))),
        (
            "audit chain (bouncerctl audit verify)",
            "whole" if chain_ok else "BROKEN: " + verify.stderr.strip()[:200],
        ),
        ("requests without an answer", str(len(unanswered))),
        ("refusal windows: count / longest", f"{len(windows)} / {longest:.2f} s"),
        ("daemon RSS after warm-up / at the end", f"{mb(c.rss_before)} / {mb(c.rss_after)}"),
        ("tracebacks in daemon log / shim stderr", str(len(traces))),
        ("wall time", f"{wall:.1f} s"),
    ]
    width = max(len(r[0]) for r in rows)
    print()
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    print()
    for entry in c.kill_log:
        print(
            f"kill {entry['kill']} at {entry['at']:.1f} s: pid {entry['pid']} (RSS {mb(entry['rss'])}), "
            f"a daemon serving again after {entry['back_after_s']:.2f} s (pid {entry['new_pid']})"
        )
    for label, items in (
        ("reached without allow", reached_without_allow),
        ("must-deny reached", must_deny_reached),
        ("lost", lost),
        ("unanswered", unanswered),
        ("tracebacks", traces),
    ):
        if items:
            print(f"{label}: {items[:10]}{' …' if len(items) > 10 else ''}")
    failures = []
    if reached_without_allow:
        failures.append("reached without allow")
    if must_deny_reached:
        failures.append("must-deny reached")
    if lost or bad_lines or torn_asides or not chain_ok:
        failures.append("audit lost/torn")
    if unanswered:
        failures.append("unanswered requests")
    if allowed_not_seen:
        failures.append("results the server never produced")
    if longest > TARGET_REFUSAL_WINDOW_S:
        failures.append(f"refusal window {longest:.1f} s > {TARGET_REFUSAL_WINDOW_S:.0f} s")
    if traces:
        failures.append("tracebacks")
    print()
    targets = (
        "0 reached without allow, 0 must-deny reached, 0 lost/torn, 0 unanswered, "
        f"longest refusal ≤ {TARGET_REFUSAL_WINDOW_S:.0f} s"
    )
    print(("PASS" if not failures else "FAIL: " + "; ".join(failures)) + f"  (targets: {targets})")
    return not failures
