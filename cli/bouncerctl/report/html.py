"""The review pack as one self-contained HTML file: inline CSS, an inline SVG timeline, no scripts.

Every value from the log or the policy is escaped (`esc`) before it is placed, in text and in
attributes alike, so a destination such as ``<script>`` shows as text. The file loads nothing:
no fonts, images, styles or scripts from anywhere, so it opens the same offline, attached to a
ticket or mailed to a reviewer. Argument values are not in the `Pack`, so they cannot appear here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from bouncerctl.report.mappings import AIUC_NOTE, Row
from bouncerctl.report.review import (
    SCHEMA_NOTE,
    TERMS,
    Pack,
    ascii_spelling,
    calls_text,
    odd_chars,
    provenance_text,
    utc_seconds,
    when,
    width_label,
)

# Bars in the timeline: enough to see a working day by the quarter hour, few enough to stay readable.
MAX_BARS = 96
CHART_W, CHART_H, PAD_L, PAD_B, PAD_T = 960, 200, 44, 28, 12
# A bar never gets wider than this, so a short log does not become one slab across the chart.
MAX_BAR_W = 36
COLOURS = {"allow": "#2e9e5b", "ask": "#e0a500", "deny": "#d64541"}
# Rows per table before it is cut (the counts above it still cover everything).
MAX_TABLE_ROWS = 300

CSS = """
:root{--fg:#1d2430;--muted:#5d6778;--line:#e3e7ee;--bg:#fff;--soft:#f6f8fb;--accent:#2b59c3}
*{box-sizing:border-box}
body{margin:0;background:var(--soft);color:var(--fg);font:14px/1.5 -apple-system,BlinkMacSystemFont,
"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1120px;margin:0 auto;padding:28px 24px 60px;overflow-wrap:break-word}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:36px 0 10px;padding-bottom:6px;
border-bottom:1px solid var(--line)}h3{font-size:15px;margin:22px 0 6px}
.meta{color:var(--muted);margin:0 0 18px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:12px;margin:18px 0}
.card{background:var(--bg);border:1px solid var(--line);border-radius:8px;padding:12px 14px}
.card .k{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.card .v{font-size:22px;font-weight:600;margin-top:2px}
.card.allow .v{color:#2e9e5b}.card.ask .v{color:#b58500}.card.deny .v{color:#d64541}
.card.bad{border-color:#d64541;background:#fff5f5}.card.good .v{color:#2e9e5b}.card.bad .v{color:#d64541}
section.box{background:var(--bg);border:1px solid var(--line);border-radius:8px;padding:14px 16px}
table{border-collapse:collapse;width:100%;background:var(--bg);border:1px solid var(--line);
border-radius:8px;overflow:hidden;margin:6px 0 4px}
th,td{text-align:left;vertical-align:top;padding:7px 10px;border-bottom:1px solid var(--line)}
th{background:var(--soft);font-size:12px;text-transform:uppercase;letter-spacing:.03em;color:var(--muted)}
tr:last-child td{border-bottom:0}td.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--soft);
padding:1px 4px;border-radius:4px;overflow-wrap:break-word}
.scroll{overflow-x:auto}nav{margin:0 0 8px;font-size:13px}nav a{color:var(--accent);text-decoration:none;
margin-right:12px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;
white-space:nowrap}
.high{background:#fde2e1;color:#a12622}.medium{background:#fff1cc;color:#8a6100}
.low{background:#e6eefc;color:#2b59c3}.enforced{background:#dff3e6;color:#1d7342}
.partial{background:#fff1cc;color:#8a6100}.none{background:#eceff3;color:#5d6778}
.v-allow{color:#2e9e5b;font-weight:600}.v-ask{color:#b58500;font-weight:600}
.v-deny{color:#d64541;font-weight:600}
details{margin:6px 0 0}summary{cursor:pointer;color:var(--accent)}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:10px;overflow:auto;
font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
ul{margin:6px 0;padding-left:20px}li{margin:3px 0}.muted{color:var(--muted)}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:10px;
height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
svg text{font:11px -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,Arial,sans-serif;fill:#5d6778}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:16px}.cols>div{min-width:0}
@media(max-width:800px){.cols{grid-template-columns:1fr}}
nav{display:flex;flex-wrap:wrap;gap:4px 14px}nav a{margin:0;white-space:nowrap}
.nonascii{display:block;margin-top:3px;padding:2px 6px;border-left:3px solid #d64541;background:#fff5f5;
color:#a12622;font-size:12px;overflow-wrap:anywhere}.nonascii code{background:none;padding:0}
dl.terms{display:grid;grid-template-columns:max-content 1fr;gap:6px 16px;margin:6px 0}
dl.terms dt{font-weight:600}dl.terms dd{margin:0}
@media(max-width:640px){
main{padding:16px 10px 40px}
.scroll table,.scroll thead,.scroll tbody,.scroll tr,.scroll td{display:block;width:100%}
.scroll thead{display:none}.scroll tr{border-bottom:1px solid var(--line);padding:4px 0}
.scroll td{border:0;padding:3px 10px;text-align:left}
.scroll td[data-label]::before{content:attr(data-label);display:block;font-size:11px;color:var(--muted);
text-transform:uppercase;letter-spacing:.03em}
dl.terms{grid-template-columns:1fr}dl.terms dd{margin:0 0 6px}
}
"""


NAV = (
    "<nav>"
    + "".join(
        f'<a href="#{anchor}">{text}</a>'
        for anchor, text in (
            ("findings", "Findings"),
            ("tools", "Tools"),
            ("verdicts", "Verdicts"),
            ("destinations", "Destinations"),
            ("events", "Events"),
            ("scope", "Scope"),
            ("owasp", "OWASP"),
            ("aiuc", "AIUC-1"),
            ("terms", "Terms"),
            ("about", "About"),
        )
    )
    + "</nav>"
)


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def code(value: object) -> str:
    """A name or destination in a code span; one holding a character outside printable ASCII gets a
    flag beside it with its ASCII spelling and each odd character named, which no font can hide."""
    text = str(value)
    odd = odd_chars(text)
    if not odd:
        return f"<code>{esc(text)}</code>"
    return (
        f'<code>{esc(text)}</code><span class="nonascii" data-codepoints="{esc(" ".join(odd))}">'
        f"non-ASCII: <code>{esc(ascii_spelling(text))}</code> ({esc('; '.join(odd))})</span>"
    )


def table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Iterable[int] = ()) -> str:
    nums = set(numeric)
    head = "".join(f"<th>{h if h.startswith('<') else esc(h)}</th>" for h in header)
    labels = [esc(h.split(">")[1].split("<")[0] if h.startswith("<") else h) for h in header]
    body: list[str] = []
    n = 0
    for n, row in enumerate(rows, start=1):
        if n > MAX_TABLE_ROWS:
            continue
        cells = "".join(
            f'<td class="n" data-label="{labels[i]}">{c}</td>'
            if i in nums
            else f'<td data-label="{labels[i]}">{c}</td>'
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    if n > MAX_TABLE_ROWS:
        body.append(
            f'<tr><td colspan="{len(header)}" class="muted">… {n - MAX_TABLE_ROWS} more rows</td></tr>'
        )
    rows_html = "".join(body)
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{rows_html}</tbody></table></div>'
    )


def verdict(v: str) -> str:
    return f'<span class="v-{esc(v)}">{esc(v)}</span>'


def render(pack: Pack) -> str:
    s = pack.log.summary
    files = ", ".join(p.name for p in pack.log.files) or "(none)"
    filters = f" · filters: {esc('; '.join(pack.filters))}" if pack.filters else ""
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>Bouncer review pack</title>",
        f"<style>{CSS}</style></head><body><main>",
        "<h1>Bouncer review pack</h1>",
        f'<p class="meta">Generated {esc(pack.generated)} · log {esc(files)} ({s.lines} lines) · period '
        f"{esc(when(s.first_ts))} to {esc(when(s.last_ts))} (UTC){filters}</p>",
        NAV,
        _cards(pack),
        _timeline(pack),
        _findings(pack),
        _tools(pack),
        _counts(pack),
        _destinations(pack),
        _events(pack),
        _scope(pack),
        _mapping("OWASP Top 10 for LLM Applications (2025)", pack.owasp, "Risk", anchor="owasp"),
        _mapping("AIUC-1", pack.aiuc, "Control", AIUC_NOTE, anchor="aiuc"),
        _terms(),
        _about(pack),
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _cards(pack: Pack) -> str:
    s = pack.log.summary
    chain = pack.log.chain
    high = sum(1 for f in pack.findings if f.severity == "high")
    cards = [
        ("", "Calls decided", str(sum(s.verdicts.values()))),
        ("allow", "Allowed", str(s.verdicts["allow"])),
        ("ask", "Asked", str(s.verdicts["ask"])),
        ("deny", "Denied", str(s.verdicts["deny"])),
        ("good" if chain.ok else "bad", "Audit chain", "intact" if chain.ok else "broken"),
        ("bad" if high else "", "Findings", f"{len(pack.findings)}" + (f" ({high} high)" if high else "")),
        ("bad" if s.malformed else "", "Malformed lines", str(s.malformed)),
        (
            "",
            "Servers / sessions",
            f"{len(s.by_server)} / {len(s.sessions)}{'+' if s.sessions_overflow else ''}",
        ),
    ]
    body = "".join(
        f'<div class="card {cls}"><div class="k">{esc(k)}</div><div class="v">{esc(v)}</div></div>'
        for cls, k, v in cards
    )
    return f'<div class="cards">{body}</div>'


def timeline_svg(bars: Sequence[tuple[int, list[int]]], width: int) -> str:
    top = max((sum(c) for _, c in bars), default=0) or 1
    plot_w, plot_h = CHART_W - PAD_L - 8, CHART_H - PAD_B - PAD_T
    step = plot_w / max(len(bars), 1)
    gap = min(2.0, step * 0.2)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {CHART_W} {CHART_H}" width="100%" '
        f'role="img" aria-label="verdicts over time">'
    ]
    for frac in (0.0, 0.5, 1.0):
        y = PAD_T + plot_h * (1 - frac)
        out.append(f'<line x1="{PAD_L}" x2="{CHART_W - 8}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e7ee"/>')
        out.append(f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end">{round(top * frac)}</text>')
    for i, (start, counts) in enumerate(bars):
        bar_w = min(max(step - gap, 1), MAX_BAR_W)
        x = PAD_L + i * step + (step - bar_w) / 2
        y = PAD_T + plot_h
        allow, ask, deny = counts
        label = f"{utc_seconds(start)} +{width_label(width)}: allow {allow}, ask {ask}, deny {deny}"
        out.append(f"<g><title>{esc(label)}</title>")
        for value, name in zip(counts, ("allow", "ask", "deny"), strict=True):
            if value:
                h = plot_h * value / top
                y -= h
                out.append(
                    f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                    f'fill="{COLOURS[name]}"/>'
                )
        out.append("</g>")
    if bars:
        first, last = bars[0][0], bars[-1][0] + width
        out.append(f'<text x="{PAD_L}" y="{CHART_H - 8}">{esc(utc_seconds(first))}</text>')
        out.append(
            f'<text x="{CHART_W - 8}" y="{CHART_H - 8}" text-anchor="end">{esc(utc_seconds(last))}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _timeline(pack: Pack) -> str:
    width, bars = pack.log.summary.timeline.bars(MAX_BARS)
    if not bars:
        return '<h2 id="timeline">Verdicts over time</h2><p class="muted">No verdicts in this period.</p>'
    legend = "".join(f'<span><i style="background:{c}"></i>{n}</span>' for n, c in COLOURS.items())
    return (
        f'<h2 id="timeline">Verdicts over time</h2><section class="box">{timeline_svg(bars, width)}'
        f'<div class="legend muted">{legend} one bar per {esc(width_label(width))} (UTC); hover a bar for '
        "its counts</div></section>"
    )


def _findings(pack: Pack) -> str:
    if not pack.findings:
        return '<h2 id="findings">Findings</h2><p class="muted">Nothing to act on.</p>'
    rows = [
        [
            f'<span class="badge {esc(f.severity)}">{esc(f.severity)}</span>',
            esc(f.title),
            code(f.subject),
            esc(f.detail),
            esc(f.evidence or "-"),
        ]
        for f in pack.findings
    ]
    more = f'<p class="muted">{pack.findings_cut} more findings not listed.</p>' if pack.findings_cut else ""
    header = ["Severity", "Finding", "Where", "Detail", "Evidence"]
    return '<h2 id="findings">Findings</h2>' + table(header, rows) + more


def _tools(pack: Pack) -> str:
    src = pack.sources
    out = [
        '<h2 id="tools">Tools and their controls</h2>',
        f'<p class="muted">Tools from {esc(src.origin)}. Policy: {esc(src.policy_label)}. '
        "Calls are allow / ask / deny in this period.</p>",
    ]
    if pack.schemas_missing:
        out.append(f'<p class="muted">{esc(SCHEMA_NOTE)}</p>')
    if not pack.servers:
        out.append('<p class="muted">No server has listed its tools.</p>')
    for srv in pack.servers:
        upstream = f" {code(' '.join(srv.upstream))}" if srv.upstream else ""
        packs = ", ".join(srv.packs) or "none (fallback only)"
        out.append(f'<h3>{esc(srv.name)}{upstream}</h3><p class="muted">Packs: {esc(packs)}</p>')
        rows = [
            [
                code(t.tool),
                esc(t.state or "unknown"),
                "<br>".join(esc(c) for c in t.controls),
                esc(calls_text(t.calls)),
            ]
            for t in srv.tools
        ]
        pin = '<a href="#terms">Pin</a>'
        out.append(table(["Tool", pin, "Controls", "Calls (allow / ask / deny)"], rows, numeric=[3]))
        detail = "\n".join(f"{t.tool}:\n" + "\n".join(f"  {line}" for line in t.detail) for t in srv.tools)
        out.append(
            "<details><summary>Effective rules with their sources</summary>"
            f"<pre>{esc(detail)}</pre></details>"
        )
    return "".join(out)


def _counts(pack: Pack) -> str:
    s = pack.log.summary
    servers = [
        [code(name), *(str(c.get(k, 0)) for k in ("allow", "ask", "deny")), str(sum(c.values()))]
        for name, c in sorted(s.by_server.items(), key=lambda kv: -sum(kv[1].values()))
    ]
    rules = [
        [code(name), *(str(st.counts.get(k, 0)) for k in ("allow", "ask", "deny")), esc(pack.refs(st))]
        for name, st in sorted(s.by_rule.items(), key=lambda kv: -kv[1].total)
    ]
    left = "<h3>Per server</h3>" + (
        table(["Server", "Allow", "Ask", "Deny", "Total"], servers, numeric=[1, 2, 3, 4])
        if servers
        else "<p>-</p>"
    )
    right = "<h3>Per rule</h3>" + (
        table(["Rule", "Allow", "Ask", "Deny", "Lines"], rules, numeric=[1, 2, 3]) if rules else "<p>-</p>"
    )
    return f'<h2 id="verdicts">Verdicts</h2><div class="cols"><div>{left}</div><div>{right}</div></div>'


def _destinations(pack: Pack) -> str:
    s = pack.log.summary
    head = '<h2 id="destinations">Denied and asked destinations</h2>'
    if not s.destinations:
        return head + '<p class="muted">None in this period.</p>'
    items = sorted(s.destinations.items(), key=lambda kv: (kv[0][1] != "deny", -kv[1].count))
    rows = [
        [
            code(dest),
            verdict(v),
            code(rule),
            esc(f"{server} / {tool}"),
            str(st.count),
            esc(when(st.first_ts)),
            esc(provenance_text(st.provenance)),
            esc(pack.where(st.first)),
        ]
        for (dest, v, rule, server, tool), st in items
    ]
    return (
        head
        + '<p class="muted">Where a call tried to send or fetch, and where that destination was '
        + "first seen.</p>"
        + table(
            ["Destination", "Verdict", "Rule", "Tried via", "Times", "First", "First seen in", "Line"],
            rows,
            numeric=[4],
        )
    )


def _events(pack: Pack) -> str:
    s = pack.log.summary
    head = '<h2 id="events">Other events</h2>'
    if not s.events:
        return head + '<p class="muted">No reloads, pin acceptances, repairs or rotations in this period.</p>'
    rows = [[code(name), str(st.total), esc(pack.refs(st))] for name, st in sorted(s.events.items())]
    notes = [
        n
        for n in s.notes
        if n.rule in ("policy.reload_failed", "audit.repaired", "state.lost", "state.loss_accepted")
    ]
    listed = "".join(
        f"<li>{esc(pack.where(n.ref))} {esc(when(n.ts))} {code(n.rule)}: {esc(n.text)}</li>" for n in notes
    )
    return (
        head
        + table(["Event", "Times", "Lines"], rows, numeric=[1])
        + (f"<ul>{listed}</ul>" if listed else "")
    )


def _scope(pack: Pack) -> str:
    enforced = "".join(f"<li>{esc(t)}</li>" for t in pack.enforced)
    left = "".join(f"<li>{esc(t)}</li>" for t in pack.left_to_user)
    return (
        '<div class="cols"><div><h2 id="scope">What Bouncer enforces</h2><section class="box"><ul>'
        f'{enforced}</ul></section></div><div><h2>What it leaves to you</h2><section class="box"><ul>{left}'
        "</ul></section></div></div>"
    )


def _mapping(title: str, rows: Sequence[Row], head: str, note: str | None = None, anchor: str = "") -> str:
    body = []
    for row in rows:
        cls = {"enforced": "enforced", "partial": "partial"}.get(row.coverage, "none")
        evidence = "<br>".join(esc(e) for e in row.evidence) or '<span class="muted">-</span>'
        body.append(
            [
                f"<strong>{esc(row.ref)}</strong> {esc(row.name)}",
                f'<span class="badge {cls}">{esc(row.coverage)}</span>',
                esc(row.control),
                evidence,
            ]
        )
    intro = f'<p class="muted">{esc(note)}</p>' if note else ""
    header = [head, "Coverage", "How", "Evidence in this log"]
    return f'<h2 id="{esc(anchor)}">{esc(title)}</h2>{intro}' + table(header, body)


def _terms() -> str:
    items = "".join(f"<dt>{esc(term)}</dt><dd>{esc(meaning)}</dd>" for term, meaning in TERMS)
    return f'<h2 id="terms">Terms used in this pack</h2><dl class="terms">{items}</dl>'


def _about(pack: Pack) -> str:
    s = pack.log.summary
    items = [
        f"Files, oldest first: {esc(', '.join(str(p) for p in pack.log.files) or '(none)')}",
        f"{s.lines} lines, {s.records} records; {s.outside} outside the filters",
        f"Chain: {esc(pack.log.chain.describe())}",
        *(f"Not an audit record: {esc(pack.where(ref))} ({esc(why)})" for ref, why in s.malformed_refs),
    ]
    if s.malformed > len(s.malformed_refs):
        items.append(f"… and {s.malformed - len(s.malformed_refs)} more lines that are not records")
    items += [f"Note: {esc(n)}" for n in pack.sources.notes]
    items.append(
        "Argument values are never shown in this pack; destinations are, where a call was refused or asked."
    )
    return '<h2 id="about">About this log</h2><ul>' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"
