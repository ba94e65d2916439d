"""A flood of questions must not push out the code a person is answering (approvals.MAX_PENDING).

Before, the 257th open question dropped the oldest code: an agent that made a burst of asked calls
could make the person's `bouncerctl approve CODE` for an earlier one fail. Now, when full, the new
question gets no code (its call stays refused) and every earlier one is kept."""

from __future__ import annotations

from bouncerd.core import approvals as ap


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
