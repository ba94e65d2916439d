"""The engine: the decisions over the journaled store (`store.py`).

Theory of operation
-------------------
The store holds all state the daemon keeps and changes it only by events (`store.py`); the engine
adds the policy and the decisions: each method that records something (a tool list, an output's
taint, a prompt's destinations) or decides (a call, a message, a client's own tool) returns the
events it produced after applying them, for the daemon to journal before it answers.

The decision for one tools/call (docs/how-it-works.md, "The decision") runs in a fixed order and
names the rule that fired: pin → budget → argument constraints → sink gate → allow. The engine never
reads a clock, the environment or a file: `now` is passed in, policy is a value, and the one piece of
I/O the path check needs (resolving symlinks) is a function the daemon injects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bouncerd.core import approvals as ap
from bouncerd.core import (
    argshapes,
    builtin_tools,
    callnotes,
    canon,
    consequence,
    described,
    fallback,
    fallback_words,
    gates,
    managed,
    names,
    onetimecode,
    pins,
    restricted,
    roles,
    said,
    sinkgate,
    taint,
    typed,
)
from bouncerd.core.events import (
    AttemptEvent,
    BlindEvent,
    GrantUsedEvent,
    ListedEvent,
    PinEvent,
    PinWindowEvent,
    TaintEvent,
    VouchEvent,
)
from bouncerd.core.model import JsonRpcId, ServerIdentity, ToolCall, Verdict
from bouncerd.core.pins import PinReport
from bouncerd.core.policy import Policy, merge
from bouncerd.core.rules import ToolRule
from bouncerd.core.store import USER_SCOPE, Event, Store

Resolve = Callable[[str], str]


def _lexical_only(path: str) -> str:
    return path


class Engine(Store):
    """The store (`store.py`) with the policy over it, and the decisions it makes."""

    def __init__(self, policy: Policy | None = None, resolve: Resolve = _lexical_only) -> None:
        super().__init__()
        self.policy = policy if policy is not None else merge([])
        self.resolve = resolve
        self._identities: dict[str, ServerIdentity] = {}  # server name -> latest identity seen
        self._rules: dict[tuple[int, str, str, str], ToolRule] = {}
        self._own: tuple[tuple[str, ...], frozenset[str]] | None = None  # `you:` and its taint keys
        # session -> (vouched size, (authors, titles)) its prompts described (`described`)
        self._authors: dict[str, tuple[int, tuple[frozenset[str], frozenset[str]]]] = {}
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

    def record_taint(
        self, session: str, records: list[taint.TokenRecord], server: str = "", payload: bytes | None = None
    ) -> list[Event]:
        """Apply the taint of one output (records all share one source). Outputs of a tool the user
        vouched for (`untrusted_output: false`) add nothing. With the raw output (`payload`), a message
        in it whose author the prompt described is read as a source the user named (`described`)."""
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
        if payload is not None and state is not None:  # "reply on ticket 42 to its reporter" (`roles`)
            found = roles.role_listed(records, payload, roles.described_roles(state.vouched))
            for key, source in sorted(roles.unsettled(found, state.listed).items()):
                self._emit(events, ListedEvent(ev="listed", session=session, source=source, keys=[key]))
        note = self.notes.get(session, server, prov.request_id)
        if note is not None:
            records = callnotes.read_as_noted(records, note)
        if payload is not None and state is not None:
            records = described.read_as_described(records, payload, self.authors(session))
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
        keys |= described.described_keys(text[: argshapes.MAX_PROMPT_CHARS])  # "the message from Bob"
        keys |= described.titled_keys(text[: argshapes.MAX_PROMPT_CHARS])  # "the file called 'Q3 plan'"
        keys |= roles.role_keys(text[: argshapes.MAX_PROMPT_CHARS])  # "ticket 42's reporter"
        events: list[VouchEvent] = []
        if keys - self.session(session).vouched:
            self._emit(events, VouchEvent(ev="vouch", session=session, keys=sorted(keys)))
        return events

    # ---- the decision -------------------------------------------------------------------------

    def decide(self, call: ToolCall, now: float, policy: Policy | None = None) -> Verdict:
        events: list[Event] = []
        grants = _SpendsInto(self, events)
        sp = self.servers.get(call.server.key)
        if sp is not None and sp.open_until is not None and call.kind == "tool":
            # The first tool call closes the first-use window: from now on new tools need a person.
            self._emit(events, PinWindowEvent(ev="pin_window", server=call.server.key, until=None))
        self._emit(
            events, AttemptEvent(ev="attempt", session=call.session, server=call.server.name, tool=call.tool)
        )
        self.names.decided(call.session)  # a restart loses this count, not the journalled one
        if call.kind != "tool":
            message = gates.decide_message(self, call, grants, now)
            message = restricted.judge(self.restriction, message, sends=True)
            if call.kind == "resource":
                self._note_call(call, None, message)
            return dataclasses.replace(message, events=tuple(events))
        if call.answers:
            answers = dataclasses.replace(
                call, tool=f"{call.tool} input", arguments=call.answers, kind="answer"
            )
            answered = gates.decide_message(self, answers, grants, now)
            if answered.verdict != "allow":
                return dataclasses.replace(answered, events=tuple(events))
        verdict = self._check_pin(call)
        if verdict is None:
            rule = self.rule_for(call.server, call.tool, policy)
            names = [str(name) for name in call.arguments]
            for gate in gates.GATES:  # read at each call: the fast path (fastpath.py) reads the same table
                if gate.concerns(rule, call.tool, names):
                    verdict = gate.check(self, call, rule, grants, now)
                    if verdict is not None:
                        break
            if verdict is None:
                verdict = Verdict("allow", "default.allow", "no rule objected")
            if self.restriction is not None:
                # Changes only calls some gate concerns (a send, a program, a destination argument) or
                # allowed for want of taint, none of which the fast path forwards (fastpath.is_fast).
                verdict = restricted.judge(self.restriction, verdict, sends=self._sends(call, rule))
            # Every ask, whichever gate (or the restriction) gave it, meets the person's one-time yes to
            # this exact call: a gate that spent it already returned an allow, so this spends nothing
            # twice, and an ask no grant covers stands.
            verdict = grants.use_once(call, verdict, now)
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
        if call.kind == "tool":
            self.names.called(call.session, call.server.name, call.request_id, call.arguments)
        if call.kind == "tool" and not fallback_words.READ_VERBS.intersection(fallback.words(call.tool)[:1]):
            # A call that does not only read changes what it names: an object made for a trusted
            # destination is no longer known to go there (sending it uses it up too).
            self.notes.touched(call.session, call.server.name, call.arguments)
        if verdict.verdict == "allow" and rule is not None and call.kind == "tool":
            self._note_act(call, rule)
        named = None if sends else self._named_argument(call)  # a send's reply is no source the user chose
        if sent_to or named is not None or made_for:
            note = callnotes.CallNote(frozenset(sent_to), named, made_for, verdict.reason)
            self.notes.note(call.session, call.server.name, call.request_id, note)

    def _note_act(self, call: ToolCall, rule: ToolRule) -> None:
        """A confirming call let through uses up the act it confirmed; a consequential call or a send
        let through is an act a one-time code may confirm next (`onetimecode`)."""
        if onetimecode.confirms(call.tool) and onetimecode.code_parameters(call.arguments):
            self.codes.confirmed(call.session, call.server.name)
        elif consequence.of(rule) is not None or (rule.exfiltrating and rule.sink_kind != "fetch"):
            act = onetimecode.Act(call.tool, consequence.of(rule) or "send")
            self.codes.made(call.session, call.server.name, act)

    def read_made(
        self,
        session: str,
        server: str,
        request_id: JsonRpcId,
        payload: bytes,
        tool: str | None = None,
        ts: float = 0.0,
    ) -> None:
        """The output of a call (the daemon passes every one): the ids a creating call for trusted
        destinations made are bound to them (`callnotes`), and the plain names it shows are recorded
        (`names`), unless the user vouched for the tool's output."""
        self.notes.made(session, server, request_id, payload)
        identity = self._identities.get(server)
        if identity is not None and self.output_is_trusted(identity, tool):
            return
        note = self.notes.get(session, server, request_id)
        named = note.named if note is not None else None
        output = names.Output(server, tool, request_id, ts, named, self.authors(session))
        scope = self.scope_key(session, server)
        # Calls made before a restart (journalled) whose outputs this record never read: of every
        # session for the user scope, else of this one.
        covered = self.sessions if scope == USER_SCOPE else {session: self.sessions.get(session)}
        behind = not self.names.has(scope) and any(
            state is not None and sum(state.attempts.values()) > self.names.decided_in(sid)
            for sid, state in covered.items()
        )
        self.names.read(scope, session, output, payload, behind)

    def authors(self, session: str) -> frozenset[str]:
        """The authors of the messages this session's prompts described ("the message from Bob")."""
        return self._described(session)[0]

    def titles(self, session: str) -> frozenset[str]:
        """The titles of the documents this session's prompts described ("the file called 'Q3 plan'")."""
        return self._described(session)[1]

    def _described(self, session: str) -> tuple[frozenset[str], frozenset[str]]:
        state = self.sessions.get(session)
        if state is None or not state.vouched:
            return frozenset(), frozenset()
        cached = self._authors.get(session)
        if cached is None or cached[0] != len(state.vouched):
            if len(self._authors) >= described.MAX_CACHED_SESSIONS:
                self._authors.clear()  # a cache: recomputed from the vouched keys on the next output
            found = (described.authors(state.vouched), described.titles(state.vouched))
            cached = self._authors[session] = (len(state.vouched), found)
        return cached[1]

    def _named_argument(self, call: ToolCall) -> str | None:
        """The argument of a call that reads what the user's prompt pointed to: a URL, an address or a
        host the prompt typed, or a file name it typed (`'bill-december-2023.txt'`). Plain words (a
        channel, a search term) do not make an output the user's chosen source."""
        state = self.sessions.get(call.session)
        if state is None or not state.vouched:
            return None
        titles = self.titles(call.session)
        if titles and described.SEARCH_VERBS.intersection(fallback.words(call.tool)[:1]):
            titles = frozenset()  # a search by the title returns whatever matches it, not the document
        for d in sinkgate.leaves(call.arguments):
            value = d.value.strip()
            if titles and described.is_titled(value, titles):
                return f"{call.tool} {d.parameter}={canon.visible(value)!r}"
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

    def attempts_of(self, call: ToolCall) -> int:
        """How many times this session has tried this tool, this call included."""
        return self.session(call.session).attempts[(call.server.name, call.tool)]

    def trust(self, call: ToolCall, rule: ToolRule) -> sinkgate.Trust:
        """Everything that makes a destination trusted for this call: vouched, approved, allowlisted."""
        why = dict(self.session_trust(call).why)
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
        verdict = self.builtin_verdict(tool_name, tool_input, scope, trust, rule)
        return restricted.judge(self.restriction, verdict, sends=False)

    def builtin_verdict(
        self, tool_name: str, tool_input: Mapping[str, Any], scope: str, trust: sinkgate.Trust, rule: ToolRule
    ) -> Verdict:
        """`builtin_tools.verdict` over one taint scope: the client's Bash and WebFetch, and a program an
        MCP tool runs (`gates.check_programs`)."""
        return builtin_tools.verdict(
            tool_name,
            tool_input,
            trust=trust,
            taint=self.index(scope),
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

    def session_trust(self, call: ToolCall) -> sinkgate.Trust:
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
class _SpendsInto:
    """`gates.OnceGrants` for one decision: a grant spent is applied and added to its events."""

    engine: Engine
    events: list[Event]

    def use_once(self, call: ToolCall, verdict: Verdict, now: float) -> Verdict:
        return self.engine._use_once_grant(call, verdict, self.events, now)
