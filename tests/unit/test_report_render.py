"""The review pack as rendered: no argument value ever, escaped names, one self-contained HTML file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from bouncerctl.app import main
from bouncerctl.report import html, markdown
from bouncerctl.report.build import Aggregator, read_log
from bouncerctl.report.review import Pack, build_pack
from bouncerctl.report.sources import Sources, load_tools_file
from click.testing import CliRunner

from bouncerd.core.policy import merge
from bouncerd.server.audit import AuditLog

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
MARKER = "ARGVALUE-7f3e9c1d"  # planted in arguments only; must appear in no report
EVIL = "exfil@attacker.example"
HOSTILE = "<img src=x onerror=alert(1)>|`[x](http://e.example)"

TOOLS = {
    "tools": [
        {"name": "send_email", "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}}},
        {"name": "write_file", "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}},
        {
            "name": "delete_message",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
        {"name": "read_inbox", "inputSchema": {"type": "object"}},
    ]
}


def _log(path: Path) -> None:
    prov = {
        "server": "mail",
        "tool": "read_inbox",
        "request_id": 4,
        "ts": NOW,
        "field": None,
        "identity": False,
    }
    records: list[dict[str, Any]] = [
        {"session": "s1", "client": "claude-code", "server": "mail", "tool": "read_inbox", "arguments": {},
         "verdict": "allow", "rule": "default.allow", "reason": "no rule objected"},
        {"session": "s1", "server": "mail", "tool": "send_email", "arguments": {"to": EVIL, "body": MARKER},
         "verdict": "deny", "rule": "sink.tainted_destination", "destination": EVIL, "provenance": prov,
         "reason": f"destination {EVIL!r} first appeared in mail/read_inbox"},
        {"session": "s1", "server": "mail", "tool": "write_file", "arguments": {"path": f"/etc/{MARKER}"},
         "verdict": "deny", "rule": "constraint.path",
         "reason": f"write parameter 'path' '/etc/{MARKER}' is outside the allowed path prefixes"},
        {"session": "s1", "server": "mail", "tool": "send_email", "arguments": {"to": HOSTILE, "x": MARKER},
         "verdict": "ask", "rule": "sink.unproven", "destination": HOSTILE,
         "reason": f"{MARKER} is not allowlisted"},
        {"session": "s1", "server": "mail", "tool": "send_email", "arguments_sha256": "ab" * 32,
         "verdict": "allow", "rule": "approval.once", "reason": f"approved {MARKER}"},
        {"rule": "approval.granted", "server": "mail", "tool": "send_email", "destination": HOSTILE,
         "reason": f"a person approved code X for {MARKER}"},
    ]  # fmt: skip
    log, _ = AuditLog.open(path, NOW)
    for i, record in enumerate(records):
        log.append(record, NOW + 60 * i)
    log.close()


def _pack(tmp_path: Path) -> Pack:
    audit = tmp_path / "audit.jsonl"
    _log(audit)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    sources = Sources(load_tools_file(tools, "mail"), "a test", merge([]), "packs only")
    log = read_log([audit], Aggregator())
    return build_pack(log, sources, generated="2026-01-02 00:00:00Z", filters=[])


@pytest.fixture
def pack(tmp_path: Path) -> Pack:
    return _pack(tmp_path)


def test_argument_values_appear_in_neither_format(pack: Pack) -> None:
    for text in (markdown.render(pack), html.render(pack)):
        assert MARKER not in text
        assert EVIL in text  # the denied destination is shown
        assert "mail / read_inbox, request 4" in text  # with its provenance


def test_the_html_file_loads_nothing_from_anywhere(pack: Pack) -> None:
    page = html.render(pack)
    assert page.startswith("<!doctype html>") and page.count("<style>") == 1
    for forbidden in ("<script", "<link", "url(", "@import", "<iframe", "<img", "<object", "<embed"):
        assert forbidden not in page, forbidden
    assert re.findall(r"<[^>]*\bsrc=", page) == []
    assert all(link.startswith("#") for link in re.findall(r'href="([^"]*)"', page))
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert svg.count("<rect") >= 3  # allow, ask and deny bars
    assert re.findall(r'fill="(#[0-9a-f]{6})"', svg)


def test_hostile_destination_is_shown_as_text(pack: Pack) -> None:
    page = html.render(pack)
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    text = markdown.render(pack)
    [row] = [line for line in text.splitlines() if "onerror" in line and line.startswith("| ")]
    assert "``" in row  # in a code span that survives the backtick
    columns = re.split(r"(?<!\\)\|", row)[1:-1]
    assert len(columns) == 8  # its | did not add a column


def test_findings_name_the_gaps_in_the_tools_controls(pack: Pack) -> None:
    found = {(f.title, f.subject) for f in pack.findings}
    assert ("writes without confinement", "mail / write_file") in found
    assert ("deletion without a budget", "mail / delete_message") in found
    assert ("covered only by the fallback", "mail / send_email") in found
    assert ("sends without an allowlist", "mail / send_email") in found
    [send] = [t for t in pack.servers[0].tools if t.tool == "send_email"]
    assert send.controls == ["send gate on to", "no allowlist"] and send.calls == {
        "deny": 1,
        "ask": 1,
        "allow": 1,
    }


def test_owasp_rows_are_the_2025_list_in_order() -> None:
    from bouncerctl.report import mappings

    names = [
        "Prompt Injection",
        "Sensitive Information Disclosure",
        "Supply Chain",
        "Data and Model Poisoning",
        "Improper Output Handling",
        "Excessive Agency",
        "System Prompt Leakage",
        "Vector and Embedding Weaknesses",
        "Misinformation",
        "Unbounded Consumption",
    ]
    rows = mappings.owasp(_empty_log())
    assert [(r.ref, r.name) for r in rows] == [(f"LLM{i:02d}:2025", n) for i, n in enumerate(names, start=1)]


def _empty_log() -> Any:
    return read_log([], Aggregator())


def test_mapping_evidence_points_at_rules_and_lines(pack: Pack) -> None:
    llm01 = pack.owasp[0]
    assert llm01.evidence == ("sink.tainted_destination: 1 deny (audit.jsonl:2)",)
    e015 = next(r for r in pack.aiuc if r.ref == "E015")
    assert e015.evidence[0] == "6 lines in audit.jsonl" and "chain intact" in e015.evidence[1]
    llm06 = pack.owasp[5]
    assert any(e.startswith("approval.granted: 1 event (audit.jsonl:6)") for e in llm06.evidence)


# ---- the command ---------------------------------------------------------------------------------


def _cli(tmp_path: Path, *args: str) -> Any:
    audit = tmp_path / "audit.jsonl"
    if not audit.exists():
        _log(audit)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    env = {"BOUNCER_HOME": str(tmp_path / "home")}
    return CliRunner().invoke(main, ["report", "--no-daemon", "--audit", str(audit), *args], env=env)


def test_report_writes_html_when_the_output_says_so(tmp_path: Path) -> None:
    out = tmp_path / "pack.html"
    result = _cli(tmp_path, "--tools", str(tmp_path / "tools.json"), "--server", "mail", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"wrote {out}: 5 calls,") and "chain intact" in result.stderr
    page = out.read_text()
    assert page.startswith("<!doctype html>") and MARKER not in page


def test_report_to_stdout_is_markdown_and_honours_the_dates(tmp_path: Path) -> None:
    result = _cli(tmp_path, "--since", "2026-01-01T00:01:00+00:00", "--until", "2026-01-01T00:03:00Z")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Bouncer review pack")
    assert "| Calls decided | 2: allow 0, ask 0, deny 2 |" in result.stdout
    assert "Filters: since 2026-01-01T00:01:00.000Z; until 2026-01-01T00:03:00.000Z." in result.stdout


def test_a_date_that_is_not_one_is_a_usage_error(tmp_path: Path) -> None:
    result = _cli(tmp_path, "--since", "yesterday")
    assert result.exit_code == 2 and "'yesterday' is not a date" in result.stderr


def test_a_tools_file_that_is_not_a_tools_list_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"mail": 3}')
    result = _cli(tmp_path, "--tools", str(bad))
    assert result.exit_code == 1 and "is not a tools/list result" in result.stderr


def test_report_without_a_log_still_reviews_the_tools(tmp_path: Path) -> None:
    env = {"BOUNCER_HOME": str(tmp_path / "home")}
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    result = CliRunner().invoke(main, ["report", "--tools", str(tools)], env=env)
    assert result.exit_code == 0, result.output
    assert "there is no audit log at" in result.stdout and "`write_file`" in result.stdout


def test_lookalike_destination_is_spelled_in_ascii_in_both_formats() -> None:
    """`ATTACKER+backup@ＥＶＩＬ.example` renders as tofu or as plain EVIL depending on the font."""
    dest = "ATTACKER+backup@\uff25\uff36\uff29\uff2c.example"
    md = markdown.code(dest)
    assert "**non-ASCII:** `ATTACKER+backup@\\uff25\\uff36\\uff29\\uff2c.example`" in md
    assert "U+FF25 FULLWIDTH LATIN CAPITAL LETTER E" in md
    page = html.code(dest)
    assert 'class="nonascii"' in page and "U+FF2C FULLWIDTH LATIN CAPITAL LETTER L" in page
    assert html.code("plain@example.com") == "<code>plain@example.com</code>"  # no flag on ASCII


def test_both_formats_define_the_terms_they_use(pack: Pack) -> None:
    for page in (markdown.render(pack), html.render(pack)):
        for term in ("not listed", "fallback", "sink gate", "non-ASCII", "audit chain"):
            assert term in page
    assert "## Terms used in this pack" in markdown.render(pack)
    assert 'id="terms"' in html.render(pack)
