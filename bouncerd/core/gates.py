"""The gates of the decision, as data: each a function over a read-only view of the engine.

Theory of operation
-------------------
After the pin (`pins.check`), a tools/call passes the gates of `GATES` in their fixed order
(docs/how-it-works.md, "The decision"); the first to return a verdict decides, and a call no gate
objects to is allowed (`default.allow`). `GATES` is the one place the order is written: the engine
walks it, and the fast path (`fastpath.py`) asks each row's `concerns` to know which tools no gate
can object to.

A gate reads the engine through `GateView` and changes nothing, with one exception it is handed
separately: a person's one-time approval of the exact call (`OnceGrants.use_once`) is spent, and
journalled, when a gate's ask meets it. The engine meets whatever ask the walk ends with (and the
restricted state's) with the grants once more, so a gate that returns its ask without them (the
backstop, `check_carried`) cannot make an approved call a question with no way through.
`decide_message` judges the requests other than tools/call (a resource read, a prompt's arguments,
an elicitation's answers) the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from bouncerd.core import (
    argshapes,
    builtin_tools,
    callnotes,
    canon,
    consequence,
    constraints,
    fallback,
    fetchgate,
    names,
    onetimecode,
    orderedacts,
    restricted,
    sinkgate,
    tokens,
)
from bouncerd.core.model import MESSAGE_LABELS, ToolCall, Verdict
from bouncerd.core.policy import Policy
from bouncerd.core.rules import ToolRule
from bouncerd.core.store import TaintView


class MadeObjects(Protocol):
    """What a send reads of the objects made in this session (`callnotes.CallNotes`)."""

    def object_named(
        self, session: str, server: str, arguments: Mapping[str, Any]
    ) -> tuple[str, callnotes.MadeObject] | None: ...


class PendingActs(Protocol):
    """What a confirming call reads of the acts let through before it (`onetimecode.Pending`)."""

    def latest(self, session: str, server: str) -> onetimecode.Act | None: ...


class NameRecord(Protocol):
    """What a send reads of the plain names seen in output (`names.NameLedger`)."""

    def scope(self, scope: str) -> names.ScopeNames: ...


class GateView(Protocol):
    """What a gate reads of the engine (`engine.Engine` is one): nothing here changes a journalled state."""

    @property
    def policy(self) -> Policy: ...
    @property
    def resolve(self) -> Callable[[str], str]: ...
    @property
    def restriction(self) -> restricted.Restriction | None: ...
    @property
    def blind(self) -> Collection[str]: ...
    @property
    def notes(self) -> MadeObjects: ...
    @property
    def codes(self) -> PendingActs: ...

    @property
    def names(self) -> NameRecord: ...

    def scope_key(self, session: str, server: str) -> str: ...
    def index(self, scope: str) -> TaintView: ...
    def attempts_of(self, call: ToolCall) -> int: ...
    def trust(self, call: ToolCall, rule: ToolRule) -> sinkgate.Trust: ...
    def session_trust(self, call: ToolCall) -> sinkgate.Trust: ...
    def builtin_verdict(
        self, tool_name: str, tool_input: Mapping[str, Any], scope: str, trust: sinkgate.Trust, rule: ToolRule
    ) -> Verdict: ...


class OnceGrants(Protocol):
    """The one change a gate may make: spend a person's approval of this exact call."""

    def use_once(self, call: ToolCall, verdict: Verdict, now: float) -> Verdict:
        """An ask the person approved once becomes an allow (`approval.once`), once; else the ask."""
        ...


def check_budget(
    view: GateView, call: ToolCall, rule: ToolRule, grants: OnceGrants, now: float
) -> Verdict | None:
    """`max_calls`: a tool forbidden (0), or tried more often this session than the policy allows."""
    if rule.max_calls is None:
        return None
    if rule.max_calls == 0:
        return Verdict(
            "deny", "budget.forbidden", f"tool {call.tool!r} is forbidden by policy (max_calls: 0)"
        )
    tried = view.attempts_of(call)
    if tried > rule.max_calls:
        return Verdict(
            "deny",
            "budget.exceeded",
            f"tool {call.tool!r} may be called {rule.max_calls} time(s) per session; this is attempt {tried}",
        )
    return None


