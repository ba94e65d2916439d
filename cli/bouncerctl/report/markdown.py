"""The review pack as Markdown: headings, tables and a text sparkline of verdicts over time.

Every value from the log or the policy goes through `cell` (table cells) or `code` (names and
destinations in code spans), so a destination such as ``[x](http://evil)`` or one holding ``|`` cannot
turn into a link or break a table. Argument values are not in the `Pack`, so they cannot appear here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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

SPARK = "▁▂▃▄▅▆▇█"
# A sparkline wider than this does not fit a terminal or a review comment.
MAX_SPARK_BARS = 72
# Tools shown per server before the table is cut (the findings still list every problem).
MAX_TOOL_ROWS = 300
MAX_TABLE_ROWS = 200


def cell(value: object) -> str:
    text = str(value).replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(text.split()) or "-"


def code(value: object) -> str:
    """A code span, safe in a table cell: GitHub's tables take ``\\|`` as a pipe even inside one."""
    text = " ".join(str(value).split()).replace("|", "\\|")
    if not text:
        return "-"
    fence = "``" if "`" in text else "`"
    span = f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"
    original = str(value)  # before whitespace was folded: an odd space is a character to name too
    odd = odd_chars(original)
    if odd:  # a look-alike renders like the letter it imitates: spell it in ASCII and name it
        spelled = ascii_spelling(original).replace("|", "\\|")
        quoted = f"`` {spelled} ``" if "`" in spelled else f"`{spelled}`"
        span += f" **non-ASCII:** {quoted} ({cell('; '.join(odd))})"
    return span


def table(header: Sequence[str], rows: Iterable[Sequence[str]], limit: int = MAX_TABLE_ROWS) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    n = 0
    for n, row in enumerate(rows, start=1):
        if n > limit:
            continue
        out.append("| " + " | ".join(row) + " |")
    if n > limit:
        out.append(f"| … {n - limit} more rows | " + " | ".join("" for _ in header[1:]) + " |")
    return out


