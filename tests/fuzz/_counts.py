"""Per-target counts of the fuzz tests: how many generated examples each target ran.

Each test calls `ran(target)` once per example. At the end of the session conftest.py prints the
counts and, if BOUNCER_FUZZ_COUNTS names a file, appends them there as JSON lines (bench/soak.py
--fuzz-counts reads it). A crash is a failed test, so a run that passes ran its examples with 0.
"""

from __future__ import annotations

from collections import Counter

COUNTS: Counter[str] = Counter()


def ran(target: str) -> None:
    COUNTS[target] += 1
