"""The docs' rule tables, generated from the one table of rule ids (bouncerd/core/ruleids.py).

docs/policy.md's Rules section lists every family and every rule (`with_rules_section`);
docs/how-it-works.md's table of the decision lists every verdict rule a tool call can meet, step by
step (`with_call_rules_section`). Each replaces the text between its two markers and leaves the rest
of the document as it is; tests/unit/test_ruleids_docs.py and test_rule_ids.py fail, with the command
that regenerates them, when a document differs from what this module gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from bouncerd.core.ruleids import FAMILIES, RULES, RuleInfo

BEGIN_MARK = (
    "<!-- rules: generated from bouncerd/core/ruleids.py by ruledocs.with_rules_section; do not edit -->"
)
END_MARK = "<!-- rules: end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table() -> str:
    """The families and every rule as Markdown tables, in the table's order."""
    lines = ["| family | what gives it |", "| --- | --- |"]
    lines += [f"| `{name}.` | {_cell(what)} |" for name, what in FAMILIES.items()]
    lines += [
        "",
        "| rule | verdicts | meaning | stops | OWASP (2025) | AIUC-1 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in RULES.values():
        owasp = ", ".join(ref.split(":", 1)[0] for ref in r.owasp) or "—"
        aiuc = ", ".join(r.aiuc) or "—"
        kinds = ", ".join(r.verdicts)
        lines.append(f"| `{r.id}` | {kinds} | {_cell(r.meaning)} | {_cell(r.stops)} | {owasp} | {aiuc} |")
    return "\n".join(lines) + "\n"


def with_rules_section(document: str) -> str:
    """`document` with the text between BEGIN_MARK and END_MARK replaced by `markdown_table()`."""
    start, end = document.find(BEGIN_MARK), document.find(END_MARK)
    if start < 0 or end < start:
        raise ValueError(f"the document has no {BEGIN_MARK!r} … {END_MARK!r} section")
    head = document[: start + len(BEGIN_MARK)]
    return f"{head}\n\n{markdown_table()}\n{document[end:]}"


# docs/how-it-works.md's table of the rules a tool call meets, in the engine's order: the step each
# family is. `ruleids._TABLE` lists these rules first, up to `default.allow`; `message.` rules (other
# requests) have a table of their own there.
CALL_STEPS: Mapping[str, str] = MappingProxyType(
    {
        "policy": "0",
        "call": "0",
        "pin": "1. pins",
        "budget": "2. budget",
        "constraint": "3. arguments",
        "sink": "4. sink gate, send",
        "fetch": "4. sink gate, fetch",
        "program": "4. sink gate, program",
        "consequence": "4. consequence",
        "approval": "approval",
        "default": "5",
    }
)
CALL_BEGIN_MARK = (
    "<!-- call rules: generated from bouncerd/core/ruleids.py by ruledocs.with_call_rules_section; "
    "do not edit -->"
)
CALL_END_MARK = "<!-- call rules: end -->"


def call_rules() -> tuple[RuleInfo, ...]:
    """The verdict rules of a tool call, in the order of `CALL_STEPS` (table order within a step)."""
    ids = list(RULES)
    path = [RULES[i] for i in ids[: ids.index("default.allow") + 1]]
    steps = list(CALL_STEPS)
    chosen = [r for r in path if r.family in CALL_STEPS and "event" not in r.verdicts]
    return tuple(sorted(chosen, key=lambda r: steps.index(r.family)))


def call_rules_table() -> str:
    """`call_rules` as the Markdown table of docs/how-it-works.md: step (on its first rule), rule,
    verdict, when."""
    lines = ["| step | rule | verdict | when |", "| --- | --- | --- | --- |"]
    shown = ""
    for r in call_rules():
        step = CALL_STEPS[r.family]
        lines.append(
            f"| {step if step != shown else ''} | `{r.id}` | {', '.join(r.verdicts)} | {_cell(r.meaning)} |"
        )
        shown = step
    return "\n".join(lines) + "\n"


def with_call_rules_section(document: str) -> str:
    """`document` with the text between CALL_BEGIN_MARK and CALL_END_MARK replaced by
    `call_rules_table()`."""
    start, end = document.find(CALL_BEGIN_MARK), document.find(CALL_END_MARK)
    if start < 0 or end < start:
        raise ValueError(f"the document has no {CALL_BEGIN_MARK!r} … {CALL_END_MARK!r} section")
    head = document[: start + len(CALL_BEGIN_MARK)]
    return f"{head}\n\n{call_rules_table()}\n{document[end:]}"
