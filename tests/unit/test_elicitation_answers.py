"""What the audit log says when a person answers the elicitation form with a no.

The decider is the daemon's own (`test_decider_answers` builds one with an open question); each
kind of no must be recorded in words a person reviewing the log reads, never as "(decline, None)".
"""

from __future__ import annotations

import pytest
from test_decider_answers import S, _asked


@pytest.mark.parametrize(
    ("action", "choice", "said"),
    [
        ("decline", None, "a person declined the question"),
        ("accept", "deny", "a person chose Deny"),
        ("accept", None, "an answer with no choice the form offered (action 'accept', choice None)"),
    ],
)
def test_a_no_is_logged_in_words_not_as_a_tuple(action: str, choice: str | None, said: str) -> None:
    """Stops: a declined question logged as "a person did not allow this call (decline, None)"."""
    decider, code = _asked()
    out = decider.decide_answer(S, "mail", code, action, choice, 1, now=20.0)
    assert out.verdict is not None and (out.verdict.verdict, out.verdict.rule) == (
        "deny",
        "approval.declined",
    )
    (record,) = [r for r in out.records if r["rule"] == "approval.declined"]
    assert record["reason"] == f"{said}, so the call is not allowed"
    assert "(decline, None)" not in record["reason"]
