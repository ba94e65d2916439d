"""The cost of holding the audit log as a path and an inode: one `os.stat` before every record.

Appends N verdict-sized records to a fresh log in a temporary directory, first with the check
(`AuditLog.append` as the daemon runs it), then with the check turned off (the baseline, the writer
as it was before), alternating rounds so both see the same disk and cache, and prints the median
microseconds per record of each and the difference. Nothing asserts; the figures are the point.

Run ``python bench/audit_append.py`` (``--records``, ``--rounds``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bouncerd.server.audit import AuditLog

RECORD = {
    "session": "proc:1234:5678",
    "client": "claude-code",
    "server": "mail",
    "request_id": 7,
    "tool": "send_email",
    "arguments": {"to": "boss@corp.example", "subject": "report", "body": "the numbers for this week"},
    "verdict": "allow",
    "rule": "sink.trusted",
    "reason": "every destination of the call is trusted",
}


def one_round(directory: Path, records: int, check: bool) -> float:
    """Microseconds per record for one fresh log of `records` records."""
    path = directory / f"audit-{time.monotonic_ns()}.jsonl"
    log, _ = AuditLog.open(path, time.time())
    if not check:
        log._check_still_ours = lambda now: None  # type: ignore[method-assign]  # the baseline
    started = time.perf_counter()
    for i in range(records):
        log.append({**RECORD, "request_id": i}, 1_700_000_000.0 + i)
    elapsed = time.perf_counter() - started
    log.close()
    path.unlink()
    return elapsed / records * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with_check: list[float] = []
    baseline: list[float] = []
    with tempfile.TemporaryDirectory(prefix="baudit", dir="/tmp") as tmp:
        for _ in range(args.rounds):
            baseline.append(one_round(Path(tmp), args.records, check=False))
            with_check.append(one_round(Path(tmp), args.records, check=True))
    b, w = statistics.median(baseline), statistics.median(with_check)
    print(f"audit append, {args.records} records x {args.rounds} rounds (median µs per record)")
    print(f"  baseline (no inode check)   {b:8.2f}")
    print(f"  path and inode checked      {w:8.2f}")
    print(f"  difference                  {w - b:+8.2f} µs ({(w - b) / b * 100:+.1f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