def sparkline(values: Sequence[int], top: int) -> str:
    if top <= 0:
        return " " * len(values)
    return "".join(" " if v == 0 else SPARK[min(len(SPARK) - 1, (v * len(SPARK) - 1) // top)] for v in values)


def render(pack: Pack) -> str:
    s = pack.log.summary
    chain = pack.log.chain
    out: list[str] = ["# Bouncer review pack", ""]
    files = ", ".join(p.name for p in pack.log.files) or "(none)"
    out.append(
        f"Generated {pack.generated} from {cell(files)} ({s.lines} lines). "
        f"Period: {when(s.first_ts)} to {when(s.last_ts)} (UTC)."
        + (f" Filters: {cell('; '.join(pack.filters))}." if pack.filters else "")
    )
    out.append("")
    sev = {k: sum(1 for f in pack.findings if f.severity == k) for k in ("high", "medium", "low")}
    chain_text = (
        f"intact, {chain.records} lines, head `{chain.head}`"
        if chain.broken is None
        else f"**broken** at {chain.broken.where}: {chain.broken.kind}: {cell(chain.broken.detail)}"
    )
    sessions = f"{len(s.sessions)}{'+' if s.sessions_overflow else ''}"
    out += [
        "## Summary",
        "",
        *table(
            ["Item", "Value"],
            [
                [
                    "Calls decided",
                    f"{sum(s.verdicts.values())}: allow {s.verdicts['allow']}, "
                    f"ask {s.verdicts['ask']}, deny {s.verdicts['deny']}",
                ],
                ["Servers / sessions", f"{len(s.by_server)} / {sessions}"],
                ["Clients", cell(", ".join(sorted(s.clients)) or "-")],
                ["Audit chain", chain_text],
                ["Lines that are not records", str(s.malformed)],
                ["Findings", f"high {sev['high']}, medium {sev['medium']}, low {sev['low']}"],
            ],
        ),
        "",
    ]
    out += _timeline(pack)
    out += _findings(pack)
    out += _tools(pack)
    out += _counts(pack)
    out += _destinations(pack)
    out += _events(pack)
    out += ["## What Bouncer enforces", "", *(f"- {cell(t)}" for t in pack.enforced), ""]
    out += ["## What it leaves to you", "", *(f"- {cell(t)}" for t in pack.left_to_user), ""]
    out += _mapping("OWASP Top 10 for LLM Applications (2025)", pack.owasp, "Risk")
    out += _mapping("AIUC-1", pack.aiuc, "Control", note=AIUC_NOTE)
    out += [
        "## Terms used in this pack",
        "",
        *(f"- **{term}**: {cell(meaning)}" for term, meaning in TERMS),
        "",
    ]
    out += _about(pack)
    return "\n".join(out).rstrip() + "\n"


def _timeline(pack: Pack) -> list[str]:
    width, bars = pack.log.summary.timeline.bars(MAX_SPARK_BARS)
    out = ["## Verdicts over time", ""]
    if not bars:
        return [*out, "No verdicts in this period.", ""]
    top = max(sum(c) for _, c in bars)
    out.append(
        f"One column per {width_label(width)}, from {utc_seconds(bars[0][0])} to "
        f"{utc_seconds(bars[-1][0] + width)}; height relative to the busiest ({top} calls)."
    )
    out += ["", "```"]
    for i, name in enumerate(("allow", "ask", "deny")):
        out.append(f"{name:<5} {sparkline([c[i] for _, c in bars], top)}  {sum(c[i] for _, c in bars)}")
    out += ["```", ""]
    return out


def _findings(pack: Pack) -> list[str]:
    out = ["## Findings", ""]
    if not pack.findings:
        return [*out, "Nothing to act on.", ""]
    rows = [
        [
            f.severity.upper() if f.severity == "high" else f.severity,
            cell(f.title),
            code(f.subject),
            cell(f.detail),
            cell(f.evidence or "-"),
        ]
        for f in pack.findings
    ]
    out += table(["Severity", "Finding", "Where", "Detail", "Evidence"], rows, limit=len(rows))
    if pack.findings_cut:
        out.append(f"\n{pack.findings_cut} more findings not listed.")
    return [*out, ""]


def _tools(pack: Pack) -> list[str]:
    src = pack.sources
    out = [
        "## Tools and their controls",
        "",
        f"Tools from {cell(src.origin)}. Policy: {cell(src.policy_label)}.",
        "Calls are allow / ask / deny in this period.",
        "",
    ]
    if pack.schemas_missing:
        out += [cell(SCHEMA_NOTE), ""]
    if not pack.servers:
        return [*out, "No server has listed its tools.", ""]
    for srv in pack.servers:
        upstream = f" ({code(' '.join(srv.upstream))})" if srv.upstream else ""
        packs = ", ".join(srv.packs) or "none (fallback only)"
        out += [f"### {cell(srv.name)}{upstream}", "", f"Packs: {cell(packs)}.", ""]
        rows = [
            [code(t.tool), cell(t.state or "unknown"), cell("; ".join(t.controls)), calls_text(t.calls)]
            for t in srv.tools
        ]
        out += table(["Tool", "Pin", "Controls", "Calls"], rows, limit=MAX_TOOL_ROWS)
        out += ["", "<details><summary>Effective rules with their sources</summary>", "", "```"]
        for t in srv.tools[:MAX_TOOL_ROWS]:
            out.append(f"{t.tool}:")
            out += [f"  {line}" for line in t.detail]
        out += ["```", "", "</details>", ""]
    return out


def _counts(pack: Pack) -> list[str]:
    s = pack.log.summary
    out = ["## Verdicts per server", ""]
    rows = [
        [code(name), *(str(c.get(k, 0)) for k in ("allow", "ask", "deny")), str(sum(c.values()))]
        for name, c in sorted(s.by_server.items(), key=lambda kv: -sum(kv[1].values()))
    ]
    out += table(["Server", "Allow", "Ask", "Deny", "Total"], rows) if rows else ["No verdicts."]
    out += ["", "## Verdicts per rule", ""]
    rows = [
        [code(name), *(str(st.counts.get(k, 0)) for k in ("allow", "ask", "deny")), cell(pack.refs(st))]
        for name, st in sorted(s.by_rule.items(), key=lambda kv: -kv[1].total)
    ]
    out += table(["Rule", "Allow", "Ask", "Deny", "Lines"], rows) if rows else ["No verdicts."]
    return [*out, ""]


def _destinations(pack: Pack) -> list[str]:
    s = pack.log.summary
    out = ["## Denied and asked destinations", ""]
    if not s.destinations:
        return [*out, "None in this period.", ""]
    out += ["Where a call tried to send or fetch, and where that destination was first seen.", ""]
    items = sorted(s.destinations.items(), key=lambda kv: (kv[0][1] != "deny", -kv[1].count))
    rows = [
        [
            code(dest),
            verdict,
            code(rule),
            cell(f"{server} / {tool}"),
            str(st.count),
            when(st.first_ts),
            cell(provenance_text(st.provenance)),
            cell(pack.where(st.first)),
        ]
        for (dest, verdict, rule, server, tool), st in items
    ]
    out += table(
        ["Destination", "Verdict", "Rule", "Tried via", "Times", "First", "First seen in", "Line"], rows
    )
    return [*out, ""]


def _events(pack: Pack) -> list[str]:
    s = pack.log.summary
    out = ["## Other events", ""]
    if not s.events:
        return [*out, "None: no reloads, pin acceptances, repairs or rotations in this period.", ""]
    rows = [[code(name), str(st.total), cell(pack.refs(st))] for name, st in sorted(s.events.items())]
    out += table(["Event", "Times", "Lines"], rows)
    shown = [
        n
        for n in s.notes
        if n.rule in ("policy.reload_failed", "audit.repaired", "state.lost", "state.loss_accepted")
    ]
    if shown:
        out.append("")
        out += [f"- {pack.where(n.ref)} {when(n.ts)} {code(n.rule)}: {cell(n.text)}" for n in shown]
    return [*out, ""]


def _mapping(title: str, rows: Sequence[Row], head: str, note: str | None = None) -> list[str]:
    out = [f"## {title}", ""]
    if note:
        out += [note, ""]
    body = []
    for row in rows:
        evidence = "<br>".join(cell(e) for e in row.evidence) or "-"
        body.append([f"{row.ref} {cell(row.name)}", row.coverage, cell(row.control), evidence])
    out += table([head, "Coverage", "How", "Evidence in this log"], body)
    return [*out, ""]


def _about(pack: Pack) -> list[str]:
    s = pack.log.summary
    chain = pack.log.chain
    out = ["## About this log", ""]
    out.append(f"- Files, oldest first: {cell(', '.join(str(p) for p in pack.log.files) or '(none)')}")
    out.append(f"- {s.lines} lines, {s.records} records; {s.outside} outside the filters")
    out.append(f"- Chain: {cell(chain.describe())}")
    for ref, why in s.malformed_refs:
        out.append(f"- Not an audit record: {pack.where(ref)} ({cell(why)})")
    if s.malformed > len(s.malformed_refs):
        out.append(f"- … and {s.malformed - len(s.malformed_refs)} more lines that are not records")
    for note in pack.sources.notes:
        out.append(f"- Note: {cell(note)}")
    out.append(
        "- Argument values are never shown in this pack; destinations are, where a call was refused or asked."
    )
    return [*out, ""]
