"""In CI, a test skipped for something scripts/setup installs is a failure, not a skip.

A skip whose reason names ``scripts/setup`` (Chromium for the review pack's browser tests, the npm
reference servers and clients, the otel extra) says that the setup should have installed it; a CI
run that skips it claims to test what it never ran. CI is told by the ``CI`` variable (set by
.ci/run, and by every common CI service). Outside CI such a skip stays a skip, with its reason.

Hypothesis runs without its per-example deadline everywhere: a deadline is a timing assertion, and on
a loaded two-core machine it fails tests whose property held (speed is measured under bench/).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("bouncer", deadline=None)
settings.load_profile("bouncer")

# The words of a skip reason that say scripts/setup installs what is missing.
SETUP_INSTALLS = "scripts/setup"


def in_ci(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _reason(report: pytest.TestReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.skipped and in_ci() and SETUP_INSTALLS in _reason(report):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI for something scripts/setup installs: {_reason(report)}"
