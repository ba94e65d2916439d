"""The decider's own refusals, before the engine is asked (docs/how-it-works.md, "The decision").

A call the engine would allow must still be refused when the daemon cannot judge it as the person
configured it: the shim's ``--policy`` file no longer loads (`policy.unreadable`: the daemon refuses
to guess, and must not fall back to the looser base policy), or the shim could not read the
arguments as an object (`call.invalid_arguments`: what was checked would not be what is sent). Each
attack has its twin: the same call, judgeable, is allowed.
"""

from __future__ import annotations

from typing import Any

from bouncerd.core.decision import Decider
from bouncerd.core.engine import Engine
from bouncerd.core.model import ServerIdentity, ToolCall
from bouncerd.core.policy import merge

NOTES = ServerIdentity("notes", ("notes-server",))
S = "session-1"


class Words:
    def question(self, call: Any, verdict: Any, classified: Any) -> tuple[str, str, tuple[str, ...]]:
        return "?", "", ()

    def code_hint(self, code: str, expires: float) -> str:
        return code


def _decider() -> Decider:
    engine = Engine(merge([]))
    engine.tools_listed(NOTES, [{"name": "add_note", "inputSchema": {"type": "object"}}], now=0.0)
    decider = Decider(engine, Words())
    decider.secret = b"k" * 32
    return decider


def _decide(decider: Decider, **kw: Any) -> Any:
    call = ToolCall(S, NOTES, "add_note", {"text": "buy milk"}, request_id=1)
    return decider.decide_call(call, 10.0, decider.engine.policy, lambda n: b"\x01" * n, **kw).verdict


def test_call_under_a_policy_file_that_no_longer_loads_is_refused_not_judged_by_the_base_policy() -> None:
    decider = _decider()
    assert (_decide(decider).verdict, _decide(decider).rule) == ("allow", "default.allow")  # the twin
    verdict = _decide(decider, policy_error="policy.yaml:3: tools.add_note.max_calls: not an integer")
    assert (verdict.verdict, verdict.rule) == ("deny", "policy.unreadable")
    assert "max_calls" in verdict.reason


def test_call_whose_arguments_the_shim_could_not_read_is_refused() -> None:
    decider = _decider()
    verdict = _decide(decider, invalid="arguments is a JSON array, not an object")
    assert (verdict.verdict, verdict.rule) == ("deny", "call.invalid_arguments")
    assert _decide(decider, invalid=None).rule == "default.allow"  # the twin