def check_constraints(
    view: GateView, call: ToolCall, rule: ToolRule, grants: OnceGrants, now: float
) -> Verdict | None:
    """`allowed_path_prefixes` and `arg_patterns`: an argument outside what the policy allows."""
    v = constraints.check_paths(rule, call.arguments, view.resolve) or constraints.check_patterns(
        rule, call.arguments
    )
    if v is None:
        return None
    return Verdict("deny", v.rule, v.reason, parameter=v.parameter)


def check_sinks(
    view: GateView, call: ToolCall, rule: ToolRule, grants: OnceGrants, now: float
) -> Verdict | None:
    """The sink gate: a tool that sends or fetches, judged by where its destinations came from."""
    if not rule.exfiltrating:
        return None
    scope = view.scope_key(call.session, call.server.name)
    index = view.index(scope)
    trust = view.trust(call, rule)
    payload = None
    if rule.sink_kind == "fetch":
        payload = fetchgate.fetch_payload(call.arguments, rule.sink_params, fallback.looks_like_destination)
    if rule.sink_kind == "fetch" and payload is None:
        verdict = fetchgate.fetch_verdict(
            call.arguments,
            tool=call.tool,
            sink_params=rule.sink_params,
            trust=trust,
            seen_exactly=index.seen_exactly,
            host_hit=index.host_hit,
            key_hit=index.key_hit,
        )
        verdict = unless_blind(view, call, verdict, "fetches")
        return grants.use_once(call, verdict, now)
    # Sending an object made in this session for trusted destinations (a draft, by its id): the id
    # names no destination of its own, so it is judged without it; if nothing else names one, the
    # object's destinations are where the call sends (callnotes).
    made = view.notes.object_named(call.session, call.server.name, call.arguments)
    arguments = call.arguments
    if made is not None and payload is None:
        arguments = {
            k: v for k, v in call.arguments.items() if not (isinstance(v, str | int) and str(v) == made[0])
        }
    verdict = sinkgate.send_verdict(
        arguments,
        tool=call.tool,
        sink_params=rule.sink_params,
        trust=trust,
        lookup=index.lookup,
        on_tainted=rule.on_tainted,
        on_tainted_identity=view.policy.settings.on_tainted_identity,
        looks_like_destination=fallback.looks_like_destination,
        seen=view.names.scope(scope),
    )
    if payload is not None:  # a fetch with a body, headers, a writing method or a callback: a send
        reason = f"{verdict.reason} (this fetch also carries {payload!r}, so it is judged as a send)"
        verdict = dataclasses.replace(verdict, reason=reason)
    elif verdict.rule in ("sink.no_destination", "sink.no_new_destination") and made is not None:
        object_id, obj = made
        verdict = Verdict(
            "allow",
            "sink.trusted",
            f"{call.tool} sends {object_id!r}, made in this session for "
            f"{', '.join(obj.destinations)} and not changed since ({obj.why})",
            destination=obj.destinations[0] if obj.destinations else None,
        )
    return grants.use_once(call, verdict, now)


def check_consequence(
    view: GateView, call: ToolCall, rule: ToolRule, grants: OnceGrants, now: float
) -> Verdict | None:
    """The sink gate, then a consequential call it let through (or does not gate) is judged by where
    its argument values came from (`consequence.judge`) and whether orders in untrusted output chose
    the act (`orderedacts`). A call the sink gate asks about is still refused when those find the
    injection's hand in it: a deny outranks a question."""
    sink = check_sinks(view, call, rule, grants, now)
    if sink is not None and (sink.verdict == "deny" or sink.rule == "approval.once"):
        return sink  # refused, or a person approved this exact call: one question is enough
    scope = view.scope_key(call.session, call.server.name)
    index = view.index(scope)
    trust = view.trust(call, rule)
    ordered = orderedacts.verdict(call.tool, rule, call.arguments, trust=trust, seen=view.names.scope(scope))
    if ordered is not None:
        return ordered
    if sink is not None and sink.verdict == "ask":
        judged = consequence.judge(
            call.tool,
            rule,
            call.arguments,
            trust=trust,
            key_hit=index.key_hit,
            lookup=index.lookup,
            attempts=view.attempts_of(call),
        )
        return judged if judged is not None and judged.verdict == "deny" else sink
    code, codes = onetimecode.judge(
        call.tool,
        call.arguments,
        pending=view.codes.latest(call.session, call.server.name),
        typed_by_user=lambda d: consequence.trusted_value(d, trust),
        key_hit=index.key_hit,
        lookup=index.lookup,
    )
    if code is not None:
        return grants.use_once(call, code, now)
    programs = {name for name, _ in argshapes.program_arguments(call.arguments)}  # the shell reader's
    keyed = consequence.key_path_verdict(
        call.tool, {k: v for k, v in call.arguments.items() if k not in programs}
    )
    verdict = (keyed if argshapes.carries_destinations(call.tool) else None) or consequence.judge(
        call.tool,
        rule,
        {k: v for k, v in call.arguments.items() if k not in codes},  # a code confirms its act
        trust=trust,
        key_hit=index.key_hit,
        lookup=index.lookup,
        attempts=view.attempts_of(call),
    )
    if verdict is None and sink is None and codes:  # its code confirms the act judged before it
        others = {k: v for k, v in call.arguments.items() if k not in codes}
        rest = dataclasses.replace(call, arguments=others)
        act = view.codes.latest(call.session, call.server.name)
        return (
            check_programs(view, rest, rule, grants, now)
            or check_carried(view, rest, rule, grants, now)
            or onetimecode.confirmed(call.tool, act)
        )
    return sink if verdict is None else grants.use_once(call, verdict, now)


