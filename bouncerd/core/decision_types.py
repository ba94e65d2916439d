"""What a decision returns, and the words a person's answer is made of.

`decision.Decider` returns a `Decision` for every op it decides; the daemon's server reads it (the
verdict or the refusal, the engine events to journal, the audit records to write, the code to
notify) and decides nothing of its own. The answer's vocabulary (`ACTIONS`, `CHOICES`, how long each
choice lasts, `from_elicit_result`) is shared by the decision and the server that relays the
question, so it is written once, here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from bouncerd.core import approvals as ap
from bouncerd.core.events import EngineEvent
from bouncerd.core.model import ToolCall, Verdict
from bouncerd.core.sinkgate import Classified

CHANNEL_ELICITATION = "elicitation"
CHANNEL_INPUT_REQUIRED = "input_required"
CHANNEL_CODE = "code"
ACTIONS = ("accept", "decline", "cancel", "timeout")
CHOICES = ("once", "session", "always", "deny")
Scope = Literal["once", "session", "always"]
LASTS: dict[str, str] = {
    "once": "this call",
    "session": "this session",
    "always": "always (added to policy.yaml)",
}

RandomBytes = Callable[[int], bytes]  # n random bytes (secrets.token_bytes)
AuditFields = dict[str, Any]  # one audit record, without its chain fields


class Phrasing(Protocol):
    """The text a person reads (bouncerd/server/questions.py: it formats clock times)."""

    def question(
        self, call: ToolCall, verdict: Verdict, classified: Sequence[Classified]
    ) -> tuple[str, str, tuple[str, ...]]:
        """(the question, the summary of the other arguments, the destinations an approval would trust)."""
        ...

    def code_hint(self, code: str, expires: float) -> str: ...


@dataclass(frozen=True)
class Ask:
    """What an ask adds to its reply: the open code, and the requestState that names it."""

    pending: ap.Pending
    timeout: int
    binding: ap.Binding
    request_state: str


@dataclass(frozen=True)
class PolicyEdit:
    """An "always" answer waiting for its destinations to be added to policy.yaml."""

    binding: ap.Binding
    destinations: tuple[str, ...]
    code: str
    context: Mapping[str, Any]  # channel, code, request_id, action: every record of the answer has them


@dataclass
class Decision:
    verdict: Verdict | None = None
    events: list[EngineEvent] = field(default_factory=list)  # applied to the engine; journal in order
    records: list[AuditFields] = field(default_factory=list)  # audit in order, before the verdict's line
    ask: Ask | None = None  # an ask: its code and requestState
    opened: ap.Pending | None = None  # a code minted by this decision: a person is to be notified
    binding: ap.Binding | None = None  # the call an answer was about
    code: str = ""  # the code an answer named, as normalised ("" if it is not a code)
    found: ap.Pending | None = None  # find_code: the open code named
    refusal: tuple[str, str] | None = None  # (error code, message): the op is refused, no verdict
    policy_edit: PolicyEdit | None = None  # stopped here: see after_policy_edit


def scope_of(choice: str) -> Scope:
    """The lasting scope a person's choice asks for (anything else than "always" or "session" is "once")."""
    return "always" if choice == "always" else "session" if choice == "session" else "once"


def from_elicit_result(response: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """(action, choice) from a client's ElicitResult; anything unreadable is a cancel."""
    if not isinstance(response, Mapping) or response.get("action") not in ("accept", "decline", "cancel"):
        return "cancel", None
    content = response.get("content")
    choice = content.get("choice") if isinstance(content, Mapping) else None
    return str(response["action"]), choice if isinstance(choice, str) else None
