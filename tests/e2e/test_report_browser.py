"""The HTML review pack as a reviewer sees it: rendered by a real headless Chromium at 1400 and 420 px.

The pack is built from a real audit log (written by `AuditLog`) and a tool list, rendered by
`bouncerctl.report.html`, then opened in Debian's `chromium --headless`, driven through the DevTools
protocol (`cdp.Browser`): the viewport is set to each width, the page loaded, and one expression
measures the laid-out DOM. (The pack itself has no script; nothing is added to it.)
The assertions are on what Chromium laid out: nothing wider than the viewport, every nav link on
screen, the look-alike destination flagged with its codepoints in a box that has a size, terms
defined, findings ranked, and a timeline with more than one bar. A screenshot of each width is kept
beside the test's temporary files for a person to look at. Skipped, saying why, without chromium (a
failure in CI: scripts/setup installs it, see tests/conftest.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from bouncerctl.report import html as pack_html
from bouncerctl.report.build import BUCKET_WIDTHS, Aggregator, read_log
from bouncerctl.report.review import build_pack
from bouncerctl.report.sources import Sources, load_tools_file
from cdp import Browser

from bouncerd.core.policy import merge
from bouncerd.server.audit import AuditLog

pytestmark = pytest.mark.e2e

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
VIEWPORT_HEIGHT = 900
WIDTHS = (1400, 420)
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
RECORDS, STEP = 12, 7  # the audit log: this many verdicts, this many seconds apart
LOOKALIKE = "Backup <ATTACKER+backup@\uff25\uff36\uff29\uff2c.example>"  # fullwidth EVIL
LONG_UPSTREAM = (
    "/home/someone/.local/share/virtualenvs/helpdesk-4f8a2c/bin/python3",
    "-m",
    "helpdesk.server",
)

TOOLS = {
    "tools": [
        {"name": "send_email", "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}}},
        *(
            {"name": name, "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}}}
            for name in ("read_ticket", "list_tickets", "list_customers", "get_customer", "read_notes")
        ),
    ]
}

MEASURE = """(() => {
  const vw = window.innerWidth;
  const right = (e) => e.getBoundingClientRect().right;
  const shown = (e) => e.getClientRects().length > 0;
  const rows = (sel) => [...document.querySelectorAll(sel)];
  return {
    viewport: vw,
    scrollWidth: document.documentElement.scrollWidth,
    wide: rows("main *").filter((e) => shown(e) && right(e) > vw + 0.5 && !e.closest(".scroll"))
      .map((e) => e.tagName + " " + (e.textContent || "").slice(0, 50)).slice(0, 10),
    tablesWider: rows("table").filter((t) => right(t) > vw + 0.5).length,
    navOff: rows("nav a").filter((a) => right(a) > vw || a.getBoundingClientRect().left < 0)
      .map((a) => a.textContent),
    navCount: rows("nav a").length,
    flags: rows(".nonascii").map((e) => ({
      text: e.textContent, codepoints: e.dataset.codepoints,
      w: e.getBoundingClientRect().width, h: e.getBoundingClientRect().height,
    })),
    terms: rows("#terms + dl dt").map((e) => e.textContent),
    pinHeaderLinksToTerms: !!document.querySelector('th a[href="#terms"]'),
    severities: rows("#findings + .scroll tbody td:first-child .badge").map((e) => e.textContent),
    findings: rows("#findings + .scroll tbody tr").map((e) => e.textContent.replace(/\\s+/g, " ")),
    bars: rows("svg g").length,
    filled: rows("svg g").filter((g) => g.querySelector("rect")).length,
  };
})()"""


def _log(path: Path) -> None:
    records: list[dict[str, Any]] = [
        {"session": "s1", "client": "claude-code", "server": "helpdesk", "tool": "read_ticket",
         "arguments": {}, "verdict": "allow", "rule": "default.allow", "reason": "no rule objected"},
        {"session": "s1", "server": "helpdesk", "tool": "send_email", "arguments": {"to": LOOKALIKE},
         "verdict": "deny", "rule": "sink.tainted_destination", "destination": LOOKALIKE,
         "reason": "destination first appeared in helpdesk/read_ticket"},
        {"session": "s1", "server": "helpdesk", "tool": "export_customers", "arguments": {},
         "verdict": "deny", "rule": "pin.changed_tool", "reason": "the description changed"},
    ]  # fmt: skip
    log, _ = AuditLog.open(path, NOW)
    for i, record in enumerate((records * RECORDS)[:RECORDS]):
        log.append(record, NOW + STEP * i)  # a 77-second log: the timeline must not be one bar
    log.close()


def _page(tmp_path: Path) -> str:
    audit = tmp_path / "audit.jsonl"
    _log(audit)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    servers = load_tools_file(tools, "helpdesk")
    servers[0].upstream = LONG_UPSTREAM
    for tool in servers[0].tools:
        tool["state"] = "pinned"
    servers[0].tools.append({"name": "export_customers", "state": "changed"})
    sources = Sources(servers, "a test", merge([]), "packs only", pins_known=True)
    pack = build_pack(read_log([audit], Aggregator()), sources, generated="2026-01-02 00:00:00Z", filters=[])
    return pack_html.render(pack)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    """The measured DOM at each width (and a screenshot beside the page, for a person to look at)."""
    if CHROMIUM is None:
        pytest.skip(
            "chromium is not installed (scripts/setup installs Debian's chromium where it can: as root "
            "with apt-get); the pack is not rendered"
        )
    tmp = tmp_path_factory.mktemp("pack")
    page = tmp / "pack.html"
    text = _page(tmp)
    assert "<script" not in text  # the pack itself never carries a script
    page.write_text(text, encoding="utf-8")
    out: dict[int, dict[str, Any]] = {}
    with Browser(CHROMIUM, tmp / "profile") as browser:
        for width in WIDTHS:
            browser.open(page.as_uri(), width, VIEWPORT_HEIGHT)
            out[width] = browser.evaluate(MEASURE)
            browser.screenshot(tmp / f"pack-{width}.png")
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_pack_fits_the_viewport_and_its_nav_is_whole(rendered: dict[int, dict[str, Any]], width: int) -> None:
    """At phone width the tables overflowed and the nav was cut."""
    m = rendered[width]
    assert m["viewport"] == width
    assert m["scrollWidth"] <= width, m["wide"]
    assert m["wide"] == []
    assert m["navOff"] == [] and m["navCount"] >= 10
    if width <= 640:
        assert m["tablesWider"] == 0  # stacked into label / value rows, not scrolled sideways


@pytest.mark.parametrize("width", WIDTHS)
def test_lookalike_destination_is_flagged_with_codepoints_in_any_font(
    rendered: dict[int, dict[str, Any]], width: int
) -> None:
    """`ATTACKER+backup@ＥＶＩＬ.example` rendered as tofu boxes: the flag spells it in ASCII."""
    flags = rendered[width]["flags"]
    assert flags, "no non-ASCII flag in the rendered pack"
    flag = next(f for f in flags if "ATTACKER" in f["text"])
    assert "ATTACKER+backup@\\uff25\\uff36\\uff29\\uff2c.example" in flag["text"]
    assert "U+FF25 FULLWIDTH LATIN CAPITAL LETTER E" in flag["codepoints"]
    assert flag["w"] > 0 and flag["h"] > 0  # laid out, not hidden


def test_terms_are_defined_and_the_pin_column_points_at_them(rendered: dict[int, dict[str, Any]]) -> None:
    """Every tool row said "Pin: not listed" with nothing saying what that means."""
    m = rendered[1400]
    for term in ("pin", "pinned", "changed", "new", "not listed", "fallback", "read-only", "non-ASCII"):
        assert term in m["terms"]
    assert m["pinHeaderLinksToTerms"]


def test_findings_are_ranked_and_read_only_tools_are_one_finding(rendered: dict[int, dict[str, Any]]) -> None:
    """Five medium "fallback" findings for read-only tools buried the one high."""
    m = rendered[1400]
    ranks = {"high": 0, "medium": 1, "low": 2}
    order = [ranks[s] for s in m["severities"]]
    assert order == sorted(order) and order[0] == 0
    grouped = [f for f in m["findings"] if "read-only tool(s) covered only by the fallback" in f]
    assert len(grouped) == 1 and "6 read-only" in grouped[0]  # export_customers too
    singles = [f for f in m["findings"] if f.startswith("medium") and "covered only by the fallback" in f]
    assert singles and all("not gated" not in f for f in singles)  # only the gated guess stays medium


def _expected_bars() -> tuple[int, int]:
    """(bars, bars with a verdict) by the timeline's rule (report/build.py): the narrowest bucket width
    that draws the log's span in at most MAX_BARS bars, one bar per width from the first verdict's
    bucket to the last's, empty ones included. The log is RECORDS verdicts STEP seconds apart from NOW
    (midnight, so every width's buckets start on it)."""
    span = STEP * (RECORDS - 1)
    width = next(w for w in BUCKET_WIDTHS if span // w + 1 <= pack_html.MAX_BARS)
    return span // width + 1, len({STEP * i // width for i in range(RECORDS)})


def test_timeline_scales_to_the_span_of_the_log(rendered: dict[int, dict[str, Any]]) -> None:
    """A log of a minute or two was drawn as one bar."""
    bars, filled = _expected_bars()
    assert (rendered[1400]["bars"], rendered[1400]["filled"]) == (bars, filled)


def test_timeline_bars_follow_the_rule_without_a_browser(tmp_path: Path) -> None:
    """The same count from the page's markup, so it is checked where no chromium is installed."""
    bars, filled = _expected_bars()
    text = _page(tmp_path)
    svg = text[text.index('aria-label="verdicts over time"') :]
    groups = svg[: svg.index("</svg>")].split("<g>")[1:]
    assert (len(groups), sum(1 for g in groups if "<rect" in g)) == (bars, filled)