def check_programs(
    view: GateView, call: ToolCall, rule: ToolRule, grants: OnceGrants, now: float
) -> Verdict | None:
    """An ungated tool that runs a program the agent wrote (a shell command, code, SQL: see
    `program_arguments`) reaches wherever the program says: read as a shell command is read for
    the client's own Bash tool (`builtin_tools.verdict`: a tainted destination is denied, a
    command that changes Bouncer is denied), and any destination token in it that appeared in
    untrusted output is denied (`dblink_connect('host=evil.example')`, `fetch('https://…')`)."""
    if rule.exfiltrating:
        return None
    programs = argshapes.program_arguments(call.arguments)
    if not programs:
        return None
    scope = view.scope_key(call.session, call.server.name)
    index = view.index(scope)
    trust = view.trust(call, rule)
    for name, text in programs:
        v = view.builtin_verdict(builtin_tools.BASH, {"command": text}, scope, trust, rule)
        if v.verdict != "allow":
            reason = f"{call.tool}: argument {name!r} is a program, read as a shell command: {v.reason}"
            return dataclasses.replace(v, parameter=name, reason=reason)
        for key in sorted(tokens.text_keys(text)):
            hit = index.key_hit(key)
            if hit is not None and hit.state == "tainted" and key not in trust.destinations:
                return Verdict(
                    "deny",
                    "program.carries_tainted",
                    f"{call.tool}: argument {name!r} is a program that names {canon.visible(key)}, "
                    f"which first appeared in untrusted output: it could send your data there",
                    destination=key,
                    parameter=name,
                    provenance=hit.provenance,
                )
    return None


def check_carried(
    view: GateView, call: ToolCall, rule: ToolRule, grants: OnceGrants, now: float
) -> Verdict | None:
    """The backstop for a tool nothing gates: an argument whose value *is* a destination seen in
    untrusted output (`to`, `owner`+`repo`, `uri`, `number`, `proxy_url`, ... on a tool whose
    sending the fallback could not read from its name or description) is asked about. A tool
    whose name only reads (`carries_destinations`) is not: looking up a planted sender is
    what a mail client does."""
    if rule.exfiltrating or not argshapes.carries_destinations(call.tool):
        return None
    index = view.index(view.scope_key(call.session, call.server.name))
    trust = view.trust(call, rule)
    for d in [*sinkgate.destinations(call.arguments, ())[0], *sinkgate.assembled(call.arguments)]:
        value = d.value.strip()
        if len(value) > argshapes.MAX_CARRIED_VALUE_CHARS or (
            canon.canonicalize(value).kind == "text" and len(value.split()) != 1
        ):
            continue  # prose: what a note or a document says is not where it goes
        if sinkgate.trusted_reason(d, trust) is not None:
            continue
        hit = index.lookup(d.value)
        if hit is not None and hit.state == "tainted":
            return Verdict(
                "ask",
                "default.tainted_argument",
                f"{call.tool} is not known to send, but its argument {d.parameter!r} is "
                f"{canon.visible(d.value)}, which first appeared in untrusted output",
                destination=d.value,
                parameter=d.parameter,
                provenance=hit.provenance,
            )
    return None


