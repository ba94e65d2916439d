"""The engine: all state the daemon keeps, changed only by events, and the decision over it.

Theory of operation
-------------------
Everything that must survive a crash (pins, taint, budget counts, approvals, vouched destinations)
changes only through *events*: plain dicts that msgpack and JSON can carry. A method that changes
state returns the events it produced *after* applying them; the daemon appends them to its journal
before it answers the shim. On start the daemon replays the journal through `apply`, and ends up in
the same state. `snapshot` returns a minimal event list that rebuilds the current state (compaction).

The decision for one tools/call (docs/how-it-works.md, "The decision") runs in a fixed order and
names the rule that fired: pin → budget → argument constraints → sink gate → allow. The engine never
reads a clock, the environment or a file: `now` is passed in, policy is a value, and the one piece of
I/O the path check needs (resolving symlinks) is a function the daemon injects.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from bouncerd.core import approvals as ap
from bouncerd.core import (
    argshapes,
    builtin_tools,
    callnotes,
    canon,
    consequence,
    constraints,
    fallback,
    fallback_words,
    managed,
    pins,
    restricted,
    said,
    sinkgate,
    taint,
    tokens,
    typed,
)
from bouncerd.core.events import (
    AttemptEvent,
    BlindEvent,
    EngineEvent,
    GrantUsedEvent,
    ListedEvent,
    PinEvent,
    PinWindowEvent,
    SessionEndedEvent,
    TaintEvent,
    TaintEvictedEvent,
    TaintExpiredEvent,
    VouchEvent,
)
from bouncerd.core.model import MESSAGE_LABELS, ServerIdentity, ToolCall, Verdict
from bouncerd.core.pins import PinReport, ServerPins, seen_event
from bouncerd.core.policy import Policy, merge
from bouncerd.core.rules import ToolRule

Event = EngineEvent
_E = TypeVar("_E", bound=EngineEvent)
Resolve = Callable[[str], str]

USER_SCOPE = "*user*"  # the taint scope key when taint_scope is `user`

# Taint records per snapshot event: at ~100 bytes a record this keeps an event near 10 MB, far below
# the journal frame limit (wire.MAX_FRAME_BYTES) even for an index at its full size.
SNAPSHOT_TAINT_CHUNK = 100_000


def _lexical_only(path: str) -> str:
    return path


@dataclass
class SessionState:
    attempts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (server, tool) -> calls tried
    vouched: set[str] = field(default_factory=set)  # narrow keys of destinations the user typed
    listed: dict[str, str] = field(default_factory=dict)  # wide key -> the directory tool that listed it


class Engine:
    def __init__(self, policy: Policy | None = None, resolve: Resolve = _lexical_only) -> None:
        self.policy = policy if policy is not None else merge([])
        self.resolve = resolve
        self.servers: dict[str, ServerPins] = {}
        self.sessions: dict[str, SessionState] = {}
        self.taint: dict[str, taint.TaintIndex] = {}  # scope key -> index
        self.approvals = ap.Approvals()
        self.blind: set[str] = set()  # taint scopes where an output could not be indexed
        self._identities: dict[str, ServerIdentity] = {}  # server name -> latest identity seen
        self._rules: dict[tuple[int, str, str, str], ToolRule] = {}
        self._own: tuple[tuple[str, ...], frozenset[str]] | None = None  # `you:` and its taint keys
        self.notes = callnotes.CallNotes()  # recent calls, to read their outputs (not journalled)
        self.restriction: restricted.Restriction | None = None  # the journal was damaged (restricted.py)

    def restrict(self, restriction: restricted.Restriction) -> None:
        """The state on disk was damaged: decide as `bouncerd/core/restricted.py` says from now on, and
        drop what only ever loosened a verdict (pins, first-use windows, grants, vouched and listed
        destinations). The daemon journals the restriction, so replaying it drops the same."""
        self.restriction = restriction
        restricted.drop_loosening(self.servers.values(), self.sessions.values())
        self.approvals = ap.Approvals()

    def lift_restriction(self) -> None:
        """A person accepted the loss: decide as usual again (tools stay unpinned until accepted)."""
        self.restriction = None

    def set_policy(self, policy: Policy) -> None:
        self.policy = policy
        self._rules.clear()

    # ---- events -------------------------------------------------------------------------------

    def apply(self, ev: EngineEvent) -> None:
        if ev["ev"] == "pin":
            self.servers.setdefault(ev["server"], ServerPins()).apply_pin(ev)
        elif ev["ev"] == "pin_seen":
            self.servers.setdefault(ev["server"], ServerPins()).apply_seen(ev)
        elif ev["ev"] == "unpin":
            self.servers.setdefault(ev["server"], ServerPins()).pins.pop(ev["tool"], None)
        elif ev["ev"] == "pin_window":
            self.servers.setdefault(ev["server"], ServerPins()).apply_window(ev)
        elif ev["ev"] == "taint":
            self.index(ev["scope"]).add(taint.decode_records(ev["data"]))
        elif ev["ev"] == "taint_evicted":
            self.index(ev["scope"]).import_evicted(ev["filter"])
        elif ev["ev"] == "attempt":
            self.session(ev["session"]).attempts[(ev["server"], ev["tool"])] += ev.get("n", 1)
        elif ev["ev"] == "blind":
            self.blind.add(ev["scope"])
        elif ev["ev"] == "vouch":
            self.session(ev["session"]).vouched.update(ev["keys"])
        elif ev["ev"] == "listed":
            listed = self.session(ev["session"]).listed
            for key in ev["keys"]:
                listed.setdefault(key, ev["source"])
        elif ev["ev"] == "session_ended":
            key = ev["session"]
            self.sessions.pop(key, None)
            self.notes.forget(key)
            self.approvals.end_session(key)
            for scope in [s for s in self.taint if _scope_session(s) == key]:
                self._drop_if_spent(scope)
        elif ev["ev"] == "taint_expired":
            index = self.taint.get(ev["scope"])
            if index is not None:
                index.expire_before(ev["before"])
                self._drop_if_spent(ev["scope"])
        else:
            self.approvals.apply(ev)

    def _emit(self, events: list[_E], ev: _E) -> None:
        self.apply(ev)
        events.append(ev)

    def snapshot(self, now: float = 0.0) -> list[Event]:
        out: list[Event] = []
        for key, sp in self.servers.items():
            for name, pin in sp.pins.items():
                out.append(pins.pin_snapshot(key, name, pin))
            for name, seen in sp.seen.items():
                out.append(seen_event(key, name, seen))
            out.extend(pins.window_snapshot(key, sp))
        for scope, index in self.taint.items():
            records = [taint.TokenRecord(tok, prov) for tok, prov in index.items()]
            for i in range(0, len(records), SNAPSHOT_TAINT_CHUNK):
                chunk = records[i : i + SNAPSHOT_TAINT_CHUNK]
                out.append(TaintEvent(ev="taint", scope=scope, data=taint.encode_records(chunk)))
            evicted = index.export_evicted()
            if evicted is not None:
                out.append(TaintEvictedEvent(ev="taint_evicted", scope=scope, filter=evicted))
        for sid, state in self.sessions.items():
            for (server, tool), n in state.attempts.items():
                out.append(AttemptEvent(ev="attempt", session=sid, server=server, tool=tool, n=n))
            if state.vouched:
                out.append(VouchEvent(ev="vouch", session=sid, keys=sorted(state.vouched)))
            by_source: dict[str, list[str]] = {}
            for key, source in state.listed.items():
                by_source.setdefault(source, []).append(key)
            for source, keys in by_source.items():
                out.append(ListedEvent(ev="listed", session=sid, source=source, keys=keys))
        out.extend(BlindEvent(ev="blind", scope=scope) for scope in sorted(self.blind))
        out.extend(self.approvals.snapshot(now))
        return out

    # ---- the life of a session ----------------------------------------------------------------

    def session_keys(self) -> set[str]:
        """Sessions with state that ends with them (budgets, vouched destinations, approvals)."""
        return set(self.sessions) | self.approvals.session_keys()

    def end_session(self, key: str) -> list[Event]:
        """The session's last shim left a grace period ago (the daemon's clock): drop what lasts a
        session. Its taint stays for `taint_retention` (`expire_taint`): a client that resumes under
        the same key (BOUNCER_SESSION), or `taint_scope: user`, still finds it."""
        events: list[Event] = []
        self._emit(events, SessionEndedEvent(ev="session_ended", session=key))
        return events

    def expire_taint(self, now: float, retention: float) -> list[Event]:
        """Forget taint first seen more than `retention` seconds before `now`, in every scope."""
        cutoff = now - retention
        events: list[Event] = []
        for scope in [s for s, index in self.taint.items() if index.oldest < cutoff]:
            self._emit(events, TaintExpiredEvent(ev="taint_expired", scope=scope, before=cutoff))
        return events

    def _drop_if_spent(self, scope: str) -> None:
        """A scope whose session ended and whose taint all expired is forgotten whole (its blind mark
        with it: the outputs it was about are past retention too)."""
        index = self.taint.get(scope)
        if index is None or len(index) or index.evicted or _scope_session(scope) in self.session_keys():
            return
        del self.taint[scope]
        self.blind.discard(scope)

    def session(self, key: str) -> SessionState:
        state = self.sessions.get(key)
        if state is None:
            state = self.sessions[key] = SessionState()
        return state

    def index(self, scope: str) -> taint.TaintIndex:
        idx = self.taint.get(scope)
        if idx is None:
            idx = self.taint[scope] = taint.TaintIndex()
        return idx

    def scope_key(self, session: str, server: str) -> str:
        """Which taint index a session+server reads and writes (policy `taint_scope`)."""
        scope = self.policy.settings.taint_scope
        if scope == "user":
            return USER_SCOPE
        if scope == "server":
            return f"{session}\x00{server}"
        return session

    # ---- rules --------------------------------------------------------------------------------

    def rule_for(self, server: ServerIdentity, tool: str, policy: Policy | None = None) -> ToolRule:
        pol = policy or self.policy
        sp = self.servers.get(server.key)
        listed = sp.live_tools.get(tool) if sp is not None else None
        digest = sp.live.get(tool, "") if sp is not None else ""
        key = (id(pol), server.key, tool, digest)
        rule = self._rules.get(key)
        if rule is None:
            rule = pol.rule_for(server.name, server.upstream, listed if listed is not None else tool)
            if len(self._rules) > 10_000:  # rules are cheap to recompute; the cache must not grow forever
                self._rules.clear()
            self._rules[key] = rule
        return rule

    # ---- pins ---------------------------------------------------------------------------------

    def tools_listed(
        self,
        server: ServerIdentity,
        tools: Iterable[Mapping[str, Any]],
        now: float,
        *,
        client: str | None = None,
        session: str = "",
        profile: str | None = None,
    ) -> tuple[PinReport, list[Event]]:
        """A server's tools/list: pin on first use, and journal every form its pin does not cover
        (`Seen`) so review does not depend on the server still being connected. `client` and
        `session` say who saw the list, `profile` what that client can do (`pins.capability_profile`)."""
        events: list[Event] = []
        self._identities[server.name] = server
        if self.restriction is not None and server.key not in self.servers:  # no trust on first use
            self._emit(events, PinWindowEvent(ev="pin_window", server=server.key, until=None))
        report, listed, live, live_tools = pins.listing(
            self.servers.get(server.key), server, tools, now, client, session, profile
        )
        for ev in listed:
            self._emit(events, ev)
        sp = self.servers[server.key]
        sp.live = live
        sp.live_tools = live_tools
        sp.listed = True
        return report, events

    def accept_pins(self, server_key: str, tools: Iterable[str] | None = None) -> list[PinEvent]:
        """A person's `bouncerctl pins accept` (`pins.accept`)."""
        events: list[PinEvent] = []
        for ev in pins.accept(self.servers.get(server_key), server_key, tools):
            self._emit(events, ev)
        return events

    def _check_pin(self, call: ToolCall) -> Verdict | None:
        return pins.check(self.servers.get(call.server.key), call)

    # ---- outputs ------------------------------------------------------------------------------

    def output_is_trusted(
        self, server: ServerIdentity, tool: str | None, policy: Policy | None = None
    ) -> bool:
        """`untrusted_output: false`: the user vouches for this tool's output (their own address book)."""
        return tool is not None and not self.rule_for(server, tool, policy).untrusted_output

    def record_taint(self, session: str, records: list[taint.TokenRecord], server: str = "") -> list[Event]:
        """Apply the taint of one output (records all share one source). Outputs of a tool the user
        vouched for (`untrusted_output: false`) add nothing."""
        if not records:
            return []
        prov = records[0].provenance
        server = server or prov.server
        identity = self._identities.get(server)
        if identity is not None and self.output_is_trusted(identity, prov.tool):
            return []
        events: list[Event] = []
        state = self.sessions.get(session)
        own = self._own_keys()
        if own:
            records = [r for r in records if r.token not in own]
        if identity is not None and prov.tool is not None and self.rule_for(identity, prov.tool).directory:
            # Listed: identity fields as the output has them (before a named source makes free text
            # ask-only: free text is never a directory entry).
            known = state.listed if state is not None else {}
            listed = sorted({r.token for r in records if r.provenance.identity and r.token not in known})
            if listed:
                source = f"{server}/{prov.tool}"
                self._emit(events, ListedEvent(ev="listed", session=session, source=source, keys=listed))
        note = self.notes.get(session, server, prov.request_id)
        if note is not None:
            records = callnotes.read_as_noted(records, note)
        if records:
            data = taint.encode_records(records)
            self._emit(events, TaintEvent(ev="taint", scope=self.scope_key(session, server), data=data))
        return events

    def record_blind(self, session: str, server: str) -> list[Event]:
        """An output of this scope could not be indexed: from now on nothing in it counts as clean
        (fetches that would be allowed are asked instead). Sends to unproven destinations ask anyway."""
        events: list[Event] = []
        scope = self.scope_key(session, server)
        if scope not in self.blind:
            self._emit(events, BlindEvent(ev="blind", scope=scope))
        return events

    def vouch(self, session: str, text: str) -> list[VouchEvent]:
        """Destinations in text the *user* typed (their prompt) are trusted for the session
        (docs/how-it-works.md, "Client hooks")."""
        keys = {k for word in argshapes.prompt_destinations(text) for k in canon.keys(word)}
        keys |= typed.typed_keys(text[: argshapes.MAX_PROMPT_CHARS])
        keys |= set(said.said_keys(text[: argshapes.MAX_PROMPT_CHARS]))  # short values, by position
        events: list[VouchEvent] = []
        if keys - self.session(session).vouched:
            self._emit(events, VouchEvent(ev="vouch", session=session, keys=sorted(keys)))
        return events

    # ---- the decision -------------------------------------------------------------------------

    def decide(self, call: ToolCall, now: float, policy: Policy | None = None) -> Verdict:
        events: list[Event] = []
        sp = self.servers.get(call.server.key)
        if sp is not None and sp.open_until is not None and call.kind == "tool":
            # The first tool call closes the first-use window: from now on new tools need a person.
            self._emit(events, PinWindowEvent(ev="pin_window", server=call.server.key, until=None))
        self._emit(
            events, AttemptEvent(ev="attempt", session=call.session, server=call.server.name, tool=call.tool)
        )
        if call.kind != "tool":
            message = self._decide_message(call, events, now)
            message = restricted.judge(self.restriction, message, sends=True)
            if call.kind == "resource":
                self._note_call(call, None, message)
            return dataclasses.replace(message, events=tuple(events))
        if call.answers:
            answers = dataclasses.replace(
                call, tool=f"{call.tool} input", arguments=call.answers, kind="answer"
            )
            answered = self._decide_message(answers, events, now)
            if answered.verdict != "allow":
                return dataclasses.replace(answered, events=tuple(events))
        verdict = self._check_pin(call)
        if verdict is None:
            rule = self.rule_for(call.server, call.tool, policy)
            names = [str(name) for name in call.arguments]
            for gate in GATES:  # read at each call: the fast path (fastpath.py) reads the same table
                if gate.concerns(rule, call.tool, names):
                    verdict = gate.check(self, call, rule, events, now)
                    if verdict is not None:
                        break
            if verdict is None:
                verdict = Verdict("allow", "default.allow", "no rule objected")
            if self.restriction is not None:
                # Changes only calls some gate concerns (a send, a program, a destination argument) or
                # allowed for want of taint, none of which the fast path forwards (fastpath.is_fast).
                verdict = restricted.judge(self.restriction, verdict, sends=self._sends(call, rule))
            self._note_call(call, rule, verdict)
        return Verdict(
            verdict.verdict,
            verdict.rule,
            verdict.reason,
            verdict.destination,
            verdict.parameter,
            verdict.provenance,
            tuple(events),
        )

    def _sends(self, call: ToolCall, rule: ToolRule) -> bool:
        """Whether a call can carry data somewhere: a gated tool, a program among its arguments, or a
        tool that does not only read with an argument that is an address, a URL or a host."""
        if rule.exfiltrating or argshapes.program_arguments(call.arguments):
            return True
        if not argshapes.carries_destinations(call.tool):
            return False
        found = [*sinkgate.destinations(call.arguments, ())[0], *sinkgate.assembled(call.arguments)]
        return any(canon.canonicalize(d.value.strip()).kind != "text" for d in found)

    def _own_keys(self) -> frozenset[str]:
        """The taint keys of the user's own destinations (`you:`): an output naming them plants nothing."""
        you = self.policy.settings.you
        if self._own is None or self._own[0] != you:
            keys = {
                p for d in you for p in canon.canonicalize(d).probes if canon.canonicalize(d).kind != "text"
            }
            self._own = (you, frozenset(keys))
        return self._own[1]

    def _note_call(self, call: ToolCall, rule: ToolRule | None, verdict: Verdict) -> None:
        """Remember what reading this call's output needs (`callnotes`): the destinations it sends to,
        the argument the user's prompt named, and, for a creating call whose destinations were all
        trusted, those destinations (its output's ids are bound to them)."""
        sent_to: set[str] = set()
        made_for: tuple[str, ...] = ()
        sends = rule is not None and rule.exfiltrating and rule.sink_kind == "send"
        if sends and rule is not None:
            guess = fallback.looks_like_destination
            dests = sinkgate.destinations(call.arguments, rule.sink_params, guess)[0]
            for d in dests:
                c = canon.canonicalize(d.value)
                if c.kind != "text":
                    sent_to.update(c.probes)
            parts = fallback.words(call.tool)
            if verdict.rule == "sink.trusted" and callnotes.creates_object(parts):
                made_for = tuple(d.value for d in dests)
        if call.kind == "tool" and not fallback_words.READ_VERBS.intersection(fallback.words(call.tool)[:1]):
            # A call that does not only read changes what it names: an object made for a trusted
            # destination is no longer known to go there (sending it uses it up too).
            self.notes.touched(call.session, call.server.name, call.arguments)
        named = None if sends else self._named_argument(call)  # a send's reply is no source the user chose
        if sent_to or named is not None or made_for:
            note = callnotes.CallNote(frozenset(sent_to), named, made_for, verdict.reason)
            self.notes.note(call.session, call.server.name, call.request_id, note)

    def read_made(self, session: str, server: str, request_id: object, payload: bytes) -> None:
        """The output of a call (the daemon passes every one): the ids a creating call for trusted
        destinations made are bound to them (`callnotes`)."""
        self.notes.made(session, server, request_id, payload)

    def _named_argument(self, call: ToolCall) -> str | None:
        """The argument of a call that reads what the user's prompt pointed to: a URL, an address or a
        host the prompt typed, or a file name it typed (`'bill-december-2023.txt'`). Plain words (a
        channel, a search term) do not make an output the user's chosen source."""
        state = self.sessions.get(call.session)
        if state is None or not state.vouched:
            return None
        for d in sinkgate.leaves(call.arguments):
            value = d.value.strip()
            if len(value) > callnotes.MAX_NAMED_ARGUMENT_CHARS or not callnotes.POINTS_AT_SOMETHING.search(
                value
            ):
                continue
            typed_as = typed.typed_key(value)
            if (typed_as is not None and typed_as in state.vouched) or any(
                k in state.vouched for k in canon.keys(value)
            ):
                return f"{call.tool} {d.parameter}={canon.visible(value)!r}"
        return None

    def _check_budget(self, call: ToolCall, rule: ToolRule) -> Verdict | None:
        if rule.max_calls is None:
            return None
        if rule.max_calls == 0:
            return Verdict(
                "deny", "budget.forbidden", f"tool {call.tool!r} is forbidden by policy (max_calls: 0)"
            )
        tried = self.session(call.session).attempts[(call.server.name, call.tool)]
        if tried > rule.max_calls:
            return Verdict(
                "deny",
                "budget.exceeded",
                f"tool {call.tool!r} may be called {rule.max_calls} time(s) per session; "
                f"this is attempt {tried}",
            )
        return None

    def _check_constraints(self, call: ToolCall, rule: ToolRule) -> Verdict | None:
        v = constraints.check_paths(rule, call.arguments, self.resolve) or constraints.check_patterns(
            rule, call.arguments
        )
        if v is None:
            return None
        return Verdict("deny", v.rule, v.reason, parameter=v.parameter)

    def trust(self, call: ToolCall, rule: ToolRule) -> sinkgate.Trust:
        """Everything that makes a destination trusted for this call: vouched, approved, allowlisted."""
        why = dict(self._session_trust(call).why)
        for d in rule.trusted_destinations:
            for k in canon.keys(d):
                why[k] = "allowlisted"
        for d in self.policy.settings.you:
            if not self.trust_denied(d):
                for k in canon.keys(d):
                    why.setdefault(k, "yours (you: in the policy)")
        domains = frozenset(canon.domain_key(d) for d in rule.trusted_domains)
        state = self.sessions.get(call.session)
        listed = state.listed if state is not None else {}
        return sinkgate.Trust(frozenset(why), domains, why, listed)

    def classify_destinations(
        self, call: ToolCall, policy: Policy | None = None
    ) -> list[sinkgate.Classified]:
        """Every destination of a call with its class (trusted, tainted, unproven, ...), for the question
        a person is asked and for what a session approval trusts. Changes nothing."""
        rule = self.rule_for(call.server, call.tool, policy)
        if not rule.exfiltrating:
            return []
        guess = fallback.looks_like_destination if rule.sink_kind == "send" else (lambda _name: False)
        dests, _ = sinkgate.destinations(call.arguments, rule.sink_params, guess)
        index = self.taint.get(self.scope_key(call.session, call.server.name)) or taint.TaintIndex()
        trust = self.trust(call, rule)
        return [sinkgate.classify(d, trust, index.lookup) for d in dests]

    def decide_builtin(self, session: str, tool_name: str, tool_input: Mapping[str, Any]) -> Verdict:
        """`builtin_tools.verdict` over the engine's state: the session's taint index (by the policy's
        taint scope), its vouched and approved destinations, and the policy's trust for
        `claude-code`'s tools."""
        server = ServerIdentity(builtin_tools.CLIENT_SERVER, ())
        rule = self.rule_for(server, tool_name)
        # The engine's own trust sources (vouched, approved, allowlisted), so the two paths cannot diverge.
        trust = self.trust(ToolCall(session, server, tool_name, tool_input), rule)
        scope = self.scope_key(session, server.name)
        verdict = self._builtin_verdict(tool_name, tool_input, scope, trust, rule)
        return restricted.judge(self.restriction, verdict, sends=False)

    def _builtin_verdict(
        self, tool_name: str, tool_input: Mapping[str, Any], scope: str, trust: sinkgate.Trust, rule: ToolRule
    ) -> Verdict:
        """`builtin_tools.verdict` over one taint scope: the client's Bash and WebFetch, and a program an
        MCP tool runs (`_check_programs`)."""
        index = self.index(scope)
        return builtin_tools.verdict(
            tool_name,
            tool_input,
            trust=trust,
            lookup=index.lookup,
            seen_exactly=index.seen_exactly,
            host_hit=index.host_hit,
            key_hit=index.key_hit,
            blind=scope in self.blind,
            on_tainted=rule.on_tainted,
            on_tainted_identity=self.policy.settings.on_tainted_identity,
        )

    def reads_taint(self, server: ServerIdentity, tool: str, arguments: Any, policy: Policy | None) -> bool:
        """Whether a verdict on this call looks up taint (the daemon then waits for earlier outputs to
        be indexed first): a gated tool's, one whose arguments the backstop reads for planted
        destinations (`carries_destinations`), or one with a program among its arguments."""
        if self.rule_for(server, tool, policy).exfiltrating or argshapes.carries_destinations(tool):
            return True
        return isinstance(arguments, Mapping) and bool(argshapes.program_arguments(arguments))

    def _check_programs(self, call: ToolCall, rule: ToolRule) -> Verdict | None:
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
        scope = self.scope_key(call.session, call.server.name)
        index = self.index(scope)
        trust = self.trust(call, rule)
        for name, text in programs:
            v = self._builtin_verdict(builtin_tools.BASH, {"command": text}, scope, trust, rule)
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

    def _check_carried(self, call: ToolCall, rule: ToolRule) -> Verdict | None:
        """The backstop for a tool nothing gates: an argument whose value *is* a destination seen in
        untrusted output (`to`, `owner`+`repo`, `uri`, `number`, `proxy_url`, ... on a tool whose
        sending the fallback could not read from its name or description) is asked about. A tool
        whose name only reads (`carries_destinations`) is not: looking up a planted sender is
        what a mail client does."""
        if rule.exfiltrating or not argshapes.carries_destinations(call.tool):
            return None
        index = self.index(self.scope_key(call.session, call.server.name))
        trust = self.trust(call, rule)
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

    def _check_sinks(self, call: ToolCall, rule: ToolRule, events: list[Event], now: float) -> Verdict | None:
        if not rule.exfiltrating:
            return None
        index = self.index(self.scope_key(call.session, call.server.name))
        trust = self.trust(call, rule)
        payload = None
        if rule.sink_kind == "fetch":
            payload = sinkgate.fetch_payload(
                call.arguments, rule.sink_params, fallback.looks_like_destination
            )
        if rule.sink_kind == "fetch" and payload is None:
            verdict = sinkgate.fetch_verdict(
                call.arguments,
                tool=call.tool,
                sink_params=rule.sink_params,
                trust=trust,
                seen_exactly=index.seen_exactly,
                host_hit=index.host_hit,
                key_hit=index.key_hit,
            )
            verdict = self._unless_blind(call, verdict, "fetches")
            return self._use_once_grant(call, verdict, events, now)
        # Sending an object made in this session for trusted destinations (a draft, by its id): the id
        # names no destination of its own, so it is judged without it; if nothing else names one, the
        # object's destinations are where the call sends (callnotes).
        made = self.notes.object_named(call.session, call.server.name, call.arguments)
        arguments = call.arguments
        if made is not None and payload is None:
            arguments = {
                k: v
                for k, v in call.arguments.items()
                if not (isinstance(v, str | int) and str(v) == made[0])
            }
        verdict = sinkgate.send_verdict(
            arguments,
            tool=call.tool,
            sink_params=rule.sink_params,
            trust=trust,
            lookup=index.lookup,
            on_tainted=rule.on_tainted,
            on_tainted_identity=self.policy.settings.on_tainted_identity,
            looks_like_destination=fallback.looks_like_destination,
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
        return self._use_once_grant(call, verdict, events, now)

    def _check_consequence(
        self, call: ToolCall, rule: ToolRule, events: list[Event], now: float
    ) -> Verdict | None:
        """The sink gate, then a consequential call it let through (or does not gate) is judged by where
        its argument values came from (`consequence.judge`)."""
        sink = self._check_sinks(call, rule, events, now)
        if sink is not None and (sink.verdict != "allow" or sink.rule == "approval.once"):
            return sink  # refused, or a person approved this exact call: one question is enough
        index = self.index(self.scope_key(call.session, call.server.name))
        programs = {name for name, _ in argshapes.program_arguments(call.arguments)}  # the shell reader's
        keyed = consequence.key_path_verdict(
            call.tool, {k: v for k, v in call.arguments.items() if k not in programs}
        )
        verdict = (keyed if argshapes.carries_destinations(call.tool) else None) or consequence.judge(
            call.tool,
            rule,
            call.arguments,
            trust=self.trust(call, rule),
            key_hit=index.key_hit,
            lookup=index.lookup,
            attempts=self.session(call.session).attempts[(call.server.name, call.tool)],
        )
        return sink if verdict is None else self._use_once_grant(call, verdict, events, now)

    def _decide_message(self, call: ToolCall, events: list[Event], now: float) -> Verdict:
        """A request other than tools/call that carries the agent's data to the server
        (docs/how-it-works.md, "Requests other than tools/call").

        A resource read or subscription names a URI the server will retrieve (through a resource
        template, a host of the agent's choosing): judged as a fetch. Prompt and completion arguments,
        and the params of any other request, are read for destinations: one seen in untrusted output
        is refused as a send to it would be; nothing else in them names where data goes."""
        label = MESSAGE_LABELS.get(call.kind, "request")
        index = self.index(self.scope_key(call.session, call.server.name))
        trust = self._session_trust(call)
        if call.kind == "resource":
            uri = call.arguments.get("uri")
            if not isinstance(uri, str) or not uri.strip():
                return Verdict("deny", "message.invalid_params", f"{label} {call.tool} names no URI to check")
            verdict = sinkgate.fetch_verdict(
                {"uri": uri},
                tool=call.tool,
                sink_params=("uri",),
                trust=trust,
                seen_exactly=index.seen_exactly,
                host_hit=lambda value: (
                    index.host_hit(value) if argshapes.names_a_network_host(value) else None
                ),
                key_hit=index.key_hit,
                what="reading",
            )
            verdict = self._unless_blind(call, verdict, "resource reads")
        else:
            verdict = sinkgate.send_verdict(
                call.arguments,
                tool=call.tool,
                sink_params=(),
                trust=trust,
                lookup=index.lookup,
                on_tainted="deny",
                on_tainted_identity=self.policy.settings.on_tainted_identity,
            )
            if verdict.verdict != "deny" and verdict.rule not in ("sink.tainted_identity", "sink.evicted"):
                verdict = Verdict(
                    "allow",
                    "message.no_tainted_destination",
                    "no destination in it appeared in untrusted output",
                    destination=verdict.destination,
                    parameter=verdict.parameter,
                )
        verdict = self._use_once_grant(call, verdict, events, now)
        return dataclasses.replace(verdict, reason=f"{label} {call.tool}: {verdict.reason}")

    def _unless_blind(self, call: ToolCall, verdict: Verdict, what: str) -> Verdict:
        """An allowed fetch becomes an ask once an output of the scope could not be indexed."""
        if verdict.verdict != "allow" or self.scope_key(call.session, call.server.name) not in self.blind:
            return verdict
        return Verdict(
            "ask",
            "fetch.blind",
            f"an earlier output of this session could not be checked for planted destinations, "
            f"so {what} need a person",
            destination=verdict.destination,
        )

    def _session_trust(self, call: ToolCall) -> sinkgate.Trust:
        """What trusts a destination of a request that no tool rule covers: vouched and approved ones,
        except those the managed policy's deny_trust names (`trust_denied`)."""
        vouched = (d for d in self.session(call.session).vouched if not self.trust_denied(typed.unmarked(d)))
        why: dict[str, str] = dict.fromkeys(vouched, "typed by you in this session")
        for d in self.approvals.trusted_for(call.session, call.server.name, call.tool):
            if self.trust_denied(d):
                continue  # granted before the managed policy named it: no longer trust
            for k in canon.keys(d, exact=True):
                why[k] = "approved for this session"
        return sinkgate.Trust(frozenset(why), frozenset(), why)

    def trust_denied(self, destination: str) -> bool:
        """Whether the managed policy's deny_trust forbids trusting `destination` at all: no vouch, no
        session or "always" approval may make it trusted (a person can still allow one call)."""
        return any(
            layer.deny_trust is not None and managed.trust_denied(layer.deny_trust, destination)
            for layer in self.policy.layers
        )

    def _use_once_grant(self, call: ToolCall, verdict: Verdict, events: list[Event], now: float) -> Verdict:
        """An ask for a call a person approved once (bouncerctl approve) becomes an allow, once: if the
        grant has not lapsed, answers the same question (the ask's rule) and the destination was not
        tainted after the person was asked. Otherwise the ask stands, with its own reason."""
        if verdict.verdict != "ask":
            return verdict
        digest = ap.arguments_digest(call.arguments)
        seen = verdict.provenance.ts if verdict.provenance is not None else None
        grant = self.approvals.once_grant(
            call.session, call.server.name, call.tool, digest, verdict.rule, seen, now
        )
        if grant is None:
            return verdict
        self._emit(
            events,
            GrantUsedEvent(
                ev="grant_used",
                session=call.session,
                server=call.server.name,
                tool=call.tool,
                digest=digest,
                asked=grant.asked,
            ),
        )
        return Verdict(
            "allow",
            "approval.once",
            "a person approved this exact call",
            destination=verdict.destination,
            parameter=verdict.parameter,
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
    check: Callable[[Engine, ToolCall, ToolRule, list[Event], float], Verdict | None]


# The order of the steps after the pin (docs/how-it-works.md, "The decision"): one row per gate.
GATES: Final[tuple[Gate, ...]] = (
    Gate(
        "budget",
        lambda rule, tool, names: rule.max_calls is not None,
        lambda engine, call, rule, events, now: (
            engine._check_budget(call, rule)
            or restricted.budget(engine.restriction, call.tool, rule.max_calls)
        ),
    ),
    Gate(
        "constraints",
        lambda rule, tool, names: bool(rule.allowed_path_prefixes or rule.arg_patterns),
        lambda engine, call, rule, events, now: engine._check_constraints(call, rule),
    ),
    Gate(
        # The sink gate, then what a consequential call's values came from, and a path into a key
        # directory named by any call that does not only read (`_check_consequence`).
        "sinks and consequences",
        lambda rule, tool, names: (
            rule.exfiltrating or consequence.of(rule) is not None or argshapes.carries_destinations(tool)
        ),
        lambda engine, call, rule, events, now: engine._check_consequence(call, rule, events, now),
    ),
    Gate(
        "programs",
        lambda rule, tool, names: not rule.exfiltrating and any(argshapes.names_a_program(n) for n in names),
        lambda engine, call, rule, events, now: engine._check_programs(call, rule),
    ),
    Gate(
        "carried",
        lambda rule, tool, names: not rule.exfiltrating and argshapes.carries_destinations(tool),
        lambda engine, call, rule, events, now: engine._check_carried(call, rule),
    ),
)


def _scope_session(scope: str) -> str | None:
    """The session a taint scope belongs to (None for the user scope)."""
    return None if scope == USER_SCOPE else scope.split("\x00", 1)[0]
