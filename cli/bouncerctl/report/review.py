"""The review pack as values: tools and their controls, findings, counts and framework mappings.

Theory of operation
-------------------
`build_pack` takes what was read (`build.LogRead`: the aggregated log and the chain check) and where
tools and policy came from (`sources.Sources`) and returns a `Pack`, which the Markdown and HTML
renderers print as they are. Nothing here reads a file or talks to the daemon.

Controls per tool come from the daemon's own resolution, `Policy.rule_for(server, upstream, tool)`,
summarised in a few words (`controls`) with the full `bouncerd.core.rules.describe` lines beside.

Findings are things a reviewer should act on, each with a severity and the evidence: writes without
path confinement, sends without an allowlist, tools only the fallback's guess covers, tools never
pinned or changed since, deletions without a budget, sink gates turned off by a policy file, and
what the log itself shows (a broken chain, malformed lines, torn tails repaired, failed reloads).

The framework tables (`mappings.py`) point each row at rules of this log, with counts and places.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from bouncerctl.report import mappings
from bouncerctl.report.build import OTHER, LogRead, RuleStat
from bouncerctl.report.sources import Sources
from bouncerd.core.builtin_tools import CLIENT_SERVER
from bouncerd.core.policy import merge
from bouncerd.core.rules import DEFAULT_SOURCE, FALLBACK_SOURCE, ToolRule, describe

SEVERITIES = ("high", "medium", "low")

# Characters named beside a string that holds any outside printable ASCII; the rest are counted.
MAX_NAMED_CHARS = 6

# The words the pack uses, defined once in the pack itself (both formats print this list).
TERMS = (
    ("allow / ask / deny", "the verdict on one call: it ran; a person was asked first; it was refused"),
    (
        "pin",
        "the SHA-256 of every part of a tool (description, schemas, annotations, ...), taken the first "
        "time the server listed it or when a person accepted it (bouncerctl pins accept)",
    ),
    ("pinned", "the server lists the tool exactly as pinned: calls are judged by the rules below"),
    (
        "changed",
        "the server listed the tool with a part that differs from the pin: every call is refused until a "
        "person reviews it (bouncerctl pins show) and accepts it",
    ),
    ("new", "listed after the first use and never accepted: every call is refused"),
    ("not listed", "pinned, but missing from the server's latest tool list: every call is refused"),
    ("unknown", "this pack was made without the daemon's pins (from a --tools file or the log alone)"),
    (
        "sink gate",
        "for a tool that sends or fetches: each destination argument must be one you typed, trusted or "
        "approved; one that came from untrusted output is refused or asked",
    ),
    (
        "fallback",
        "Bouncer's own guess from a tool's name and schema, used when no pack or policy entry names it",
    ),
    ("read-only", "a tool the rules do not gate: nothing it is given is treated as leaving"),
    ("allowlist", "trusted_destinations and trusted_domains: where a tool may send without asking"),
    (
        "non-ASCII",
        "a character outside printable ASCII; the pack spells such strings with \\uXXXX escapes and "
        "names each character, since a font can draw a look-alike (U+FF25 fullwidth E, U+0430 "
        "Cyrillic a) exactly like a plain letter",
    ),
    (
        "audit chain",
        "every log record carries the hash of the one before; intact means no record was edited, "
        "removed or inserted",
    ),
    ("severity", "high: act now; medium: a gap in the rules; low: worth a look"),
)

# Findings listed one by one; more than this (a server with hundreds of tools) are summarised.
MAX_FINDINGS = 200


@dataclass
class ToolRow:
    tool: str
    state: str | None  # pin state, None when unknown
    controls: list[str]
    detail: list[str]
    calls: dict[str, int]
    fallback_only: bool
    schema_known: bool = True
    managed: tuple[str, ...] = ()  # the rule's keys the administrator's managed policy decides


@dataclass
class ServerRow:
    name: str
    upstream: tuple[str, ...]
    packs: tuple[str, ...]
    tools: list[ToolRow]


@dataclass
class Finding:
    severity: str
    title: str
    subject: str
    detail: str
    evidence: str = ""


SCHEMA_NOTE = (
    "Some tools' input schemas were not available here, so the fallback's guess for them is made from "
    "their names alone; bouncerd judges them with their schemas, which may name the destination "
    "parameters more narrowly."
)


@dataclass
class Pack:
    generated: str
    log: LogRead
    sources: Sources
    filters: list[str]
    servers: list[ServerRow]
    findings: list[Finding]
    findings_cut: int
    owasp: list[mappings.Row]
    aiuc: list[mappings.Row]
    enforced: list[str]
    left_to_user: list[str]
    settings: dict[str, str] = field(default_factory=dict)

    def where(self, ref: tuple[int, int]) -> str:
        return self.log.where(ref)

    @property
    def schemas_missing(self) -> bool:
        return any(not t.schema_known and t.fallback_only for srv in self.servers for t in srv.tools)

    def refs(self, stat: RuleStat) -> str:
        return self.log.rule_places(stat)


def controls(rule: ToolRule) -> list[str]:
    """A few words per control on a tool, for a table cell."""
    if rule.forbidden:
        return ["forbidden (max_calls: 0)"]
    out: list[str] = []
    if rule.exfiltrating:
        on = ", ".join(rule.sink_params) or "every argument"
        out.append(f"{rule.sink_kind} gate on {on}")
        trusted = len(rule.trusted_destinations) + len(rule.trusted_domains)
        out.append(f"allowlist: {trusted}" if trusted else "no allowlist")
        if rule.on_tainted == "ask":
            out.append("planted destinations asked, not denied")
    if rule.write_params:
        writes = ", ".join(rule.write_params)
        if rule.allowed_path_prefixes:
            out.append(f"writes {writes} within {', '.join(rule.allowed_path_prefixes)}")
        else:
            out.append(f"writes {writes} unconfined")
    if rule.arg_patterns:
        out.append(f"patterns on {', '.join(sorted(rule.arg_patterns))}")
    if rule.max_calls is not None:
        out.append(f"budget {rule.max_calls}/session")
    if rule.deletion:
        out.append("deletes")
    if not rule.untrusted_output:
        out.append("output trusted")
    return out or ["pin only"]


def _managed_keys(rule: ToolRule, managed_file: str | None) -> tuple[str, ...]:
    if managed_file is None:
        return ()
    return tuple(k for k, src in rule.source.items() if managed_file in src)


FALLBACK_TITLE = "covered only by the fallback"


def _fallback_only(rule: ToolRule) -> bool:
    return all(src in (DEFAULT_SOURCE, FALLBACK_SOURCE) for src in rule.source.values())


@dataclass(frozen=True)
class _Tool:
    server: str
    name: str
    rule: ToolRule
    gated_by_packs: bool  # would the built-in packs (and fallback) alone gate it?
    state: str | None
    schema_known: bool
    calls: dict[str, int]

    @property
    def subject(self) -> str:
        return f"{self.server} / {self.name}"

    @property
    def evidence(self) -> str:
        return calls_words(self.calls)


def _pin_findings(t: _Tool) -> list[Finding]:
    if t.state == "changed":
        detail = (
            "a part of it (description, schema, annotations, ...) differs from the pinned one; calls are "
            f"refused until a person reviews it (bouncerctl pins show {t.server})"
        )
        return [Finding("high", "tool changed since it was pinned", t.subject, detail, t.evidence)]
    if t.state == "new":
        detail = (
            f"listed by the server but never accepted; calls are refused (bouncerctl pins accept {t.server})"
        )
        return [Finding("medium", "tool never pinned", t.subject, detail, t.evidence)]
    return []


def _tool_findings(t: _Tool) -> list[Finding]:
    rule = t.rule
    out = _pin_findings(t)
    if rule.forbidden:
        return out

    def add(severity: str, title: str, detail: str) -> None:
        out.append(Finding(severity, title, t.subject, detail, t.evidence))

    if not rule.exfiltrating and t.gated_by_packs:
        add(
            "high",
            "sink gate turned off",
            f"the built-in rules gate it; {rule.source.get('exfiltrating')} turns that off",
        )
    if rule.write_params and not rule.allowed_path_prefixes:
        add(
            "medium",
            "writes without confinement",
            f"writes {', '.join(rule.write_params)} wherever the server can; set allowed_path_prefixes",
        )
    if rule.deletion and rule.max_calls is None:
        add(
            "medium",
            "deletion without a budget",
            "set max_calls to bound how much it can delete in a session",
        )
    if _fallback_only(rule):
        guess = (
            f"gated as a {rule.sink_kind} on {', '.join(rule.sink_params) or 'every argument'}"
            if rule.exfiltrating
            else "not gated"
        )
        basis = "name and schema" if t.schema_known else "name (its schema was not available to this report)"
        add(
            "medium",
            FALLBACK_TITLE,
            f"no pack or policy names it; from its {basis} the fallback guessed: {guess}",
        )
    if (
        rule.exfiltrating
        and rule.sink_kind == "send"
        and not (rule.trusted_destinations or rule.trusted_domains)
    ):
        add(
            "low",
            "sends without an allowlist",
            "every destination you did not type or approve in the session needs a person",
        )
    return out


def _reads_only(rule: ToolRule) -> bool:
    """Neither sends, writes nor deletes: a tool the pack may call read-only without contradicting a
    finding of its own (a writer keeps its "writes without confinement" and its own fallback finding)."""
    return not (rule.exfiltrating or rule.write_params or rule.deletion)


def _group_read_only(findings: list[Finding], tools: list[_Tool]) -> list[Finding]:
    """One finding per server for its read-only tools that only the fallback covers, instead of one
    medium finding each (five of them buried the one high)."""
    read_only = {t.subject for t in tools if _fallback_only(t.rule) and _reads_only(t.rule)}
    out = [f for f in findings if not (f.title == FALLBACK_TITLE and f.subject in read_only)]
    by_server: dict[str, list[_Tool]] = {}
    for t in tools:
        if t.subject in read_only:
            by_server.setdefault(t.server, []).append(t)
    for server, group in by_server.items():
        called = sum(sum(t.calls.values()) for t in group)
        out.append(
            Finding(
                "low",
                f"{len(group)} read-only tool(s) covered only by the fallback",
                f"{server} / " + ", ".join(t.name for t in group),
                "no pack or policy names them; the fallback judged them read-only (not gated); name "
                "them in your policy if one of them sends",
                f"called {called} time(s) in this period" if called else "not called in this period",
            )
        )
    return out


def _log_findings(log: LogRead) -> list[Finding]:
    s = log.summary
    out: list[Finding] = []
    chain = log.chain
    if chain.broken is not None:
        out.append(
            Finding(
                "high",
                f"audit chain broken ({chain.broken.kind})",
                "audit log",
                chain.broken.detail,
                chain.broken.where,
            )
        )
    if s.malformed:
        where = log.places([r for r, _ in s.malformed_refs])
        more = (
            f" and {s.malformed - len(s.malformed_refs)} more" if s.malformed > len(s.malformed_refs) else ""
        )
        out.append(
            Finding(
                "high",
                "lines that are not audit records",
                "audit log",
                f"{s.malformed} line(s)",
                where + more,
            )
        )
    for rule, severity, title in (
        ("audit.repaired", "medium", "torn line repaired after a crash"),
        ("policy.reload_failed", "medium", "policy reload failed"),
    ):
        event = s.events.get(rule)
        if event is not None:
            out.append(Finding(severity, title, "daemon", f"{event.total} time(s)", log.rule_places(event)))
    for rule, title in (
        ("policy.unreadable", "calls denied because a policy file could not be read"),
        ("pin.changed_tool", "calls to a tool whose description changed"),
    ):
        stat = s.by_rule.get(rule)
        if stat is not None:
            out.append(Finding("high", title, rule, f"{stat.total} call(s) denied", log.rule_places(stat)))
    return out


def _settle_past_rug_pulls(findings: list[Finding], tools: list[_Tool]) -> None:
    """The log's refused calls to a changed tool agree with the pins: high while a tool still waits
    for review, low once none does (the person accepted or the server went back)."""
    waiting = [t.subject for t in tools if t.state == "changed"]
    for f in findings:
        if f.subject == "pin.changed_tool":
            if waiting:
                f.detail += f"; still waiting for review: {', '.join(waiting)}"
            else:
                f.severity = "low"
                f.title = "calls were refused while a tool had changed"
                f.detail += "; no tool waits for review now (bouncerctl pins show)"


def build_pack(log: LogRead, sources: Sources, *, generated: str, filters: list[str]) -> Pack:
    packs_only = merge([])
    servers: list[ServerRow] = []
    findings = _log_findings(log)
    if sources.policy_problem:
        findings.append(Finding("high", "policy does not load", sources.policy_label, sources.policy_problem))
    if sources.reload_error:
        findings.append(
            Finding(
                "high",
                "the daemon's last reload failed",
                "policy",
                "the policy in force is an earlier version than the file shown here: " + sources.reload_error,
            )
        )
    for line in sources.unprotected:
        subject, _, detail = line.removeprefix("NOT PROTECTED ").partition(": ")
        findings.append(Finding("high", "NOT PROTECTED: a server runs past the gate", subject, detail))
    calls = log.summary.by_tool
    listed: set[tuple[str, str]] = set()
    views: list[_Tool] = []
    for srv in sources.servers:
        rows = []
        for tool in srv.tools:
            spec: dict[str, Any] = {"name": tool["name"]}
            if isinstance(tool.get("inputSchema"), dict):
                spec["inputSchema"] = tool["inputSchema"]
            view = _Tool(
                srv.name,
                tool["name"],
                sources.policy.rule_for(srv.name, srv.upstream, spec),
                packs_only.rule_for(srv.name, srv.upstream, spec).exfiltrating,
                tool.get("state"),
                "inputSchema" in spec,
                calls.get((srv.name, tool["name"]), {}),
            )
            listed.add((srv.name, tool["name"]))
            views.append(view)
            labels = controls(view.rule)
            if not view.schema_known and _fallback_only(view.rule):
                labels.append("guessed from the name alone")
            managed = _managed_keys(view.rule, sources.managed_file)
            if managed:  # no user or shim layer may loosen these (bouncerd.core.managed)
                labels.append(f"held by the managed policy: {', '.join(managed)}")
            rows.append(
                ToolRow(
                    view.name,
                    view.state,
                    labels,
                    describe(view.rule),
                    view.calls,
                    _fallback_only(view.rule),
                    view.schema_known,
                    managed,
                )
            )
            findings.extend(_tool_findings(view))
        packs = sources.policy.packs_for(srv.name, srv.upstream)
        servers.append(ServerRow(srv.name, srv.upstream, packs, rows))
    if sources.pins_known:
        for (server, name), counts in sorted(calls.items()):
            # The client's own tools (Claude Code's Bash, WebFetch, …) reach the daemon through the
            # hook, never through a tool list: they are not unlisted MCP tools.
            if (server, name) not in listed and server not in (OTHER, CLIENT_SERVER):
                findings.append(
                    Finding(
                        "low",
                        "called but in no tool list",
                        f"{server} / {name}",
                        "the agent called a tool its server never listed; each call was refused",
                        calls_words(counts),
                    )
                )
    findings = _group_read_only(findings, views)
    if sources.pins_known:
        _settle_past_rug_pulls(findings, views)
    findings.sort(key=lambda f: SEVERITIES.index(f.severity))
    cut = max(0, len(findings) - MAX_FINDINGS)
    settings = sources.policy.settings
    shown = {
        "taint_scope": str(settings.taint_scope),
        "audit_arguments": str(settings.audit_arguments),
        "approval_timeout": f"{settings.approval_timeout}s",
        "on_tainted_identity": str(settings.on_tainted_identity),
    }
    return Pack(
        generated=generated,
        log=log,
        sources=sources,
        filters=filters,
        servers=servers,
        findings=findings[:MAX_FINDINGS],
        findings_cut=cut,
        owasp=mappings.owasp(log),
        aiuc=mappings.aiuc(log),
        enforced=mappings.enforced(shown),
        left_to_user=mappings.left_to_user(),
        settings=shown,
    )


# ---- wording shared by the renderers -------------------------------------------------------------


def when(ts: str | None) -> str:
    """An audit timestamp as ``2025-01-31 12:34:56Z`` (UTC, to the second)."""
    if not ts:
        return "-"
    return ts[:10] + " " + ts[11:19] + "Z" if len(ts) >= 19 else ts


def width_label(seconds: int) -> str:
    for unit, size in (("week", 7 * 86400), ("day", 86400), ("h", 3600), ("min", 60)):
        if seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}" + ("s" if unit in ("week", "day") and n != 1 else "")
    return f"{seconds} s"


def provenance_text(prov: dict[str, Any] | None) -> str:
    """Where a destination was first seen: server, tool, request id, time, field."""
    if not prov:
        return "-"
    parts = [f"{prov.get('server', '?')} / {prov.get('tool') or '?'}"]
    if prov.get("request_id") is not None:
        parts.append(f"request {prov['request_id']}")
    ts = prov.get("ts")
    if isinstance(ts, int | float) and not isinstance(ts, bool):
        parts.append("at " + utc_seconds(float(ts)))
    if prov.get("field"):
        parts.append(f"field {prov['field']}")
    if prov.get("identity"):
        parts.append("as a sender/participant only")
    return ", ".join(parts)


def utc_seconds(epoch: float) -> str:
    """Epoch seconds as ``2025-01-31 12:34:56Z``."""
    try:
        return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return "?"


def odd_chars(text: str) -> list[str]:
    """The characters of `text` outside printable ASCII, each as ``U+FF25 FULLWIDTH LATIN CAPITAL
    LETTER E``, first MAX_NAMED_CHARS distinct ones, then how many more."""
    odd = list(dict.fromkeys(ch for ch in text if not " " <= ch <= "~"))
    named = [f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}" for ch in odd[:MAX_NAMED_CHARS]]
    if len(odd) > MAX_NAMED_CHARS:
        named.append(f"and {len(odd) - MAX_NAMED_CHARS} more")
    return named


def ascii_spelling(text: str) -> str:
    """`text` with every character outside printable ASCII as a ``\\uXXXX`` escape: what it is, in
    any font."""
    return "".join(
        ch if " " <= ch <= "~" else (f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        for ch in text
    )


def calls_words(calls: dict[str, int]) -> str:
    """``called 3 times: 1 allow, 2 deny`` or ``not called in this period``."""
    total = sum(calls.values())
    if not total:
        return "not called in this period"
    parts = ", ".join(f"{calls[k]} {k}" for k in ("allow", "ask", "deny") if calls.get(k))
    return f"called {total} time{'s' if total != 1 else ''}: {parts}"


def calls_text(calls: dict[str, int]) -> str:
    return " / ".join(str(calls.get(k, 0)) for k in ("allow", "ask", "deny"))
