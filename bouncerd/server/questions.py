"""The text a person decides on: what an ask shows, and the elicitation form that carries it.

Theory of operation
-------------------
`question_for` turns an ask into plain text for a person (the same text goes into the elicitation
message, `bouncerctl approve` and `bouncerctl pending`): which server and tool, each destination that
is not trusted *exactly as it will be used* (invisible characters escaped by `canon.visible`, and every
non-ASCII character named, so ``pаypal.com`` with a Cyrillic ``а`` says so), why it is asked (unproven,
or where it was seen: server/tool, time, field), and the other arguments by name and size only. The
arguments are the agent's, possibly steered by an attacker: their text is never repeated, only how
long it is; numbers and booleans are shown because they are short and often matter (an amount).

It also returns what an approval for longer than this call would trust: the call's untrusted values
that are destination-shaped (`canon.canonicalize` says e-mail, URL, host, phone, IBAN or handle), never
free text that landed in a sink.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from bouncerd.core import canon, sinkgate
from bouncerd.core.model import Provenance, ToolCall, Verdict

# Lines of destinations in a question; a call with more is summarised ("and 7 more").
MAX_SHOWN_DESTINATIONS = 8
# Arguments named in the summary; names are cut at MAX_NAME_CHARS (they come from the agent).
MAX_SUMMARY_ARGUMENTS = 12
MAX_NAME_CHARS = 40
# Non-ASCII characters spelled out per destination: enough to expose a look-alike, short enough to read.
MAX_SPELLED_CHARS = 6
# A value longer than this is text that landed in a sink, not a destination anyone would trust for good.
MAX_TRUSTABLE_CHARS = 320


def name_shown(text: str) -> str:
    shown = canon.visible(text)
    return shown if len(shown) <= MAX_NAME_CHARS else shown[: MAX_NAME_CHARS - 1] + "…"


def shown(value: str) -> str:
    """A destination in quotes with invisible characters escaped, cut at SHOWN_DESTINATION_CHARS."""
    text = canon.visible(value)
    if len(text) > sinkgate.SHOWN_DESTINATION_CHARS:
        text = text[: sinkgate.SHOWN_DESTINATION_CHARS - 1] + "…"
    return f'"{text}"'


def clock(ts: float) -> str:
    """A time as the person's wall clock with its zone (``14:03:07 CET``), as bouncerctl prints it."""
    return time.strftime("%H:%M:%S %Z", time.localtime(ts))


def _where(prov: Provenance | None) -> str:
    if prov is None:
        return "in untrusted output earlier (the details are no longer kept)"
    tool = f"/{name_shown(prov.tool)}" if prov.tool else ""
    field = f", field {name_shown(prov.field)}" if prov.field else ""
    return f"in the output of {name_shown(prov.server)}{tool} at {clock(prov.ts)}{field}"


_WHY = {
    "unproven": "not in your allowlist, not approved before, not typed by you",
    "evicted": "seen in untrusted output earlier (the details are no longer kept)",
}


def _why(c: sinkgate.Classified) -> str:
    if c.state == "tainted_named" and c.provenance is not None:
        return f"appeared in a source your prompt named ({c.provenance.named}) {_where(c.provenance)}"
    if c.state == "tainted_identity":
        return f"appeared as a sender or participant {_where(c.provenance)}"
    if c.state == "tainted":
        return f"appeared {_where(c.provenance)}"
    if c.state == "ambiguous":
        return f"can be read more than one way: {sinkgate.readings_text(c.dest.value)}"
    return _WHY.get(c.state, c.state)


def _spelled(value: str) -> str | None:
    """Non-ASCII characters named, so a look-alike (Cyrillic 'а' in 'pаypal.com') shows what it is."""
    odd = list(dict.fromkeys(ch for ch in value if ord(ch) > 0x7E))
    if not odd:
        return None
    names = [f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}" for ch in odd[:MAX_SPELLED_CHARS]]
    more = f" and {len(odd) - MAX_SPELLED_CHARS} more" if len(odd) > MAX_SPELLED_CHARS else ""
    return "contains " + ", ".join(names) + more


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"{len(value):,} characters"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)[:24]
    if isinstance(value, list | tuple):
        return f"list of {len(value)}"
    if isinstance(value, Mapping):
        return f"{len(value)} fields"
    return "empty" if value is None else type(value).__name__


