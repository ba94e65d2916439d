"""Fixtures of the fuzz tests: a short temp home per module, and the per-target counts.

The daemon itself is in fuzzd.py (tests import it from there, never from this module).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from _counts import COUNTS, TESTS
from fuzzd import short_home


@pytest.fixture(scope="module")
def fuzz_home() -> Iterator[Path]:
    home = short_home()
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


FAILED: set[str] = set()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        FAILED.add(report.nodeid)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not COUNTS:
        return
    terminalreporter.write_sep("-", "fuzz examples per target")
    rows = []
    for target, n in sorted(COUNTS.items()):
        crashes = sum(1 for test in TESTS.get(target, ()) if test in FAILED)
        rows.append({"target": target, "examples": n, "crashes": crashes})
        terminalreporter.write_line(f"{target}: {n} examples, {crashes} crashes")
    out = os.environ.get("BOUNCER_FUZZ_COUNTS")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
