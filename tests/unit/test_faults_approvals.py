"""A flood of questions must not push out the code a person is answering (approvals.MAX_PENDING).

Before, the 257th open question dropped the oldest code: an agent that made a burst of asked calls
could make the person's `bouncerctl approve CODE` for an earlier one fail. Now, when full, the new
question gets no code (its call stays refused) and every earlier one is kept."""

from __future__ import annotations

import os
from collections.abc import Sequence

from bouncerd.core import approvals as ap
from bouncerd.core.decision import Decider
from bouncerd.core.decision_types import CallVerdict, PolicyEditDue
from bouncerd.core.engine import Engine
from bouncerd.core.model import ServerIdentity, ToolCall, Verdict
from bouncerd.core.policy import load_policy, merge
from bouncerd.core.sinkgate import Classified


def _pending(n: int, session: str) -> ap.Pending:
    binding = ap.Binding(session, "mail", "send_email", "to", f"x{n}@example.org", f"{n:064x}")
    return ap.Pending(f"CODE-{n}", binding, float(n), 10_000.0, "asked", "", question="send?")


def test_flood_of_questions_keeps_the_code_a_person_is_answering() -> None:
    approvals = ap.Approvals()
    approvals.apply(ap.pending_event(_pending(0, "person")))
    for n in range(1, ap.MAX_PENDING + 50):
        approvals.apply(ap.pending_event(_pending(n, "flood")))
    assert "CODE-0" in approvals.pending  # the person's code survives the flood
    assert len(approvals.pending) == ap.MAX_PENDING
    assert f"CODE-{ap.MAX_PENDING + 10}" not in approvals.pending  # the flood's late ones got none


def test_a_closed_code_makes_room_for_a_new_one() -> None:
    """The benign twin: codes that are answered or expire (closed) free their place."""
    approvals = ap.Approvals()
    for n in range(ap.MAX_PENDING):
        approvals.apply(ap.pending_event(_pending(n, "s")))
    approvals.apply(ap.closed_event("CODE-0", "answered"))
    approvals.apply(ap.pending_event(_pending(999, "s")))
    assert "CODE-999" in approvals.pending


# ---- through the decider: no code is handed out that the daemon would not keep -----------------------

POLICY = "tools:\n  send_email:\n    exfiltrating: true\n    sink_params: [to]\n"
MAIL = ServerIdentity("mail", ("mail-server",))


class _Words:
    def question(
        self, call: ToolCall, verdict: Verdict, classified: Sequence[Classified]
    ) -> tuple[str, str, tuple[str, ...]]:
        return f"send to {verdict.destination}?", "", ()

    def code_hint(self, code: str, expires: float) -> str:
        return f"code {code}"


def _decider() -> Decider:
    engine = Engine(merge([load_policy(POLICY, "policy.yaml")]))
    engine.tools_listed(MAIL, [{"name": "send_email"}], now=0.0)
    decider = Decider(engine, _Words())
    decider.secret = b"k" * 32
    return decider


def _send(decider: Decider, n: int) -> CallVerdict | PolicyEditDue:
    call = ToolCall("flood", MAIL, "send_email", {"to": f"x{n}@example.org"}, request_id=n)
    return decider.decide_call(call, 10.0, decider.engine.policy, os.urandom)


def test_when_full_a_new_question_is_refused_without_a_code_that_would_not_exist() -> None:
    """Before, the full desk dropped the new code silently while the agent was told to approve it:
    `bouncerctl approve` then said "no open code". Now the call is denied as `approval.full`, no
    code in its reason, and every open code stays."""
    decider = _decider()
    first = _send(decider, 0)
    assert first.ask is not None
    for n in range(1, ap.MAX_PENDING):
        assert _send(decider, n).ask is not None
    refused = _send(decider, ap.MAX_PENDING)
    assert refused.ask is None and refused.verdict is not None
    assert (refused.verdict.verdict, refused.verdict.rule) == ("deny", "approval.full")
    assert "bouncerctl approve" not in refused.verdict.reason
    assert first.ask.pending.code in decider.approvals.pending  # the earlier one is kept
    again = _send(decider, 0)  # the benign twin: the agent retrying an open question gets its code
    assert again.ask is not None and again.ask.pending.code == first.ask.pending.code
