"""Rule ids: every name a verdict or an audit record can carry, with its meaning and mappings.

Theory of operation
-------------------
Every verdict names the rule that gave it (``sink.tainted_destination``), and so does every audit
record that is not a verdict (``approval.granted``, ``audit.rotated``). This module is the one table
of those names. `Verdict` refuses a rule id that is not in it, the report picks the evidence for each
OWASP and AIUC-1 row from its mappings, and the Rules section of docs/policy.md is generated from it
(`bouncerd/core/ruledocs.py`); a test scans the source for rule-id literals and fails on one not listed.

An id is ``family.name``. `FAMILIES` says what gives each family; some are reserved for checks not
written yet (resources, prompts, completions, sampling messages), so a new rule is one row in
`_TABLE`, and one in `FAMILIES` only for a new family.

Mappings are what the report shows: a rule lists the OWASP Top 10 for LLM Applications (2025) entries
and AIUC-1 controls whose evidence it is. AIUC-1 control IDs are only those checked against the
standard's pages (`AIUC_IDS`); otherwise a domain. E015 (log AI system activity) covers every record,
so no rule lists it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from bouncerd.core.ruleids_consequence import ROWS as CONSEQUENCES

Kind = Literal["allow", "ask", "deny", "event"]  # "event": an audit record with verdict null

FAMILIES: Mapping[str, str] = MappingProxyType(
    {
        "policy": "the daemon, on a policy file that does not load (a deny) or on reload (events)",
        "call": "the daemon, on a call the shim could not read",
        "pin": "the engine, step 1: the tool against its pinned form (every part of it)",
        "budget": "the engine, step 2: `max_calls`",
        "constraint": "the engine, step 3: `allowed_path_prefixes` and `arg_patterns`",
        "sink": "the engine, step 4: the sink gate of a sending tool",
        "fetch": "the engine, step 4: the sink gate of a fetching tool",
        "program": "the engine, step 4: an ungated tool that runs a command, code or SQL the agent wrote",
        "consequence": "the engine, step 4: a call that destroys, changes a credential, pays or books, or "
        "changes membership, judged by where its argument values came from",
        "approval": "a person's answer to an ask, and the approval codes",
        "default": "the engine, step 5: nothing objected",
        "fastpath": "the daemon, on the record of a call the shim forwarded before asking",
        "builtin": "the PreToolUse hook, for a client's own tools (shell, WebFetch)",
        "pins": "`bouncerctl pins accept`",
        "vouch": "the UserPromptSubmit hook: destinations you typed",
        "audit": "the audit log writer itself",
        "session": "the daemon, when a session ends and is archived",
        "state": "the engine while restricted: its journal was damaged and nobody accepted the loss yet",
        "resource": "reserved: resources/read and resource templates",
        "prompt": "reserved: prompts/get",
        "completion": "reserved: completion/complete",
        "message": "the engine: a request other than tools/call that carries data to a server "
        "(resources/read and /subscribe are judged as fetches, prompts/get and completion/complete here)",
    }
)

OWASP_REFS = tuple(f"LLM{i:02d}:2025" for i in range(1, 11))
# AIUC-1 control IDs checked against the standard's pages; anything else is cited by domain only.
AIUC_IDS = ("A004", "A006", "B002", "B006", "D003", "E015")
AIUC_DOMAINS = tuple(f"Domain {d}" for d in "ABCDEF")

_ID = re.compile(r"[a-z]+\.[a-z][a-z_]*")


@dataclass(frozen=True)
class RuleInfo:
    id: str
    verdicts: tuple[Kind, ...]  # what a record with this rule can say
    meaning: str  # one line: when it fires
    owasp: tuple[str, ...]  # OWASP LLM Top 10 (2025) entries it is evidence for
    aiuc: tuple[str, ...]  # AIUC-1 control IDs (AIUC_IDS) or domains it is evidence for
    stops: str  # the attack it stops, or "—"

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]


DENY: tuple[Kind, ...] = ("deny",)
ASK: tuple[Kind, ...] = ("ask",)
ALLOW: tuple[Kind, ...] = ("allow",)
EVENT: tuple[Kind, ...] = ("event",)
DENY_EVENT: tuple[Kind, ...] = ("deny", "event")

Maps = tuple[tuple[str, ...], tuple[str, ...]]  # (OWASP entries, AIUC-1 controls)

# The mappings, by what the rule is evidence of (see report/mappings.py for the rows).
_TAINT: Maps = ("LLM01:2025", "LLM02:2025"), ("A004", "A006", "B002", "D003")  # planted destinations
_GATE: Maps = ("LLM02:2025",), ("A004", "A006", "D003")  # where data goes
_PIN: Maps = ("LLM03:2025",), ("B006", "D003")
_CONSTRAINT: Maps = ("LLM05:2025", "LLM06:2025"), ("B006", "D003")
_BUDGET: Maps = ("LLM06:2025", "LLM10:2025"), ("B006", "D003")
_AGENCY: Maps = ("LLM06:2025",), ()
_CONSEQUENCE: Maps = ("LLM06:2025",), ("D003",)  # what a fooled agent does without sending anything
_PINS_EVENT: Maps = ("LLM03:2025",), ()
_NONE: Maps = ((), ())


def _row(rule_id: str, verdicts: tuple[Kind, ...], meaning: str, maps: Maps, stops: str) -> RuleInfo:
    owasp, aiuc = maps
    return RuleInfo(rule_id, verdicts, meaning, owasp, aiuc, stops)


# In the order a call meets them; then the answers, the hook's own, and the records that are not verdicts.
_TABLE = (
    _row(
        "policy.unreadable",
        DENY,
        "the shim's --policy file no longer loads; the daemon refuses rather than guess",
        _NONE,
        "—",
    ),
    _row(
        "call.invalid_arguments",
        DENY,
        "the call's arguments are not a JSON object, so they cannot be checked",
        _NONE,
        "a call that cannot be read slipping past the gate",
    ),
    _row(
        "pin.unknown_tool",
        DENY,
        "the tool is not in the server's pinned tool list",
        _PIN,
        "a tool added after first use (rug pull)",
    ),
    _row(
        "pin.unlisted_tool",
        DENY,
        "the tool is pinned but not in the server's latest tools/list",
        _PIN,
        "calls to a tool the server no longer offers",
    ),
    _row(
        "pin.duplicate_tool",
        DENY,
        "the server lists the tool more than once, in different forms",
        _PIN,
        "a benign form pinned while a second, poisoned form of the same name is shown to the agent",
    ),
    _row(
        "pin.changed_tool",
        DENY,
        "a part of the tool (description, title, input or output schema, annotations, icons, _meta) "
        "changed since it was pinned",
        _PIN,
        "a tool redefined after first use (rug pull)",
    ),
    _row(
        "state.budget_spent",
        DENY,
        "the tool has a budget and the record of the calls made was lost (restricted state)",
        _BUDGET,
        "a call over its budget allowed because the calls before it were lost with a damaged journal",
    ),
    _row("budget.forbidden", DENY, "the tool has `max_calls: 0`", _BUDGET, "calls to a tool you forbade"),
    _row(
        "budget.exceeded",
        DENY,
        "more attempts this session than `max_calls` (denied attempts count too)",
        _BUDGET,
        "repeated destructive calls",
    ),
    _row(
        "constraint.path",
        DENY,
        "a `write_params` value is outside `allowed_path_prefixes`, or cannot be judged",
        _CONSTRAINT,
        "writes outside the allowed directory (`..`, symlinks, `~`, relative paths)",
    ),
    _row(
        "constraint.landing_path",
        DENY,
        "an argument whose name says where the call writes (a download's target directory, a copy's "
        "destination, an extraction path) is outside `allowed_path_prefixes`, or cannot be judged, "
        "though `write_params` does not list it",
        _CONSTRAINT,
        "a download or an archive extracted into `~/.ssh` through a parameter the policy did not list",
    ),
    _row(
        "constraint.pattern",
        DENY,
        "an `arg_patterns` regex does not fully match its parameter, or the parameter is missing",
        _CONSTRAINT,
        "arguments outside an allowed shape",
    ),
    _row(
        "sink.nul_character",
        DENY,
        "an argument of a sending tool holds a NUL character",
        _GATE,
        "a NUL that cuts what is checked short of what is sent",
    ),
    _row(
        "sink.no_destination",
        ASK,
        "a sending tool called with nothing that can be read as a destination",
        _GATE,
        "a send whose destination Bouncer cannot read",
    ),
    _row(
        "sink.tainted_destination",
        DENY,
        "a destination first appeared in untrusted tool output",
        _TAINT,
        "sending data to a destination planted in tool output",
    ),
    _row(
        "sink.planted_name",
        DENY,
        "a plain-name destination (a user, a channel, a hotel) appeared only inside untrusted text, never "
        "as a whole value of a listing, never typed and never vouched",
        _TAINT,
        "sending to a person or place an injected text named",
    ),
    _row(
        "sink.dictated_content",
        DENY,
        "a send with no destination to check copies an argument (a title) word for word from untrusted text "
        "the prompt did not point to",
        _TAINT,
        "an injected text that dictates a whole call (an event titled as the attacker wants)",
    ),
    _row(
        "sink.tainted_identity",
        ASK,
        "a destination appeared in untrusted output only as a sender or participant",
        _TAINT,
        "replying to a planted sender without a person's say",
    ),
    _row(
        "sink.tainted_ask",
        ASK,
        "a destination first appeared in untrusted output, and the tool says `on_tainted: ask`",
        _TAINT,
        "sending data to a destination planted in tool output",
    ),
    _row(
        "sink.tainted_named_source",
        ASK,
        "a destination appeared in the output of a source your prompt named (a URL or a file you typed), "
        "and nowhere else in free text",
        _TAINT,
        "an injection inside the page or file the user pointed to",
    ),
    _row(
        "sink.named_source_orders",
        DENY,
        "a destination appeared in a source your prompt named, inside text that gives the agent orders "
        "(addressed to an AI, overriding its instructions, or hiding from the user) and tells it to send "
        "there",
        _TAINT,
        "an injection inside the page or file the user pointed to, asking for a different destination",
    ),
    _row(
        "sink.ambiguous_reading",
        ASK,
        "a destination can be read more than one way, so no allowlist can vouch for it",
        _GATE,
        "a destination that reads one way to Bouncer and another to the server",
    ),
    _row(
        "sink.evicted",
        ASK,
        "a destination was seen in untrusted output, but the index no longer knows where",
        _TAINT,
        "flooding the taint index so a planted destination is forgotten",
    ),
    _row(
        "sink.ambiguous",
        ASK,
        "as `sink.unproven`, in a call where every argument was treated as a destination "
        "(no declared sink parameter carried anything)",
        _GATE,
        "a destination in an undeclared parameter next to an empty declared one",
    ),
    _row(
        "sink.unproven",
        ASK,
        "a destination is not allowlisted, approved, typed by you or seen",
        _GATE,
        "sending to a destination nobody vouched for",
    ),
    _row("sink.trusted", ALLOW, "every destination of the call is trusted", _GATE, "—"),
    _row(
        "sink.no_new_destination",
        ALLOW,
        "a tool that changes an existing object, called without its destination parameter and with "
        "no other argument that can name a destination",
        _GATE,
        "—",
    ),
    _row(
        "fetch.named_source",
        ASK,
        "the URL's host appeared only in a source your prompt named, but this path or query did not",
        _TAINT,
        "data smuggled out in a URL on a host the user's chosen page names",
    ),
    _row(
        "fetch.tainted_host_new_path",
        DENY,
        "the URL's host appeared in untrusted output, but this path, query or fragment did not",
        _TAINT,
        "data smuggled out in the path or query of a URL on a planted host",
    ),
    _row(
        "fetch.evicted",
        ASK,
        "as `fetch.tainted_host_new_path`, with the host's details evicted from the index",
        _TAINT,
        "flooding the taint index so a planted host is forgotten",
    ),
    _row(
        "fetch.blind",
        ASK,
        "the fetch would be allowed, but an earlier output of this scope could not be indexed",
        _TAINT,
        "a planted URL hidden in an output that could not be checked",
    ),
    _row(
        "fetch.carries_tainted",
        DENY,
        "the URL carries a destination seen in untrusted output in its host labels, path, query or fragment",
        _TAINT,
        "a planted host or address smuggled inside a fetched URL or a looked-up name",
    ),
    _row(
        "program.carries_tainted",
        DENY,
        "a command, code or SQL argument of an ungated tool names a destination seen in untrusted output",
        _TAINT,
        "a planted host or address reached through a shell, code or SQL tool",
    ),
    _row(
        "fetch.ambiguous_reading",
        ASK,
        "a fetched URL can be read more than one way",
        _GATE,
        "a URL that reads one way to Bouncer and another to the server",
    ),
    _row(
        "message.no_tainted_destination",
        ALLOW,
        "a prompt, completion or other request carries no destination seen in untrusted output",
        _GATE,
        "—",
    ),
    _row(
        "message.invalid_params",
        DENY,
        "a request whose params cannot be read (a resource read without a URI, params not an object)",
        _GATE,
        "a request shaped so that Bouncer cannot check what it carries",
    ),
    _row(
        "fetch.allowed",
        ALLOW,
        "every URL was seen exactly, is trusted, or is on a host never seen",
        _GATE,
        "—",
    ),
    _row(
        "approval.once",
        ALLOW,
        "an ask for a call a person approved with `bouncerctl approve` (the grant is used up)",
        _AGENCY,
        "—",
    ),
    *(_row(rule_id, kinds, meaning, _CONSEQUENCE, stops) for rule_id, kinds, meaning, stops in CONSEQUENCES),
    _row(
        "default.tainted_argument",
        ASK,
        "a tool nothing gates is called with an argument that is a destination seen in untrusted output",
        _TAINT,
        "a sending tool the fallback cannot read, pointed at a planted destination",
    ),
    _row(
        "state.unproven_send",
        ASK,
        "a send or fetch that would be allowed for want of taint, while the taint may have been lost "
        "with a damaged journal (restricted state)",
        _GATE,
        "a planted destination allowed after the output that planted it was lost",
    ),
    _row("default.allow", ALLOW, "no rule objected (no budget, no constraint, sink gate off)", _NONE, "—"),
    _row(
        "fastpath.late",
        ALLOW,
        "a call forwarded on the fast path that the daemon, reading its record after a change it could "
        "not wait for, would have refused",
        _NONE,
        "—",
    ),
    _row("approval.elicited", ALLOW, "a person allowed the call when asked", _AGENCY, "—"),
    _row(
        "approval.declined",
        DENY_EVENT,
        "a person declined the call or dismissed the question",
        _AGENCY,
        "—",
    ),
    _row(
        "approval.timeout",
        DENY_EVENT,
        "nobody answered the question in time",
        _AGENCY,
        "an unanswered question turning into an allow",
    ),
    _row(
        "approval.bad_state",
        DENY_EVENT,
        "a retry's requestState was refused (forged, expired, replayed or for another call)",
        _AGENCY,
        "a forged, replayed or transplanted requestState",
    ),
    _row(
        "approval.always_failed",
        DENY_EVENT,
        "a person chose to always allow, but the policy could not be updated",
        _AGENCY,
        "—",
    ),
    _row(
        "approval.closed",
        DENY,
        "an answer came for a question that is no longer open",
        _AGENCY,
        "an answer replayed after its question closed",
    ),
    _row(
        "approval.stale",
        DENY_EVENT,
        "a person said yes to a question that no longer holds: its destination turned up in untrusted "
        "output after it was asked (the call is decided again)",
        _AGENCY,
        "a yes to a clean send carried over to a destination tainted since",
    ),
    _row(
        "approval.full",
        DENY,
        "the call would be asked, but `MAX_PENDING` questions are already open: it is refused without a "
        "code, and every open code is kept",
        _AGENCY,
        "a flood of questions pushing out the one a person is answering",
    ),
    _row("approval.granted", EVENT, "a person allowed a call (when asked, or by code)", _AGENCY, "—"),
    _row("approval.expired", EVENT, "an approval code expired unanswered", _AGENCY, "—"),
    _row(
        "approval.refused",
        EVENT,
        "an answer or approve op was refused: another session's shim, or too many wrong codes",
        _AGENCY,
        "another session answering a question; guessing codes",
    ),
    _row(
        "approval.wrong_code",
        EVENT,
        "`bouncerctl approve` named a code that is not open",
        _AGENCY,
        "guessing codes",
    ),
    _row(
        "builtin.bouncer_control",
        DENY,
        "a shell command changes Bouncer itself (`bouncerctl approve`, `hook`, `init`, …, or its socket)",
        _NONE,
        "the agent approving its own call, or forging a prompt, through a shell tool",
    ),
    _row(
        "builtin.unreadable",
        ASK,
        "a shell command too long or too deeply nested to read for destinations",
        _NONE,
        "a send hidden in a command Bouncer cannot read",
    ),
    _row("builtin.no_destination", ALLOW, "a built-in tool call names no destination", _NONE, "—"),
    _row(
        "builtin.no_tainted_destination",
        ALLOW,
        "no destination of a built-in tool call first appeared in untrusted output",
        _NONE,
        "—",
    ),
    _row("policy.reloaded", EVENT, "the daemon loaded the policy again", _NONE, "—"),
    _row(
        "session.ended",
        EVENT,
        "a session's last shim left a grace period ago; it was archived (its taint kept for taint_retention)",
        _NONE,
        "—",
    ),
    _row(
        "policy.reload_failed",
        EVENT,
        "a reload failed; the policy in force stays what it was",
        _NONE,
        "—",
    ),
    _row("pins.accepted", EVENT, "a person accepted new or changed tools", _PINS_EVENT, "—"),
    _row("vouch.user_prompt", EVENT, "destinations you typed were vouched for the session", _NONE, "—"),
    _row(
        "state.lost",
        EVENT,
        "the journal was damaged at start: bouncerd runs restricted until a person accepts the loss",
        _NONE,
        "—",
    ),
    _row(
        "state.loss_accepted",
        EVENT,
        "a person accepted the loss of the journal's state (`bouncerctl state accept-loss`)",
        _NONE,
        "—",
    ),
    _row(
        "audit.rotated",
        EVENT,
        "the first record of a new log file; `prev` chains it to the file before",
        _NONE,
        "—",
    ),
    _row(
        "audit.repaired",
        EVENT,
        "a torn last line (a crash mid-write) was moved aside at start",
        _NONE,
        "—",
    ),
    _row(
        "audit.gap",
        EVENT,
        "the live log was deleted, moved or replaced (or no longer held the last record written): a new "
        "file starts here, `prev` naming the last record written, so `audit verify` reports the gap",
        _NONE,
        "—",
    ),
    _row(
        "audit.export_dropped",
        EVENT,
        "copies of audit records for a collector (audit_export) were lost; the local log has every line",
        _NONE,
        "—",
    ),
)


def _problem(r: RuleInfo, table: Mapping[str, RuleInfo]) -> str | None:
    """What is wrong with a row, or None."""
    checks = (
        (r.id in table, "is listed twice"),
        (not _ID.fullmatch(r.id), "is not family.name in lower case"),
        (r.family not in FAMILIES, f"has no family {r.family!r} in FAMILIES"),
        (not r.verdicts or len(set(r.verdicts)) != len(r.verdicts), "lists no verdicts, or one twice"),
        (not set(r.owasp) <= set(OWASP_REFS), f"maps to an OWASP entry not in the 2025 list: {r.owasp}"),
        (not set(r.aiuc) <= {*AIUC_IDS, *AIUC_DOMAINS}, f"maps to an unchecked AIUC-1 control: {r.aiuc}"),
        (not (r.meaning and r.stops), 'has no meaning or no stops (write "—")'),
    )
    return next((why for failed, why in checks if failed), None)


def _build(rows: tuple[RuleInfo, ...]) -> Mapping[str, RuleInfo]:
    """The table keyed by id. A bad row is an error at import: the table is code, not input."""
    table: dict[str, RuleInfo] = {}
    for r in rows:
        problem = _problem(r, table)
        if problem is not None:
            raise ValueError(f"rule {r.id!r} {problem}")
        table[r.id] = r
    return MappingProxyType(table)


RULES: Mapping[str, RuleInfo] = _build(_TABLE)


def mapped_to(*refs: str) -> tuple[str, ...]:
    """The ids of the rules that are evidence for any of `refs` (OWASP entries or AIUC-1 controls)."""
    wanted = set(refs)
    return tuple(r.id for r in RULES.values() if wanted & {*r.owasp, *r.aiuc})
