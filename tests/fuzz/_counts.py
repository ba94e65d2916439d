"""Per-target counts of the fuzz tests: how many generated examples each target ran.

Each test calls `ran(target)` once per example. At the end of the session conftest.py prints the
counts and, if BOUNCER_FUZZ_COUNTS names a file, appends them there as JSON lines (bench/soak.py
--fuzz-counts reads it). A crash is a failed test: a target's crashes are the failed tests that ran
examples of it (hypothesis stops a test at its first failing example, shrunk).
"""

from __future__ import annotations

import os
from collections import Counter

COUNTS: Counter[str] = Counter()
TESTS: dict[str, set[str]] = {}  # target -> the tests (node ids) that ran examples of it


def ran(target: str) -> None:
    COUNTS[target] += 1
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    TESTS.setdefault(target, set()).add(test)
