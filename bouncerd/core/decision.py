"""Every verdict the daemon gives, and every approval it grants, decided in one place.

Theory of operation
-------------------
The daemon's server carries requests in and replies out; what to answer is decided here, and only
here (as python-tuf's `TrustedMetadataSet` makes every trust decision and its `Updater` only
downloads). `Decider` wraps the `Engine` with what the engine alone does not decide:

- `decide_call` (op ``verdict``): a policy that cannot be loaded and arguments that are not an object
  are denied without deciding; everything else goes to `Engine.decide`. An ``ask`` then gets a
  one-time code (the one still open for the identical call, or a new one) and a requestState; a
  2026-07-28 retry carrying a requestState and the client's ElicitResult is checked and settled.
- `decide_answer` (op ``answer``): what a person said to an elicitation, for the code it names.
- `find_code` and `approve` (bouncerctl's ``approve_show`` and ``approve``): wrong codes are counted
  and rate limited; approving grants one retry of exactly the bound call.
- `expire`: codes past their lifetime are closed.

Each returns the result type of its outcome (`decision_types.py`): a `CallVerdict`, an
`AnswerVerdict`, a `Refusal`, a `CodeFound`, or a bare `Trail`; every one of them carries the
engine events it produced (already applied, for the server to journal in order) and the typed audit
records (`auditrecords.ApprovalRecord`) to write before the verdict's own line, in order. While a
decision runs, a `TrailBuilder` gathers these; the result is built from it once, at the end.
Nothing here reads a clock, draws randomness or touches a file: `now`, the random bytes, the daemon
secret and the text a person reads (`Phrasing`) are passed in.

An "always" answer needs one piece of I/O before it can stand: the destinations are added to the
user's policy.yaml and the policy reloaded. The decision then stops as a `PolicyEditDue` (from
`decide_answer`, or from `decide_call` settling a retry); the server makes the edit and hands its
outcome to `after_policy_edit`, which returns the `AnswerVerdict`. The protocol is written down in
docs/dev/approvals-protocol.md.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from bouncerd.core import approvals as ap
from bouncerd.core import canon
from bouncerd.core.decision_types import (
    ACTIONS,
    CHANNEL_CODE,
    CHANNEL_ELICITATION,
    CHANNEL_INPUT_REQUIRED,
    CHOICES,
    LASTS,
    AnswerContext,
    AnswerVerdict,
    Ask,
    CallVerdict,
    CodeFound,
    Phrasing,
    PolicyEdit,
    PolicyEditDue,
    RandomBytes,
    Refusal,
    Scope,
    Trail,
    TrailBuilder,
    approval_record,
    from_elicit_result,
    scope_of,
)
from bouncerd.core.engine import Engine
from bouncerd.core.events import EngineEvent
from bouncerd.core.model import ToolCall, Verdict
from bouncerd.core.policy import Policy


class Decider:
    def __init__(self, engine: Engine, phrasing: Phrasing) -> None:
        self.engine = engine
        self.phrasing = phrasing
        self.secret = b""  # the requestState key, set when the daemon has read it
        self.code_ttl = ap.CODE_TTL_SECONDS
        self.closed: OrderedDict[str, str] = OrderedDict()  # code -> why it is no longer open

    @property
    def approvals(self) -> ap.Approvals:
        return self.engine.approvals

    # ---- helpers -------------------------------------------------------------------------------

    def _commit(self, out: TrailBuilder, events: Sequence[EngineEvent]) -> None:
        for ev in events:
            self.engine.apply(ev)
        out.events.extend(events)

    def _close(self, out: TrailBuilder, code: str, why: str) -> None:
        if code in self.approvals.pending:
            self._commit(out, [ap.closed_event(code, why)])
        self.closed[code] = why
        self.closed.move_to_end(code)
        while len(self.closed) > ap.MAX_PENDING:
            self.closed.popitem(last=False)

    def _expire(self, out: TrailBuilder, now: float) -> None:
        self.approvals.prune(now)
        for p in [p for p in self.approvals.pending.values() if p.expires <= now]:
            self._close(out, p.code, "expired")
            out.records.append(
                approval_record(
                    "approval.expired",
                    p.binding,
                    f"code {p.code} expired unanswered; its call stays denied",
                    channel=CHANNEL_CODE,
                    code=p.code,
                )
            )

    def expire(self, now: float) -> Trail:
        """Close every code past its lifetime (each with an ``approval.expired`` record)."""
        out = TrailBuilder()
        self._expire(out, now)
        return out.trail()

    # ---- op verdict ----------------------------------------------------------------------------

    def decide_call(
        self,
        call: ToolCall,
        now: float,
        policy: Policy,
        random_bytes: RandomBytes,
        *,
        policy_error: str | None = None,
        invalid: str | None = None,
        request_state: str | None = None,
        input_response: Mapping[str, Any] | None = None,
    ) -> CallVerdict | PolicyEditDue:
        """The verdict on one call. `policy_error`: the shim's policy cannot be loaded (then `policy` is
        the user's base policy). `invalid`: why the shim could not read the arguments as an object.
        A retry whose answer is "always" stops as a `PolicyEditDue`."""
        if policy_error is not None:  # the shim's --policy went bad after it started: refuse, never guess
            verdict = Verdict(
                "deny", "policy.unreadable", f"this server's policy cannot be loaded: {policy_error}"
            )
        elif invalid:
            verdict = Verdict("deny", "call.invalid_arguments", str(invalid))
        else:
            verdict = self.engine.decide(call, now, policy)
        out = TrailBuilder(verdict.events)
        self._expire(out, now)
        if request_state is not None or input_response is not None:
            settled = self._retry(out, call, verdict, policy, request_state, input_response, now)
            if settled is not None:
                return settled  # else the question changed since it was asked: a new ask, with the new reason
        if verdict.verdict != "ask":
            return out.call(verdict)
        timeout = policy.settings.approval_timeout
        binding = self._binding(call, verdict)
        pending = self._open_code(out, call, verdict, policy, binding, timeout, now, random_bytes)
        if pending is None:  # full (see ap.MAX_PENDING): no code that would not exist
            return out.call(
                Verdict(
                    "deny",
                    "approval.full",
                    f"{verdict.reason.rstrip('.')}. It was not asked: {ap.MAX_PENDING} questions are already "
                    "open (bouncerctl pending lists them); answer them or let them expire, then retry",
                    destination=verdict.destination,
                    parameter=verdict.parameter,
                    provenance=verdict.provenance,
                )
            )
        nonce = f"{pending.code}:{random_bytes(8).hex()}"
        ask = Ask(pending, timeout, binding, ap.mint_state(self.secret, binding, nonce, now))
        reason = f"{verdict.reason.rstrip('.')}. {self.phrasing.code_hint(pending.code, pending.expires)}"
        return out.call(dataclasses.replace(verdict, reason=reason), ask)

    @staticmethod
    def _binding(call: ToolCall, verdict: Verdict) -> ap.Binding:
        digest = ap.arguments_digest(call.arguments)
        return ap.Binding(
            call.session, call.server.name, call.tool, verdict.parameter, verdict.destination, digest
        )

    def _open_code(
        self,
        out: TrailBuilder,
        call: ToolCall,
        verdict: Verdict,
        policy: Policy,
        binding: ap.Binding,
        timeout: int,
        now: float,
        random_bytes: RandomBytes,
    ) -> ap.Pending | None:
        """The open code of this call (an unanswered retry), a new one, or None when `ap.MAX_PENDING`
        codes are open: a flood of questions keeps the earlier ones, and mints no code that would not
        be kept."""
        same = (binding.session, binding.server, binding.tool, binding.digest)
        for p in self.approvals.pending.values():
            b = p.binding
            if (b.session, b.server, b.tool, b.digest) == same and p.expires > now:
                return p  # the agent retried an unanswered call: one code, one notification
        if len(self.approvals.pending) >= ap.MAX_PENDING:
            return None
        classified = self.engine.classify_destinations(call, policy)
        question, summary, trustable = self.phrasing.question(call, verdict, classified)
        trustable = self._trustable(trustable)
        code = ap.make_code(random_bytes(4))
        while code in self.approvals.pending or code in self.closed:
            code = ap.make_code(random_bytes(4))
        lifetime = max(self.code_ttl, float(timeout))
        pending = ap.Pending(
            code, binding, now, now + lifetime, verdict.reason, summary, question, trustable, verdict.rule
        )
        self._commit(out, [ap.pending_event(pending)])
        out.opened = pending
        return pending

    def _retry(
        self,
        out: TrailBuilder,
        call: ToolCall,
        verdict: Verdict,
        policy: Policy,
        state: str | None,
        response: Mapping[str, Any] | None,
        now: float,
    ) -> CallVerdict | PolicyEditDue | None:
        """Settle a 2026-07-28 retry, or find that its question no longer holds (None: the call is to
        be asked about again, as `verdict` says now)."""
        expected = self._binding(call, verdict)
        check: ap.StateCheck
        if state is None:
            check = ap.StateRefused("an answer came without its requestState")
        else:
            check = ap.check_state(self.secret, state, expected, self.approvals.used_nonces, now)
        if isinstance(check, ap.StateRefused):
            out.records.append(
                approval_record(
                    "approval.bad_state",
                    expected,
                    f"a retry's requestState was refused: {check.reason}",
                    channel=CHANNEL_INPUT_REQUIRED,
                    request_id=call.request_id,
                )
            )
            return out.call(
                Verdict(
                    "deny",
                    "approval.bad_state",
                    f"the approval carried by this retry was refused ({check.reason}); nothing was approved",
                    verdict.destination,
                    verdict.parameter,
                )
            )
        self._commit(out, [ap.nonce_used_event(check.nonce, check.expires)])
        code = check.nonce.split(":", 1)[0]
        if verdict.verdict != "ask":
            self._close(out, code, "settled")
            return out.call(verdict)  # a deny stands whatever a person said; an allow needs no approval
        pending = self.approvals.pending.get(code)
        asked = pending.created if pending is not None else check.expires - ap.STATE_TTL_SECONDS
        seen = verdict.provenance.ts if verdict.provenance is not None else None
        if (pending is not None and pending.rule and pending.rule != verdict.rule) or (
            seen is not None and seen >= asked
        ):
            self._close(out, code, "superseded")
            out.records.append(
                approval_record(
                    "approval.stale",
                    check.binding,
                    f"the answer to code {code} came for a question that no longer holds: {verdict.reason}; "
                    f"asked again",
                    channel=CHANNEL_INPUT_REQUIRED,
                    code=code,
                    request_id=call.request_id,
                )
            )
            return None
        if pending is not None:
            trustable = pending.destinations
        else:
            classified = self.engine.classify_destinations(call, policy)
            trustable = self._trustable(self.phrasing.question(call, verdict, classified)[2])
        action, choice = from_elicit_result(response)
        context = AnswerContext(CHANNEL_INPUT_REQUIRED, code, call.request_id, action)
        settled = self._settle_answer(out, check.binding, trustable, choice, context, now)
        if isinstance(settled, PolicyEdit):
            return out.edit_due(settled)
        return out.call(settled)

    # ---- answers -------------------------------------------------------------------------------

    def decide_answer(
        self,
        session: str,
        server: str,
        typed_code: str,
        action: Any,
        choice: Any,
        request_id: Any,
        now: float,
    ) -> AnswerVerdict | PolicyEditDue | Refusal:
        """Op ``answer``: what a person said to an elicitation, from the shim of `session`/`server`."""
        out = TrailBuilder()
        self._expire(out, now)
        if action not in ACTIONS or (choice is not None and choice not in CHOICES):
            return out.refuse(
                "bad_answer", f"action must be one of {ACTIONS} and choice one of {CHOICES} or nil"
            )
        code = ap.normalise_code(typed_code) or ""
        pending = self.approvals.pending.get(code)
        if pending is not None and (pending.binding.session, pending.binding.server) != (session, server):
            out.records.append(
                approval_record(
                    "approval.refused",
                    pending.binding,
                    f"a shim of session {session!r}, server {server!r} answered for this code",
                    channel=CHANNEL_ELICITATION,
                    code=code,
                )
            )
            return out.refuse("not_yours", "this code belongs to another session or server")
        if pending is None:
            why = self.closed.get(code, "unknown")
            closed = Verdict(
                "deny",
                "approval.closed",
                f"this question is no longer open ({why}); nothing was approved. "
                f"Retry the call to be asked again",
            )
            return out.answer(closed, code, None)
        binding = pending.binding
        stale = self._tainted_since_asked(pending) if action == "accept" else None
        if stale is not None:
            self._close(out, code, "superseded")
            out.records.append(
                approval_record(
                    "approval.stale",
                    binding,
                    f"a person said yes to code {code}, but {stale}; the call was decided again and denied",
                    channel=CHANNEL_ELICITATION,
                    code=code,
                    request_id=request_id,
                )
            )
            denied = Verdict(
                "deny",
                "approval.stale",
                f"{stale}, after the person was asked, so their yes does not cover this call; "
                f"retry it to be decided again",
                binding.destination,
                binding.parameter,
            )
            return out.answer(denied, code, binding)
        context = AnswerContext(CHANNEL_ELICITATION, code, request_id, action)
        settled = self._settle_answer(out, binding, pending.destinations, choice, context, now)
        if isinstance(settled, PolicyEdit):
            return out.edit_due(settled)
        return out.answer(settled, code, binding)

    def _tainted_since_asked(self, pending: ap.Pending) -> str | None:
        """Why the question of `pending` no longer holds (a destination it names turned up in untrusted
        output after it was asked), or None. Without the call's arguments (an elicitation answer
        names only its code) the destinations of the question are what is looked up again."""
        b = pending.binding
        index = self.engine.taint.get(self.engine.scope_key(b.session, b.server))
        if index is None:
            return None
        for dest in dict.fromkeys(d for d in (b.destination, *pending.destinations) if d):
            hit = index.lookup(dest)
            if hit is None:
                continue
            if hit.provenance is not None and hit.provenance.ts >= pending.created:
                where = f"{hit.provenance.server}/{hit.provenance.tool or '?'}"
                return f"{canon.visible(dest)} appeared in output of {where}"
            if hit.provenance is None and pending.rule and not pending.rule.endswith(".evicted"):
                return f"{canon.visible(dest)} appeared in untrusted output"  # seen, then forgotten
        return None

    def _trustable(self, destinations: Sequence[str]) -> tuple[str, ...]:
        """The destinations an approval may trust beyond this call: never one the managed deny_trust
        names (the person is offered "once" only, and a "session" answer trusts nothing)."""
        return tuple(d for d in destinations if not self.engine.trust_denied(d))

    def _settle_answer(
        self,
        out: TrailBuilder,
        binding: ap.Binding,
        trustable: Sequence[str],
        choice: str | None,
        context: AnswerContext,
        now: float,
    ) -> Verdict | PolicyEdit:
        """accept + once allows this very call; session also trusts the call's untrusted destinations for
        the session; always also adds them to policy.yaml (the `PolicyEdit` to make first); decline
        closes the code; cancel and timeout deny but leave the code open for bouncerctl."""
        action, code = context.action, context.code
        pending = self.approvals.pending.get(code)
        if action == "accept" and choice is not None and choice in LASTS:
            scope: Scope = scope_of(choice) if trustable else "once"
            if scope == "always":
                return PolicyEdit(binding, tuple(trustable), context)
            return self._grant(out, binding, trustable, scope, choice, context, now)
        if action in ("cancel", "timeout"):
            rule = "approval.timeout" if action == "timeout" else "approval.declined"
            said = "nobody answered in time" if action == "timeout" else "the question was dismissed"
            still = f"; code {code} stays open" if pending is not None else ""
            hint = f" {self.phrasing.code_hint(code, pending.expires)}" if pending is not None else ""
            out.records.append(approval_record(rule, binding, said + still, **context.how()))
            return Verdict(
                "deny", rule, f"{said}, so this call is denied.{hint}", binding.destination, binding.parameter
            )
        self._close(out, code, "declined")
        if action == "decline":
            said = "a person declined the question"
        elif choice == "deny":
            said = "a person chose Deny"
        else:  # accept without a choice the form offered: nobody allowed anything
            said = f"an answer with no choice the form offered (action {action!r}, choice {choice!r})"
        reason = f"{said}, so the call is not allowed"
        out.records.append(approval_record("approval.declined", binding, reason, **context.how()))
        return Verdict(
            "deny", "approval.declined", "a person declined this call; do not retry it", binding.destination
        )

    def after_policy_edit(self, edit: PolicyEdit, error: str | None, now: float) -> AnswerVerdict:
        """Finish an "always" answer once policy.yaml was edited and reloaded (`error` None) or not."""
        out = TrailBuilder()
        binding, code = edit.binding, edit.context.code
        if error is None:
            granted = self._grant(out, binding, edit.destinations, "always", "always", edit.context, now)
            return out.answer(granted, code, binding)
        out.records.append(approval_record("approval.always_failed", binding, error, **edit.context.how()))
        pending = self.approvals.pending.get(code)
        hint = f" {self.phrasing.code_hint(code, pending.expires)}" if pending is not None else ""
        failed = Verdict(
            "deny",
            "approval.always_failed",
            f"a person chose to always allow this, but the policy could not be updated "
            f"({error}); nothing was approved.{hint}",
            binding.destination,
            binding.parameter,
        )
        return out.answer(failed, code, binding)

    def _grant(
        self,
        out: TrailBuilder,
        binding: ap.Binding,
        trustable: Sequence[str],
        scope: Scope,
        choice: str,
        context: AnswerContext,
        now: float,
    ) -> Verdict:
        self._close(out, context.code, "approved")
        if scope != "once":
            self._commit(
                out, [ap.grant_event(scope, dataclasses.replace(binding, destination=d)) for d in trustable]
            )
        lasts = LASTS[scope] if scope == choice else "this call (it names nothing that can be trusted longer)"
        out.records.append(
            approval_record(
                "approval.granted",
                binding,
                f"a person allowed this call; lasts: {lasts}",
                scope=scope,
                lasts=lasts,
                destinations=list(trustable) if scope != "once" else None,
                **context.how(),
            )
        )
        return Verdict(
            "allow",
            "approval.elicited",
            f"a person allowed this call ({lasts})",
            binding.destination,
            binding.parameter,
        )

    # ---- bouncerctl ----------------------------------------------------------------------------

    def find_code(self, typed: str, now: float) -> CodeFound | Refusal:
        """The open code a ctl op names, or the refusal (wrong codes counted and audited)."""
        out = TrailBuilder()
        self._expire(out, now)
        if self.approvals.rate_limited(now):
            out.records.append(
                approval_record(
                    "approval.refused",
                    None,
                    f"too many wrong codes in {ap.WRONG_CODE_WINDOW_SECONDS:g}s; refused an approve op",
                    channel=CHANNEL_CODE,
                )
            )
            return out.refuse(
                "rate_limited",
                f"too many wrong codes in the last {ap.WRONG_CODE_WINDOW_SECONDS:g} seconds; "
                f"nothing is approved until that passes",
            )
        code = ap.normalise_code(typed)
        pending = self.approvals.pending.get(code) if code else None
        if pending is not None:
            return out.found(pending)
        why = self.closed.get(code or "", "unknown")
        self._commit(out, [ap.wrong_code_event(now)])
        shown = code or canon.visible(typed[:20])
        out.records.append(
            approval_record(
                "approval.wrong_code", None, f"code {shown!r} is not open ({why})", channel=CHANNEL_CODE
            )
        )
        message = {
            "expired": f"code {shown} has expired; retry the call to get a new one",
            "approved": f"code {shown} was already used",
            "declined": f"code {shown} was declined",
            "settled": f"code {shown} was already settled",
        }.get(why, f"no open code {shown}")
        return out.refuse("unknown_code" if why == "unknown" else why, message)

    def approve(self, found: ap.Pending, now: float) -> Trail:
        """`bouncerctl approve`: one retry of exactly the bound call (the engine's ``approval.once``)."""
        out = TrailBuilder()
        grant = ap.once_grant_event(found.binding, found.created, found.rule, now + ap.ONCE_GRANT_TTL_SECONDS)
        self._commit(out, [grant])
        self._close(out, found.code, "approved")
        out.records.append(
            approval_record(
                "approval.granted",
                found.binding,
                f"a person approved code {found.code} in a terminal; lasts: one retry of this exact call",
                channel=CHANNEL_CODE,
                code=found.code,
                scope="once",
                lasts="one retry of this exact call",
            )
        )
        return out.trail()
