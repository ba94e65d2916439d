"""bench/mutation.py breaks every rule a verdict can carry: its table must stay with the code.

The mutation run itself takes minutes (bench/README.md); this checks, in a second, what makes it
runnable: every rule id in bouncerd/core/ruleids.py that a verdict can carry has a mutant, every
mutant names such a rule, and every mutant's line is in the source exactly once, so a change that
moves a rule's line says here which mutant to update.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from bouncerd.core.ruleids import RULES

REPO = Path(__file__).resolve().parents[2]


def _mutation() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_mutation", REPO / "bench" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_rule_a_verdict_can_carry_has_one_mutant_and_no_mutant_names_another() -> None:
    mutation = _mutation()
    decisions = {rid for rid, info in RULES.items() if set(info.verdicts) - {"event"}}
    named = [m.rule for m in mutation.MUTANTS]
    assert sorted(set(named) ^ decisions) == []
    assert len(named) == len(set(named))


def test_every_mutant_line_is_in_the_source_once_and_the_mutant_changes_only_it() -> None:
    mutation = _mutation()
    for m in mutation.MUTANTS:
        original = (REPO / m.path).read_text(encoding="utf-8")
        mutated, lineno = mutation.mutate(m, original)  # raises if the line is gone or not unique
        before, after = original.splitlines(), mutated.splitlines()
        assert len(before) == len(after)
        assert [i + 1 for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b] == [lineno], (
            m.rule
        )
        compile(mutated, m.path, "exec")  # a mutant is a program, not a syntax error
