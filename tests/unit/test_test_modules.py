"""Every pytest subset collects on its own: no test imports a helper by a name pytest reuses.

pytest keeps one module named ``conftest`` at a time, and test folders are not packages, so a
``from conftest import`` in tests/e2e resolves to tests/fuzz's conftest when that one was collected
last (``pytest tests/fuzz/x.py tests/e2e/y.py`` failed to collect, in either order). Helpers live in
modules of their own (tests/e2e/daemons.py, tests/fuzz/fuzzd.py), and two test folders must not hold
helper modules of the same name, for the same reason.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _sources() -> list[Path]:
    return [p for p in TESTS.rglob("*.py") if "node_modules" not in p.parts]


def test_no_test_module_imports_from_a_conftest() -> None:
    offenders = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if "conftest" in names:
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert offenders == []


def test_no_two_test_folders_hold_a_helper_module_of_the_same_name() -> None:
    folders: dict[str, set[Path]] = defaultdict(set)
    for path in _sources():
        if path.name != "conftest.py" and not path.name.startswith("test_"):
            folders[path.name].add(path.parent)
    assert {name: dirs for name, dirs in folders.items() if len(dirs) > 1} == {}
