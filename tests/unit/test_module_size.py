"""No production module over MAX_MODULE_LINES (STYLE §9: modules of 100–600 lines with one idea each).

A module past the limit has grown a second idea: split it at a state machine or adapter boundary
(the daemon's start-up and journal went to server/ledger.py, its accept loop to server/serving.py;
the docs generator to core/ruledocs.py), never by moving lines to a grab-bag module.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bouncerd", "shim/bouncer_shim", "cli/bouncerctl")
MAX_MODULE_LINES = 600

# Over the limit and not split yet, each along a seam of its own: an entry here may only go.
NOT_SPLIT_YET: frozenset[str] = frozenset()


def _too_long(root: Path) -> dict[str, int]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_MODULE_LINES:
                found[path.relative_to(root).as_posix()] = lines
    return found


def test_no_production_module_is_over_the_limit() -> None:
    over = {name: lines for name, lines in _too_long(ROOT).items() if name not in NOT_SPLIT_YET}
    assert over == {}, f"split these along their seams (at most {MAX_MODULE_LINES} lines): {over}"


def test_a_module_over_the_limit_is_found(tmp_path: Path) -> None:
    """The check above can fail: a long module in a package is named with its length."""
    package = tmp_path / "bouncerd"
    package.mkdir()
    (package / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1), encoding="utf-8")
    (package / "small.py").write_text("x = 1\n" * MAX_MODULE_LINES, encoding="utf-8")
    assert _too_long(tmp_path) == {"bouncerd/big.py": MAX_MODULE_LINES + 1}
