"""The rule tables of the docs are generated from bouncerd/core/ruleids.py, and name every rule.

docs/policy.md's Rules section lists every rule id; docs/how-it-works.md's table of the decision lists
every verdict rule a tool call can meet, step by step. Both are generated (`with_rules_section`,
`with_call_rules_section`): a rule added to the table and not to the docs, or a row edited by hand,
fails here with the command that regenerates them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bouncerd.core import ruledocs
from bouncerd.core.ruleids import RULES

DOCS = Path(__file__).resolve().parents[2] / "docs"
REGENERATE = (
    ".venv/bin/python -c 'import pathlib; from bouncerd.core import ruledocs; "
    'p = pathlib.Path("docs/how-it-works.md"); '
    "p.write_text(ruledocs.with_call_rules_section(p.read_text())); "
    'p = pathlib.Path("docs/policy.md"); p.write_text(ruledocs.with_rules_section(p.read_text()))\''
)


def _section(text: str, begin: str, end: str) -> str:
    start, stop = text.find(begin), text.find(end)
    assert 0 <= start < stop, f"the document lost its markers {begin!r} … {end!r}"
    return text[start:stop]


def test_every_rule_id_appears_in_the_generated_table_of_policy_md() -> None:
    section = _section((DOCS / "policy.md").read_text(), ruledocs.BEGIN_MARK, ruledocs.END_MARK)
    missing = [r for r in RULES if f"| `{r}` |" not in section]
    assert missing == [], f"not in docs/policy.md's Rules table; regenerate it: {REGENERATE}"


def test_how_it_works_decision_table_is_the_generated_one() -> None:
    text = (DOCS / "how-it-works.md").read_text()
    assert ruledocs.with_call_rules_section(text) == text, (
        f"docs/how-it-works.md's table of the decision is not what ruleids gives; regenerate it: {REGENERATE}"
    )


def test_every_verdict_rule_of_a_tool_call_appears_in_how_it_works() -> None:
    section = _section(
        (DOCS / "how-it-works.md").read_text(), ruledocs.CALL_BEGIN_MARK, ruledocs.CALL_END_MARK
    )
    call_path = list(RULES)[: list(RULES).index("default.allow") + 1]
    expected = [
        r for r in call_path if RULES[r].family in ruledocs.CALL_STEPS and "event" not in RULES[r].verdicts
    ]
    # every step of the decision has its rules here, not a chosen few
    assert {RULES[r].family for r in expected} == set(ruledocs.CALL_STEPS)
    missing = [r for r in expected if f"| `{r}` |" not in section]
    assert missing == [], f"not in docs/how-it-works.md's decision table; regenerate it: {REGENERATE}"


def test_a_row_written_by_hand_is_caught() -> None:
    text = (DOCS / "how-it-works.md").read_text()
    edited = text.replace("| `default.allow` |", "| `default.allowed` |", 1)
    assert edited != text
    assert ruledocs.with_call_rules_section(edited) != edited


def test_a_document_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="call rules"):
        ruledocs.with_call_rules_section("no table here")


def test_the_call_table_follows_the_engine_order() -> None:
    steps = [ruledocs.CALL_STEPS[r.family] for r in ruledocs.call_rules()]
    order = list(dict.fromkeys(ruledocs.CALL_STEPS.values()))
    assert [order.index(s) for s in steps] == sorted(order.index(s) for s in steps)
    assert ruledocs.call_rules()[0].id == "policy.unreadable"
    assert ruledocs.call_rules()[-1].id == "default.allow"