def _top(parameter: str) -> str:
    return re.split(r"[.\[]", parameter, maxsplit=1)[0]


def question_for(
    call: ToolCall, verdict: Verdict, classified: Sequence[sinkgate.Classified]
) -> tuple[str, str, tuple[str, ...]]:
    """(the question, the summary of the other arguments, the destinations an approval would trust)."""
    lines = [f"The agent wants to call {name_shown(call.tool)} on {name_shown(call.server.name)}."]
    untrusted = [c for c in classified if c.state != "trusted"]
    listed = [
        c
        for c in untrusted
        if canon.canonicalize(c.dest.value).kind != "text" or c.dest.value == verdict.destination
    ]
    if verdict.rule == "sink.ambiguous":
        lines.append("Its destination parameter is missing or empty, so every argument counts as one.")
    if verdict.rule == "sink.no_destination" or not listed:
        lines.append("It sends data, but the call names no destination Bouncer can check.")
    else:
        lines.append("It would fetch:" if verdict.rule.startswith("fetch.") else "It would send to:")
        for c in listed[:MAX_SHOWN_DESTINATIONS]:
            lines.append(f"  {name_shown(c.dest.parameter)} = {shown(c.dest.value)}: {_why(c)}")
            spelled = _spelled(c.dest.value)
            if spelled:
                lines.append(f"    ({spelled})")
        if len(listed) > MAX_SHOWN_DESTINATIONS:
            lines.append(f"  and {len(listed) - MAX_SHOWN_DESTINATIONS} more")
    trusted = len(classified) - len(untrusted)
    if trusted:
        lines.append(f"({trusted} other destination(s) in this call are trusted.)")
    named = {_top(c.dest.parameter) for c in listed}
    others = [(k, v) for k, v in call.arguments.items() if str(k) not in named]
    parts = [f"{name_shown(str(k))} ({_describe(v)})" for k, v in others[:MAX_SUMMARY_ARGUMENTS]]
    if len(others) > MAX_SUMMARY_ARGUMENTS:
        parts.append(f"and {len(others) - MAX_SUMMARY_ARGUMENTS} more")
    summary = "Other arguments: " + (", ".join(parts) if parts else "none")
    lines.append(summary)
    trustable = tuple(
        dict.fromkeys(
            c.dest.value
            for c in untrusted
            if len(c.dest.value) <= MAX_TRUSTABLE_CHARS
            and canon.canonicalize(c.dest.value).kind != "text"
            and canon.reading(c.dest.value).single  # one that reads two ways is approved call by call
        )
    )
    return "\n".join(lines), summary, trustable


def elicitation_form(question: str, can_trust: bool) -> dict[str, Any]:
    """What the shim puts in elicitation/create: the question and one required choice, a titled
    single-select enum as the specification gives it (``oneOf`` of ``const`` and ``title``; the shim
    turns it into 2025-06-18's ``enum`` with ``enumNames`` for a client of that revision)."""
    options = [("once", "Allow once")]
    if can_trust:
        options += [
            ("session", "Allow for this session"),
            ("always", "Always allow (adds it to your policy)"),
        ]
    options.append(("deny", "Deny"))
    choice = {
        "type": "string",
        "title": "Your decision",
        "oneOf": [{"const": value, "title": title} for value, title in options],
    }
    schema = {"type": "object", "properties": {"choice": choice}, "required": ["choice"]}
    return {"message": question, "requestedSchema": schema}


def code_hint(code: str, expires: float) -> str:
    return (
        f"A person can allow this exact call once by running `bouncerctl approve {code}` in their own "
        f"terminal before {clock(expires)}; then retry the same call unchanged."
    )


class Wording:
    """This module as the decision's `bouncerd.core.decision_types.Phrasing` (the core reads no clock)."""

    def question(
        self, call: ToolCall, verdict: Verdict, classified: Sequence[sinkgate.Classified]
    ) -> tuple[str, str, tuple[str, ...]]:
        return question_for(call, verdict, classified)

    def code_hint(self, code: str, expires: float) -> str:
        return code_hint(code, expires)
