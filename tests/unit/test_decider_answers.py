"""A person's answer to a question decides exactly what they said, and nothing after it is settled.

docs/how-it-works.md, "Asking a person": a yes (once, session, always) allows the call it was
asked about; a no (decline, or the "deny" choice) denies it and closes the code; dismissing the
question or letting it time out denies the call but leaves the code open for `bouncerctl approve`;
an answer to a code that is closed approves nothing; an "always" whose policy edit failed approves
nothing. Each refusal is checked beside its twin, the answer that does allow. The core is driven as
the daemon drives it (`Decider.decide_call`, `decide_answer`, `after_policy_edit`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bouncerd.core.decision import Decider
from bouncerd.core.decision_types import CallVerdict, PolicyEditDue
from bouncerd.core.engine import Engine
from bouncerd.core.model import ServerIdentity, ToolCall, Verdict
from bouncerd.core.policy import load_policy, merge
from bouncerd.core.sinkgate import Classified

MAIL = ServerIdentity("mail", ("mail-server",))
S = "session-1"
BOB = "bob@partner.example"
POLICY = "tools:\n  send_email:\n    exfiltrating: true\n    sink_params: [to]\n"


class Words:
    def question(
        self, call: ToolCall, verdict: Verdict, classified: Sequence[Classified]
    ) -> tuple[str, str, tuple[str, ...]]:
        return f"send to {verdict.destination}?", "", tuple(c.dest.value for c in classified)

    def code_hint(self, code: str, expires: float) -> str:
        return f"code {code}"


_drawn = iter(range(1, 2**31))


def _random(n: int) -> bytes:
    return next(_drawn).to_bytes(4, "big") * (n // 4 + 1)


def _asking() -> tuple[Decider, CallVerdict]:
    """A decider that has just asked about a send to an unproven address, and its ask."""
    engine = Engine(merge([load_policy(POLICY, "policy.yaml")]))
    engine.tools_listed(MAIL, [{"name": "send_email"}], now=0.0)
    decider = Decider(engine, Words())
    decider.secret = b"k" * 32
    call = ToolCall(S, MAIL, "send_email", {"to": BOB, "body": "the report"}, request_id=1)
    asked = decider.decide_call(call, 10.0, engine.policy, _random)
    assert isinstance(asked, CallVerdict)
    return decider, asked


def _asked() -> tuple[Decider, str]:
    """A decider that has just asked about a send to an unproven address, and the code it opened."""
    decider, asked = _asking()
    assert asked.verdict is not None and asked.verdict.rule == "sink.unproven" and asked.ask is not None
    return decider, asked.ask.pending.code


def _answer(decider: Decider, code: str, action: str, choice: str | None, now: float = 20.0) -> Verdict:
    out = decider.decide_answer(S, "mail", code, action, choice, 1, now=now)
    assert out.verdict is not None, out.refusal
    return out.verdict


@pytest.mark.parametrize("choice", ["once", "session"])
def test_a_yes_allows_the_call_it_was_asked_about(choice: str) -> None:
    decider, code = _asked()
    v = _answer(decider, code, "accept", choice)
    assert (v.verdict, v.rule) == ("allow", "approval.elicited")


@pytest.mark.parametrize(("action", "choice"), [("decline", None), ("accept", "deny")])
def test_a_no_denies_the_call_and_closes_the_code(action: str, choice: str | None) -> None:
    decider, code = _asked()
    v = _answer(decider, code, action, choice)
    assert (v.verdict, v.rule) == ("deny", "approval.declined")
    assert code not in decider.approvals.pending
    late = _answer(decider, code, "accept", "once", now=21.0)  # a yes after the no approves nothing
    assert (late.verdict, late.rule) == ("deny", "approval.closed")


@pytest.mark.parametrize(
    ("action", "rule"), [("timeout", "approval.timeout"), ("cancel", "approval.declined")]
)
def test_an_unanswered_or_dismissed_question_denies_but_leaves_the_code_open(action: str, rule: str) -> None:
    decider, code = _asked()
    v = _answer(decider, code, action, None)
    assert (v.verdict, v.rule) == ("deny", rule)
    assert code in decider.approvals.pending and f"code {code}" in v.reason
    later = _answer(decider, code, "accept", "once", now=21.0)  # the code still answers
    assert (later.verdict, later.rule) == ("allow", "approval.elicited")


def test_an_answer_to_a_code_nobody_opened_approves_nothing() -> None:
    decider, code = _asked()
    other = "".join("B" if c != "B" else "C" for c in code)  # same shape, not the code
    v = _answer(decider, other, "accept", "once")
    assert (v.verdict, v.rule) == ("deny", "approval.closed")
    assert code in decider.approvals.pending  # the real one is untouched


def test_an_always_whose_policy_edit_failed_approves_nothing() -> None:
    decider, code = _asked()
    out = decider.decide_answer(S, "mail", code, "accept", "always", 1, now=20.0)
    assert isinstance(out, PolicyEditDue)  # no verdict yet: it waits for policy.yaml to be edited
    assert not hasattr(out, "verdict") and out.policy_edit is not None
    failed = decider.after_policy_edit(out.policy_edit, "policy.yaml is read-only", now=21.0)
    assert failed.verdict is not None
    assert (failed.verdict.verdict, failed.verdict.rule) == ("deny", "approval.always_failed")


def test_an_always_whose_policy_edit_worked_allows_the_call() -> None:
    decider, code = _asked()
    out = decider.decide_answer(S, "mail", code, "accept", "always", 1, now=20.0)
    assert out.policy_edit is not None
    done = decider.after_policy_edit(out.policy_edit, None, now=21.0)
    assert done.verdict is not None
    assert (done.verdict.verdict, done.verdict.rule) == ("allow", "approval.elicited")


def _retry(decider: Decider, state: str, now: float) -> Verdict:
    call = ToolCall(S, MAIL, "send_email", {"to": BOB, "body": "the report"}, request_id=2)
    answer = {"action": "accept", "content": {"choice": "once"}}
    out = decider.decide_call(
        call, now, decider.engine.policy, _random, request_state=state, input_response=answer
    )
    assert out.verdict is not None
    return out.verdict


def test_a_request_state_answered_once_cannot_be_replayed() -> None:
    """The input-required retry: the same requestState and yes sent a second time approves nothing."""
    engine = Engine(merge([load_policy(POLICY, "policy.yaml")]))
    engine.tools_listed(MAIL, [{"name": "send_email"}], now=0.0)
    decider = Decider(engine, Words())
    decider.secret = b"k" * 32
    call = ToolCall(S, MAIL, "send_email", {"to": BOB, "body": "the report"}, request_id=1)
    asked = decider.decide_call(call, 10.0, engine.policy, _random)
    assert asked.ask is not None
    first = _retry(decider, asked.ask.request_state, now=20.0)
    assert (first.verdict, first.rule) == ("allow", "approval.elicited")  # the twin
    again = _retry(decider, asked.ask.request_state, now=21.0)
    assert (again.verdict, again.rule) == ("deny", "approval.bad_state")
    assert "replay" in again.reason


@pytest.mark.parametrize(
    ("error", "verdict", "rule"),
    [(None, "allow", "approval.elicited"), ("read-only", "deny", "approval.always_failed")],
)
def test_a_retry_answered_always_has_no_verdict_until_the_policy_edit_is_made(
    error: str | None, verdict: str, rule: str
) -> None:
    """Stops: a 2026-07-28 retry whose answer is "always" allowed before policy.yaml held the
    destination. The call's decision stops for the edit; an edit that failed approves nothing."""
    decider, asked = _asking()
    assert asked.ask is not None
    retry = ToolCall(S, MAIL, "send_email", {"to": BOB, "body": "the report"}, request_id=2)
    answer = {"action": "accept", "content": {"choice": "always"}}
    out = decider.decide_call(
        retry,
        20.0,
        decider.engine.policy,
        _random,
        request_state=asked.ask.request_state,
        input_response=answer,
    )
    assert isinstance(out, PolicyEditDue) and out.policy_edit.destinations == (BOB,)
    assert out.policy_edit.context.channel == "input_required"
    done = decider.after_policy_edit(out.policy_edit, error, now=21.0)
    assert (done.verdict.verdict, done.verdict.rule) == (verdict, rule)
    assert [r["rule"] for r in done.records] == ["approval.granted" if error is None else rule]
