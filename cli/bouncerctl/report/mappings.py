"""What Bouncer covers, stated against the OWASP Top 10 for LLM Applications (2025) and AIUC-1.

Theory of operation
-------------------
Each row names a risk or control, says how far Bouncer goes (``enforced``, ``partial``, ``not
addressed``), which of its controls does it, and points at the evidence in this log: the rules that
fired, their counts per verdict and the first places (``file:line``). Rows are fixed text; only the
evidence is computed, from `build.Aggregator`'s tables.

OWASP: the ten entries of the 2025 list (LLM01:2025 … LLM10:2025), in its order and wording.

AIUC-1 (the AI agent standard, aiuc-1.com): rows per domain (A Data & Privacy, B Security, C Safety,
D Reliability, E Accountability, F Society). Control IDs are cited only where they were checked
against the standard's published pages: A004 (Protect IP & trade secrets), A006 (Prevent PII
leakage), B002 (Detect adversarial input), B006 (Prevent unauthorized AI agent actions), D003
(Restrict unsafe tool calls), E015 (Log AI system activity). AIUC-1 is revised quarterly; a row
without an ID maps to the domain only.

Which rules are evidence for a row is not written here: each rule of `bouncerd.core.ruleids.RULES`
lists the OWASP entries and AIUC-1 controls it maps to, and a row shows the rules that list its ref.
A rule in the log that the table does not know (an older or newer version wrote it) counts for the
refs every known rule of its family shares, as a prefix match would; a record counts only where its
family gives records of its kind (verdicts, or events with verdict null).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bouncerctl.report.build import VERDICTS, LogRead, RuleStat
from bouncerd.core.ruleids import AIUC_IDS, RULES

AIUC_NOTE = (
    f"Control IDs are cited only where checked against the AIUC-1 pages ({', '.join(AIUC_IDS)}); "
    "AIUC-1 is revised quarterly, so check them against the version you are assessed on. "
    "Rows without an ID map to the domain only."
)

# Evidence lists at most this many rules per row; the rest are summed.
MAX_RULES_PER_ROW = 6


def _family_refs() -> dict[str, frozenset[str]]:
    """Per family, the refs all its known rules share: what an unknown rule of that family counts for."""
    shared: dict[str, frozenset[str]] = {}
    for info in RULES.values():
        refs = frozenset((*info.owasp, *info.aiuc))
        shared[info.family] = shared[info.family] & refs if info.family in shared else refs
    return shared


_REFS = {rule_id: frozenset((*info.owasp, *info.aiuc)) for rule_id, info in RULES.items()}
_FAMILY_REFS = _family_refs()
# A record counts only where its family gives records of its kind: a verdict rule on a line with
# verdict null (or an event rule on a verdict line) is not what the daemon writes.
_VERDICT_FAMILIES = frozenset(info.family for info in RULES.values() if set(info.verdicts) - {"event"})
_EVENT_FAMILIES = frozenset(info.family for info in RULES.values() if "event" in info.verdicts)


def refs_of(rule: str, *, event: bool = False) -> frozenset[str]:
    """The OWASP entries and AIUC-1 controls a rule of the log is evidence for, on a verdict line or
    (`event`) on a line with verdict null."""
    family = rule.split(".", 1)[0] if "." in rule else ""
    if family not in (_EVENT_FAMILIES if event else _VERDICT_FAMILIES):
        return frozenset()
    known = _REFS.get(rule)
    return known if known is not None else _FAMILY_REFS.get(family, frozenset())


@dataclass(frozen=True)
class Row:
    ref: str
    name: str
    coverage: str  # "enforced" | "partial" | "not addressed"
    control: str
    evidence: tuple[str, ...]


def _counts(stat: RuleStat) -> str:
    parts = [f"{stat.counts[k]} {k}" for k in (*VERDICTS, "event") if stat.counts.get(k)]
    return ", ".join(parts)


def _evidence(log: LogRead, *refs: str) -> tuple[str, ...]:
    """The rules of this log (verdicts, then other records) that are evidence for any of `refs`."""
    s = log.summary
    wanted = frozenset(refs)
    picked = [(name, stat) for name, stat in sorted(s.by_rule.items()) if refs_of(name) & wanted]
    picked += [(name, ev) for name, ev in sorted(s.events.items()) if refs_of(name, event=True) & wanted]
    if not picked:
        return ("none of its rules fired in this log",)
    out = []
    for name, stat in picked[:MAX_RULES_PER_ROW]:
        out.append(f"{name}: {_counts(stat)} ({log.rule_places(stat)})")
    rest = picked[MAX_RULES_PER_ROW:]
    if rest:
        out.append(f"{len(rest)} more rules, {sum(st.total for _, st in rest)} records")
    return tuple(out)


def _log_evidence(log: LogRead) -> tuple[str, ...]:
    chain = log.chain
    files = ", ".join(p.name for p in log.files)
    state = (
        f"chain intact, head {chain.head[:16]}…"
        if chain.broken is None
        else f"chain broken at {chain.broken.where} ({chain.broken.kind})"
    )
    return (f"{chain.records} lines in {files}", state)


def _asks(log: LogRead) -> str:
    return f"{log.summary.verdicts['ask']} call(s) in this period waited for a person"


def owasp(log: LogRead) -> list[Row]:
    return [
        Row(
            "LLM01:2025",
            "Prompt Injection",
            "partial",
            "Injected instructions are not detected; their most damaging effect is stopped: a call "
            "that sends to, or fetches, a destination planted in untrusted tool output is denied or asked.",
            _evidence(log, "LLM01:2025"),
        ),
        Row(
            "LLM02:2025",
            "Sensitive Information Disclosure",
            "partial",
            "Data leaving through tools: sends to destinations you did not type, allowlist or approve "
            "need a person; planted ones are denied. What the data is, and what the model tells you, "
            "is not inspected.",
            _evidence(log, "LLM02:2025"),
        ),
        Row(
            "LLM03:2025",
            "Supply Chain",
            "partial",
            "Tool pinning: a server's tool descriptions and schemas are pinned on first use; a changed "
            "or new tool is refused until a person accepts it. Packages themselves are not vetted.",
            _evidence(log, "LLM03:2025"),
        ),
        Row(
            "LLM04:2025",
            "Data and Model Poisoning",
            "not addressed",
            "Training and fine-tuning data are out of scope.",
            (),
        ),
        Row(
            "LLM05:2025",
            "Improper Output Handling",
            "partial",
            "Model output used as tool arguments is checked before the tool runs: path confinement and "
            "argument patterns. Output shown to you or run elsewhere is not.",
            _evidence(log, "LLM05:2025"),
        ),
        Row(
            "LLM06:2025",
            "Excessive Agency",
            "enforced",
            "For tools behind the shim: per-session budgets, forbidden tools, path confinement, "
            "pinning, and a person's approval for unproven sends.",
            (*_evidence(log, "LLM06:2025"), _asks(log)),
        ),
        Row(
            "LLM07:2025",
            "System Prompt Leakage",
            "not addressed",
            "Only indirectly: a prompt sent out through a tool meets the sink gate like any data.",
            (),
        ),
        Row(
            "LLM08:2025",
            "Vector and Embedding Weaknesses",
            "not addressed",
            "Retrieval stores are out of scope.",
            (),
        ),
        Row("LLM09:2025", "Misinformation", "not addressed", "What the model says is out of scope.", ()),
        Row(
            "LLM10:2025",
            "Unbounded Consumption",
            "partial",
            "max_calls budgets cap tool calls per session; tokens, cost and time are not limited.",
            _evidence(log, "LLM10:2025"),
        ),
    ]


def aiuc(log: LogRead) -> list[Row]:
    return [
        Row(
            "A004, A006",
            "Data & Privacy: protect IP and trade secrets; prevent PII leakage",
            "partial",
            "The sink gate stops data, whatever it is, from going to destinations planted in tool "
            "output, and asks before it goes anywhere you did not name. Content is not classified.",
            _evidence(log, "A004", "A006"),
        ),
        Row(
            "B002",
            "Security: detect adversarial input",
            "partial",
            "Destinations in untrusted tool output are indexed as they arrive (taint), so their later use is "
            "recognised; the injected text itself is not classified.",
            _evidence(log, "B002"),
        ),
        Row(
            "B006",
            "Security: prevent unauthorized AI agent actions",
            "enforced",
            "Every tools/call through the shim is decided before it reaches the server: unpinned tools, "
            "forbidden tools, exhausted budgets and out-of-bounds paths are refused.",
            _evidence(log, "B006"),
        ),
        Row(
            "Domain C",
            "Safety (harmful outputs)",
            "not addressed",
            "What the model writes is out of scope.",
            (),
        ),
        Row(
            "D003",
            "Reliability: restrict unsafe tool calls",
            "enforced",
            "Tool allowlisting by pin, parameter validation (paths, patterns), rate limits (max_calls), a "
            "person's approval for risky sends, and a log of every call.",
            (*_evidence(log, "D003"), _asks(log)),
        ),
        Row(
            "E015",
            "Accountability: log AI system activity",
            "enforced",
            "Every decision is one line of a hash-chained log (time, session, client, server, tool, verdict, "
            "rule, destination, provenance); edits, deletions and reordering are detectable.",
            _log_evidence(log),
        ),
        Row("Domain F", "Society", "not addressed", "Out of scope.", ()),
    ]


def enforced(settings: Mapping[str, str]) -> list[str]:
    return [
        "Every tools/call of a server started through bouncer-shim is decided (allow, ask, deny) before the "
        "server sees it, and written to this log.",
        "Tools are pinned on first use (name, description, schema); a new or changed tool is refused until "
        "you accept it.",
        f"Destinations seen in untrusted tool output are remembered (scope: {settings.get('taint_scope')}); "
        "sending to or fetching from them is denied or asked, across the servers of a session.",
        "Sends to destinations you did not type, allowlist or approve wait for a person "
        f"(approval timeout {settings.get('approval_timeout')}).",
        "Budgets (max_calls), forbidden tools, path confinement and argument patterns, where policy "
        "sets them.",
        "A hash-chained audit log of every decision; arguments are recorded "
        + (
            "only as a SHA-256 digest (audit_arguments: digest)."
            if settings.get("audit_arguments") == "digest"
            else "in full (audit_arguments: full)."
        ),
    ]


def left_to_user() -> list[str]:
    return [
        "Servers not started through bouncer-shim, and the client's own tools (shell, file edits, browsing), "
        "are not seen.",
        "The gate judges where data goes, not what it is: anything may go to a destination you trust, "
        "allowlist or approve.",
        "Approving an ask is your decision; read the destination and its provenance first.",
        "Tools no pack or policy names are judged by the fallback's guess; review them (findings).",
        "Writes are confined only where you set allowed_path_prefixes.",
        "The chain shows edits to this log, but anyone running as you can rewrite it whole: keep the head "
        "hash (bouncerctl status) somewhere else.",
        "Prompt injection itself, the model's answers, and harmful content are out of scope.",
    ]
