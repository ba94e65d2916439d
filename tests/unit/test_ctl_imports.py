"""What bouncerctl may import: nothing of the daemon's server (cycles: tests/unit/test_import_cycles.py).

The CLI reads the daemon's files (audit log, policy) through the neutral `bouncerd.auditfiles` and
`bouncerd.policyfiles`, and talks to it through `bouncerd.client`; `bouncerd.server` is the daemon's
I/O and is none of its business. Every import counts: at the top, inside a function, or for typing
only (``if TYPE_CHECKING:``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "cli"
PACKAGE = "bouncerctl"
SERVER = "bouncerd.server"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(CLI).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted((CLI / PACKAGE).rglob("*.py"))}


def _imported(name: str, path: Path, modules: set[str]) -> Iterator[str]:
    """Every module `path` (module `name`) imports: for `from X import Y`, X.Y if that is one of
    `modules`, else X. Parent packages, which Python initialises on the way, are not counted."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                yield f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module


def test_no_cli_module_imports_the_server() -> None:
    offenders = [
        f"{name} imports {imported}"
        for name, path in _sources().items()
        for imported in _imported(name, path, {SERVER})
        if imported == SERVER or imported.startswith(SERVER + ".")
    ]
    assert not offenders
