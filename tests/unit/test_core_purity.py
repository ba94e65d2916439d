"""The core is sans-I/O: no module under bouncerd/core imports I/O, clocks, or the environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "bouncerd" / "core"
FORBIDDEN = {
    "anyio",
    "asyncio",
    "socket",
    "os",
    "time",
    "subprocess",
    "threading",
    "shutil",
    "pathlib",
    "io",
    "select",
    "signal",
    "sys",
    "datetime",
    "random",
    "secrets",
    "platformdirs",
}


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: p.name)
def test_core_module_imports_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
