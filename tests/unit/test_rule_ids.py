"""The one table of rule ids: the source, the engine's verdicts, the report and the docs all agree with it."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from bouncerctl.report import mappings
from bouncerctl.report.build import Aggregator, LogRead

from bouncerd.core import ruledocs, ruleids
from bouncerd.core.audit import ChainResult
from bouncerd.core.model import Verdict
from bouncerd.core.ruleids import FAMILIES, RULES, RuleInfo

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("bouncerd", "shim", "cli")
DOCS = ROOT / "docs" / "policy.md"
REGENERATE = (
    ".venv/bin/python -c 'import pathlib; from bouncerd.core import ruledocs; "
    'p = pathlib.Path("docs/policy.md"); p.write_text(ruledocs.with_rules_section(p.read_text()))\''
)
ADD_A_ROW = (
    "add a row for it to _TABLE in bouncerd/core/ruleids.py (verdicts, meaning, OWASP and AIUC-1 "
    f"mappings, what it stops), then regenerate the Rules section of docs/policy.md: {REGENERATE}"
)

# Literals that look like rule ids (a family, a dot, a word) and are not.
NOT_RULE_IDS = {
    "policy.yaml": "the policy file's name",
    "audit.jsonl": "the audit log's file name",
}
_LOOKS_LIKE_ID = re.compile(rf"(?:{'|'.join(FAMILIES)})\.[a-z][a-z_]*")
_BUILT_ID = re.compile(rf"(?:{'|'.join(FAMILIES)})\.[a-z_]*")


def _sources() -> Iterator[Path]:
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def _text(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_verdict_call(node: ast.Call) -> bool:
    f = node.func
    return (isinstance(f, ast.Name) and f.id == "Verdict") or (
        isinstance(f, ast.Attribute) and f.attr == "Verdict"
    )


def _argument(node: ast.Call, index: int, name: str) -> ast.expr | None:
    if len(node.args) > index:
        return node.args[index]
    return next((k.value for k in node.keywords if k.arg == name), None)


def _problems(code: str, where: str) -> Iterator[str]:
    """Every rule id this code names that the table does not list, or lists with other verdicts."""
    tree = ast.parse(code, filename=where)

    def unknown(node: ast.AST, rule: str) -> str:
        return f"{where}:{getattr(node, 'lineno', '?')}: rule id {rule!r} is not in the table"

    def check(node: ast.AST, rule: str, kind: str | None) -> Iterator[str]:
        info = RULES.get(rule)
        if info is None:
            yield unknown(node, rule)
        elif kind is not None and kind not in info.verdicts:
            yield (
                f"{where}:{getattr(node, 'lineno', '?')}: rule {rule!r} gives {kind!r} here, but the table "
                f"lists only {', '.join(info.verdicts)}; add {kind!r} to its verdicts"
            )

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _LOOKS_LIKE_ID.fullmatch(node.value) and node.value not in NOT_RULE_IDS:
                yield from check(node, node.value, None)
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = _text(node.values[0])
            if first is not None and len(node.values) > 1 and _BUILT_ID.fullmatch(first):
                yield f"{where}:{node.lineno}: a rule id built at run time (f{first!r}…): write each id whole"
        elif isinstance(node, ast.Call):
            if _is_verdict_call(node):
                rule, kind = _text(_argument(node, 1, "rule")), _text(_argument(node, 0, "verdict"))
                if rule is not None:
                    yield from check(node, rule, kind)
            for k in node.keywords:
                rule = _text(k.value)
                if k.arg == "rule" and rule is not None:
                    yield from check(node, rule, None)
        elif isinstance(node, ast.Dict):
            fields = {
                _text(k): v for k, v in zip(node.keys, node.values, strict=True) if _text(k) is not None
            }
            rule = _text(fields.get("rule"))
            if rule is not None:
                verdict = fields.get("verdict")
                is_null = verdict is None or (isinstance(verdict, ast.Constant) and verdict.value is None)
                yield from check(node, rule, "event" if is_null else _text(verdict))


def test_every_rule_id_in_the_source_is_in_the_table() -> None:
    problems = [p for path in _sources() for p in _problems(path.read_text(), str(path.relative_to(ROOT)))]
    assert not problems, "\n".join(problems) + f"\n\nFor a new rule, {ADD_A_ROW}"


def test_every_rule_in_the_table_is_given_somewhere_in_the_source() -> None:
    named: set[str] = set()
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            text = _text(node)
            if text is not None and text in RULES:
                named.add(text)
    stale = sorted(set(RULES) - named)
    assert not stale, (
        f"no code gives {stale}: remove their rows from bouncerd/core/ruleids.py, or rename them"
    )


def test_the_scan_finds_a_rule_missing_from_the_table() -> None:
    code = (
        "V = Verdict('deny', 'sink.not_a_rule', 'x')\n"
        "W = Verdict('allow', 'sink.tainted_destination', 'x')\n"
        "R = {'rule': 'resource.not_a_rule', 'reason': 'x'}\n"
        "F = f'fetch.{kind}'\n"
        "S = 'policy.yaml'\n"
    )
    problems = list(_problems(code, "probe.py"))
    assert any("'sink.not_a_rule' is not in the table" in p for p in problems)
    assert any("'sink.tainted_destination' gives 'allow' here" in p for p in problems)
    assert any("'resource.not_a_rule' is not in the table" in p for p in problems)
    assert any("built at run time" in p for p in problems)
    assert not any("policy.yaml" in p for p in problems)


def test_a_verdict_with_a_rule_id_not_in_the_table_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'sink\.made_up' is not in bouncerd/core/ruleids\.py"):
        Verdict("deny", "sink.made_up", "no such rule")
    with pytest.raises(ValueError, match=r"'sink\.trusted' gives 'deny'"):
        Verdict("deny", "sink.trusted", "sink.trusted only allows")
    assert Verdict("deny", "sink.tainted_destination", "planted").rule == "sink.tainted_destination"


def test_the_reserved_families_need_only_a_row() -> None:
    assert {"resource", "prompt", "completion", "message"} <= set(FAMILIES)
    table = ruleids._build(
        (RuleInfo("resource.planted_uri", ("deny",), "m", ("LLM01:2025",), ("B002",), "s"),)
    )
    assert table["resource.planted_uri"].family == "resource"


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (RuleInfo("nosuch.rule", ("deny",), "m", (), (), "—"), "has no family 'nosuch'"),
        (RuleInfo("sink.Bad", ("deny",), "m", (), (), "—"), "is not family.name"),
        (RuleInfo("sink.x", (), "m", (), (), "—"), "lists no verdicts"),
        (RuleInfo("sink.x", ("deny",), "m", ("LLM11:2025",), (), "—"), "OWASP entry not in the 2025 list"),
        (RuleInfo("sink.x", ("deny",), "m", (), ("B001",), "—"), "unchecked AIUC-1 control"),
        (RuleInfo("sink.x", ("deny",), "", (), (), "—"), "has no meaning"),
    ],
)
def test_a_bad_row_is_refused_when_the_table_is_built(row: RuleInfo, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        ruleids._build((row,))


def test_a_rule_listed_twice_is_refused() -> None:
    row = RuleInfo("sink.x", ("deny",), "m", (), (), "—")
    with pytest.raises(ValueError, match="listed twice"):
        ruleids._build((row, row))


def test_the_docs_rules_section_is_the_generated_table() -> None:
    text = DOCS.read_text()
    assert ruledocs.BEGIN_MARK in text and ruledocs.END_MARK in text, "docs/policy.md lost its Rules markers"
    assert ruledocs.with_rules_section(text) == text, (
        f"the Rules section of docs/policy.md is not what bouncerd/core/ruleids.py gives; regenerate it: "
        f"{REGENERATE}"
    )
    for rule_id in RULES:
        assert f"| `{rule_id}` |" in text


# ---- the report reads the table -----------------------------------------------------------------------


def _log_of(*records: tuple[str, str | None]) -> LogRead:
    agg = Aggregator()
    for n, (rule, verdict) in enumerate(records, start=1):
        agg.feed((0, n), {"ts": "2026-01-01T00:00:00.000Z", "rule": rule, "verdict": verdict, "server": "s"})
    return LogRead([Path("audit.jsonl")], ChainResult(True, len(records), ("audit.jsonl",), "0" * 64), agg)


def _rows_showing(rule: str, log: LogRead) -> set[str]:
    """The refs of the report rows whose evidence names `rule`."""
    rows = [*mappings.owasp(log), *mappings.aiuc(log)]
    return {
        ref for r in rows if any(e.startswith(f"{rule}: ") for e in r.evidence) for ref in r.ref.split(", ")
    }


@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_report_shows_a_rule_exactly_in_the_rows_the_table_maps_it_to(rule: str) -> None:
    info = RULES[rule]
    log = _log_of(*[(rule, None if kind == "event" else kind) for kind in info.verdicts])
    assert _rows_showing(rule, log) == {*info.owasp, *info.aiuc}


def test_taint_rows_show_the_planted_destination_rules() -> None:
    taint = {
        "sink.tainted_destination",
        "sink.tainted_ask",
        "sink.tainted_identity",
        "sink.tainted_named_source",
        "sink.planted_name",
        "sink.dictated_content",
        "sink.named_source_orders",
        "sink.evicted",
        "fetch.tainted_host_new_path",
        "fetch.named_source",
        "fetch.carries_tainted",
        "fetch.evicted",
        "fetch.blind",
        "program.carries_tainted",
        "default.tainted_argument",
    }
    assert set(ruleids.mapped_to("LLM01:2025")) == set(ruleids.mapped_to("B002")) == taint


def test_a_rule_the_table_does_not_know_counts_for_what_its_family_shares() -> None:
    log = _log_of(("sink.from_a_newer_version", "ask"), ("pin.retired", "deny"), ("nosuch.rule", "deny"))
    assert _rows_showing("sink.from_a_newer_version", log) == {"LLM02:2025", "A004", "A006", "D003"}
    assert _rows_showing("pin.retired", log) == {"LLM03:2025", "B006", "D003"}
    assert _rows_showing("nosuch.rule", log) == set()


def test_a_verdict_rule_on_a_line_without_a_verdict_is_not_evidence() -> None:
    log = _log_of(("sink.tainted_destination", None), ("approval.granted", None))
    assert _rows_showing("sink.tainted_destination", log) == set()
    assert _rows_showing("approval.granted", log) == {"LLM06:2025"}
