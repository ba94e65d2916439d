"""Building the compiled scanner where a user installs it, and saying so when it did not build.

What these stop: `pip install .` quietly giving every user the pure scanner (the build's child process
lost the PYTHONPATH through which pip's isolated build environment provides mypy and setuptools, and
pip hides the build's output), a build that spends a minute in mypyc before it finds there is no
compiler, and `doctor` calling a pure install fine on a machine that could have compiled it. The whole
path through pip, in clean venvs, is scripts/wheel_check.py (run by scripts/test).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from bouncerd import native

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import native_build  # noqa: E402 - scripts/ is no package

MISSING_CC = "bouncer-no-such-compiler"
HEADERS = os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h"))


def test_the_compilers_child_keeps_the_build_environment_pip_gave_it(tmp_path: Path) -> None:
    pip_env = os.pathsep.join(["/tmp/pip-build-env-x/site", "/tmp/pip-build-env-x/overlay"])
    got = native_build.child_pythonpath(tmp_path, {"PYTHONPATH": pip_env}).split(os.pathsep)
    # the copied tree first (the source compiled, not an installed copy), then pip's, in order
    assert got == [str(tmp_path), "/tmp/pip-build-env-x/site", "/tmp/pip-build-env-x/overlay"]
    assert native_build.child_pythonpath(tmp_path, {}) == str(tmp_path)


def _fake_compiler(tmp_path: Path) -> Path:
    cc = tmp_path / "bin" / "fake-cc"
    cc.parent.mkdir()
    cc.write_text("#!/bin/sh\nexit 1\n")
    cc.chmod(0o755)
    return cc


@pytest.mark.skipif(not HEADERS, reason="Python's headers are not installed: no toolchain can be found")
def test_toolchain_is_the_compiler_cc_names_on_path(tmp_path: Path) -> None:
    cc = _fake_compiler(tmp_path)
    path = str(cc.parent)
    assert native.toolchain({"CC": "fake-cc -pthread", "PATH": path}) == str(cc)
    assert native.toolchain({"CC": MISSING_CC, "PATH": path}) is None
    assert native.toolchain({"CC": "'unbalanced", "PATH": path}) is None


def test_a_build_without_a_compiler_stops_at_once_and_leaves_no_stamp(tmp_path: Path) -> None:
    env = {**os.environ, "CC": MISSING_CC}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "native_build.py"), "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 1
    assert "no C compiler" in done.stderr
    assert not (tmp_path / "bouncerd" / "core" / native.STAMP_NAME).exists()


def _pure_tree(tmp_path: Path) -> Path:
    """A copy of bouncerd with no compiled build beside the source."""
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT / "bouncerd", tree / "bouncerd", ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd")
    )
    (tree / "bouncerd" / "core" / native.STAMP_NAME).unlink(missing_ok=True)
    return tree


def _doctor_scanner_line(tree: Path, env: dict[str, str]) -> tuple[str, str, str]:
    code = "from bouncerctl.doctor import check_scanner\nprint('|'.join(check_scanner()))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT / "cli")])},
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    level, name, detail = done.stdout.strip().split("|")
    return level, name, detail


@pytest.mark.skipif(not HEADERS, reason="Python's headers are not installed: no toolchain can be found")
def test_doctor_warns_when_a_compiler_is_here_but_the_scanner_is_pure(tmp_path: Path) -> None:
    tree = _pure_tree(tmp_path)
    cc = _fake_compiler(tmp_path)
    base = {k: v for k, v in os.environ.items() if k != native.PURE_VARIABLE}
    path = os.pathsep.join([str(cc.parent), base.get("PATH", "")])
    level, _, detail = _doctor_scanner_line(tree, {**base, "CC": "fake-cc", "PATH": path})
    assert level == "warn"
    assert "pure Python (no compiled build)" in detail and str(cc) in detail
    # the benign twins: no compiler at all, or the pure scanner chosen on purpose, is fine
    level, _, detail = _doctor_scanner_line(tree, {**base, "CC": MISSING_CC})
    assert (level, detail) == ("ok", "pure Python (no compiled build)")
    level, _, detail = _doctor_scanner_line(
        tree, {**base, "CC": "fake-cc", "PATH": path, native.PURE_VARIABLE: "1"}
    )
    assert level == "ok" and native.PURE_VARIABLE in detail