def decide_message(view: GateView, call: ToolCall, grants: OnceGrants, now: float) -> Verdict:
    """A request other than tools/call that carries the agent's data to the server
    (docs/how-it-works.md, "Requests other than tools/call").

    A resource read or subscription names a URI the server will retrieve (through a resource
    template, a host of the agent's choosing): judged as a fetch. Prompt and completion arguments,
    and the params of any other request, are read for destinations: one seen in untrusted output
    is refused as a send to it would be; nothing else in them names where data goes."""
    label = MESSAGE_LABELS.get(call.kind, "request")
    index = view.index(view.scope_key(call.session, call.server.name))
    trust = view.session_trust(call)
    if call.kind == "resource":
        uri = call.arguments.get("uri")
        if not isinstance(uri, str) or not uri.strip():
            return Verdict("deny", "message.invalid_params", f"{label} {call.tool} names no URI to check")
        verdict = fetchgate.fetch_verdict(
            {"uri": uri},
            tool=call.tool,
            sink_params=("uri",),
            trust=trust,
            seen_exactly=index.seen_exactly,
            host_hit=lambda value: index.host_hit(value) if argshapes.names_a_network_host(value) else None,
            key_hit=index.key_hit,
            what="reading",
        )
        verdict = unless_blind(view, call, verdict, "resource reads")
    else:
        verdict = sinkgate.send_verdict(
            call.arguments,
            tool=call.tool,
            sink_params=(),
            trust=trust,
            lookup=index.lookup,
            on_tainted="deny",
            on_tainted_identity=view.policy.settings.on_tainted_identity,
        )
        if verdict.verdict != "deny" and verdict.rule not in ("sink.tainted_identity", "sink.evicted"):
            verdict = Verdict(
                "allow",
                "message.no_tainted_destination",
                "no destination in it appeared in untrusted output",
                destination=verdict.destination,
                parameter=verdict.parameter,
            )
    verdict = grants.use_once(call, verdict, now)
    return dataclasses.replace(verdict, reason=f"{label} {call.tool}: {verdict.reason}")


def unless_blind(view: GateView, call: ToolCall, verdict: Verdict, what: str) -> Verdict:
    """An allowed fetch becomes an ask once an output of the scope could not be indexed."""
    if verdict.verdict != "allow" or view.scope_key(call.session, call.server.name) not in view.blind:
        return verdict
    return Verdict(
        "ask",
        "fetch.blind",
        f"an earlier output of this session could not be checked for planted destinations, "
        f"so {what} need a person",
        destination=verdict.destination,
    )


@dataclass(frozen=True)
class Gate:
    """One step of the decision after the pin: `concerns` says whether it can have anything to say
    about a call of this tool with arguments of these names (a question of the rule, the tool's name
    and the argument names alone, never of the state or of the values); `check` decides the call.
    `concerns` must only grow with the names (the fast path, fastpath.py, asks it with every name the
    tool may be called with). `decide` runs `check` only where `concerns` holds, so a gate that does
    not concern a tool cannot object to it, and a gate added to `GATES` keeps the tools it concerns
    off the fast path without a second copy of its rule."""

    name: str
    concerns: Callable[[ToolRule, str, Collection[str]], bool]
    check: Callable[[GateView, ToolCall, ToolRule, OnceGrants, float], Verdict | None]


# The order of the steps after the pin (docs/how-it-works.md, "The decision"): one row per gate.
GATES: Final[tuple[Gate, ...]] = (
    Gate(
        "budget",
        lambda rule, tool, names: rule.max_calls is not None,
        lambda view, call, rule, grants, now: (
            check_budget(view, call, rule, grants, now)
            or restricted.budget(view.restriction, call.tool, rule.max_calls)
        ),
    ),
    Gate(
        "constraints",
        lambda rule, tool, names: bool(rule.allowed_path_prefixes or rule.arg_patterns),
        check_constraints,
    ),
    Gate(
        # The sink gate, then what a consequential call's values came from, and a path into a key
        # directory named by any call that does not only read (`check_consequence`).
        "sinks and consequences",
        lambda rule, tool, names: (
            rule.exfiltrating
            or consequence.of(rule) is not None
            or argshapes.carries_destinations(tool)
            or onetimecode.confirms(tool)
        ),
        check_consequence,
    ),
    Gate(
        "programs",
        lambda rule, tool, names: not rule.exfiltrating and any(argshapes.names_a_program(n) for n in names),
        check_programs,
    ),
    Gate(
        "carried",
        lambda rule, tool, names: not rule.exfiltrating and argshapes.carries_destinations(tool),
        check_carried,
    ),
)
