"""No module of bouncerd, bouncer_shim or bouncerctl is in an import cycle, type-only imports included.

A cycle means two modules each need the other to make sense: neither can be read, tested or replaced
on its own. Every import counts: at the top, inside a function, or for typing only (``if
TYPE_CHECKING:``), because a type-only import is still a dependency a reader has to follow. A
collaborator one module needs from another is passed in as a narrow `typing.Protocol` instead.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# (directory that is on sys.path, top-level package in it)
PACKAGES = ((ROOT, "bouncerd"), (ROOT / "shim", "bouncer_shim"), (ROOT / "cli", "bouncerctl"))


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for base, package in PACKAGES:
        for path in sorted((base / package).rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, modules: set[str]) -> Iterator[str]:
    """Every module `path` (module `name`) imports: for `from X import Y`, X.Y if that is a module,
    else X. Parent packages, which Python initialises on the way, are not counted."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                yield full if full in modules else module


@functools.cache  # parsing every module takes seconds; the tests only read the graph
def _graph() -> dict[str, list[str]]:
    modules = _modules()
    names = set(modules)
    return {
        name: sorted({m for m in _imported(name, path, names) if m in names and m != name})
        for name, path in modules.items()
    }


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """One cycle per back edge of a depth-first walk, each as the modules along it."""
    cycles: list[list[str]] = []
    state: dict[str, str] = {}  # "open" while on the current path, "done" once fully walked

    def walk(name: str, trail: list[str]) -> None:
        state[name] = "open"
        trail.append(name)
        for nxt in graph[name]:
            if state.get(nxt) == "open":
                cycles.append([*trail[trail.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt, trail)
        trail.pop()
        state[name] = "done"

    for name in graph:
        if name not in state:
            walk(name, [])
    return cycles


def test_the_walk_finds_a_cycle() -> None:
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": ["b"], "b": [], "c": ["a", "b"]}) == []


def test_the_walk_sees_every_package() -> None:
    graph = _graph()
    for _, package in PACKAGES:
        assert package in graph
    assert "bouncerd.core.engine" in graph["bouncerd.server.daemon"]


@pytest.mark.parametrize("package", [package for _, package in PACKAGES])
def test_no_import_cycle(package: str) -> None:
    graph = _graph()
    cycles = [c for c in _cycles(graph) if c[0].split(".")[0] == package]
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)
