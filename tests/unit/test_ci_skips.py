"""tests/conftest.py: in CI a skip for something scripts/setup installs fails the run; elsewhere it skips.

Runs pytest in a subprocess on a small test directory holding a copy of tests/conftest.py, with and
without the CI variable, and reads the outcome line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
SAMPLE = """
import pytest

def test_needs_a_browser():
    pytest.skip("chromium is not installed (scripts/setup installs it)")

def test_needs_a_mac():
    pytest.skip("macOS only")
"""


def _run(tmp_path: Path, ci: str | None) -> str:
    shutil.copyfile(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the sample needs no plugin; loading them all is slow
    if ci is not None:
        env["CI"] = ci
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout.strip().splitlines()[-1]


def test_in_ci_a_skip_for_what_setup_installs_is_a_failure(tmp_path: Path) -> None:
    """Stops: CI passing with the review pack's browser tests skipped ("chromium is not installed")."""
    outcome = _run(tmp_path, "1")
    assert "1 failed" in outcome and "1 skipped" in outcome  # the mac-only skip stays a skip


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_it_stays_a_skip(tmp_path: Path, ci: str | None) -> None:
    """The benign twin: on a developer's machine a missing browser skips, saying why."""
    outcome = _run(tmp_path, ci)
    assert "2 skipped" in outcome and "failed" not in outcome
