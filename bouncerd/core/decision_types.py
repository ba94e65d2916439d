"""What a decision returns, and the words a person's answer is made of.

`decision.Decider` returns one result type per outcome, so the type says what the server may read:
a `CallVerdict` (a call judged: the verdict, and an ask's code), an `AnswerVerdict` (a person's
answer settled: the verdict and the call it was about), a `PolicyEditDue` (an "always" answer
that stands only once policy.yaml is edited), a `Refusal` (the op is refused: no verdict), a
`CodeFound` (the open code a bouncerctl op names) or a bare `Trail` (an approval or an expiry). Each
is a `Trail`: the engine events it produced (already applied, for the server to journal in order),
the typed audit records to write before any verdict's line, and the code it opened, if any. The
server reads these and decides nothing of its own. While a decision runs, a `TrailBuilder` gathers
what it leaves and builds the result once, at the end; `approval_record` is the one builder of an
``approval.*`` record (`auditrecords.ApprovalRecord`: the bound call, then how, each field checked
by mypy where the record is made). The answer's vocabulary (`ACTIONS`, `CHOICES`, how long each
choice lasts, `from_elicit_result`) is shared by the decision and the server that relays the
question, so it is written once, here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, Unpack

from bouncerd.core import approvals as ap
from bouncerd.core.auditrecords import ApprovalHow, ApprovalRecord, BoundCall
from bouncerd.core.events import EngineEvent
from bouncerd.core.model import JsonRpcId, ToolCall, Verdict
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


class AnswerHow(TypedDict):
    """The part of `auditrecords.ApprovalHow` every record of an answer's settlement has."""

    channel: str
    code: str
    request_id: JsonRpcId
    action: str


@dataclass(frozen=True)
class AnswerContext:
    """How an answer came, as every record of its settlement names it."""

    channel: str  # elicitation, input_required (a retry's requestState) or code (bouncerctl)
    code: str
    request_id: JsonRpcId
    action: str  # accept, decline, cancel, timeout

    def how(self) -> AnswerHow:
        """As every record of the settlement names it."""
        return {
            "channel": self.channel,
            "code": self.code,
            "request_id": self.request_id,
            "action": self.action,
        }


@dataclass(frozen=True)
class PolicyEdit:
    """An "always" answer waiting for its destinations to be added to policy.yaml."""

    binding: ap.Binding
    destinations: tuple[str, ...]
    context: AnswerContext


@dataclass(frozen=True, kw_only=True)
class Trail:
    """What every decision leaves, whatever its outcome; `expire` and `approve` leave only this."""

    events: tuple[EngineEvent, ...] = ()  # applied to the engine; journal in order
    records: tuple[ApprovalRecord, ...] = ()  # audit in order, before any verdict's line
    opened: ap.Pending | None = None  # a code minted by this decision: a person is to be notified


@dataclass(frozen=True, kw_only=True)
class CallVerdict(Trail):
    """`decide_call`: the verdict on a call, and for an ask its open code and requestState."""

    verdict: Verdict
    ask: Ask | None = None


@dataclass(frozen=True, kw_only=True)
class AnswerVerdict(Trail):
    """`decide_answer` and `after_policy_edit`: the verdict a person's answer settled."""

    verdict: Verdict
    code: str  # the code the answer named, as normalised ("" if it is not a code)
    binding: ap.Binding | None  # the call the code was about; None when no such code is open


@dataclass(frozen=True, kw_only=True)
class PolicyEditDue(Trail):
    """An "always" answer stopped before its verdict: the server edits policy.yaml, reloads it and
    hands the outcome to `Decider.after_policy_edit`, which returns the `AnswerVerdict`."""

    policy_edit: PolicyEdit


@dataclass(frozen=True, kw_only=True)
class Refusal(Trail):
    """The op is refused, with no verdict: (error code, message) for the error reply."""

    refusal: tuple[str, str]


@dataclass(frozen=True, kw_only=True)
class CodeFound(Trail):
    """`find_code`: the open code a bouncerctl op names."""

    found: ap.Pending


def approval_record(
    rule: str, binding: ap.Binding | None, reason: str, **how: Unpack[ApprovalHow]
) -> ApprovalRecord:
    """The one builder of an ``approval.*`` audit record: the bound call where there is one, then
    how it came about, in the order given."""
    bound: BoundCall = {}
    if binding is not None:
        bound = {
            "session": binding.session,
            "server": binding.server,
            "tool": binding.tool,
            "destination": binding.destination,
            "arguments_sha256": binding.digest,
        }
    return {"verdict": None, "rule": rule, "reason": reason, **bound, **how}


class TrailFields(TypedDict):
    """The fields every result type takes from its `Trail`."""

    events: tuple[EngineEvent, ...]
    records: tuple[ApprovalRecord, ...]
    opened: ap.Pending | None


class TrailBuilder:
    """What a decision leaves while it runs (events, records, the code it opened); each outcome's
    result type is built from it once, at the end."""

    def __init__(self, events: Sequence[EngineEvent] = ()) -> None:
        self.events: list[EngineEvent] = list(events)
        self.records: list[ApprovalRecord] = []
        self.opened: ap.Pending | None = None

    def _left(self) -> TrailFields:
        return {"events": tuple(self.events), "records": tuple(self.records), "opened": self.opened}

    def trail(self) -> Trail:
        return Trail(**self._left())

    def call(self, verdict: Verdict, ask: Ask | None = None) -> CallVerdict:
        return CallVerdict(**self._left(), verdict=verdict, ask=ask)

    def answer(self, verdict: Verdict, code: str, binding: ap.Binding | None) -> AnswerVerdict:
        return AnswerVerdict(**self._left(), verdict=verdict, code=code, binding=binding)

    def edit_due(self, edit: PolicyEdit) -> PolicyEditDue:
        return PolicyEditDue(**self._left(), policy_edit=edit)

    def refuse(self, error: str, message: str) -> Refusal:
        return Refusal(**self._left(), refusal=(error, message))

    def found(self, pending: ap.Pending) -> CodeFound:
        return CodeFound(**self._left(), found=pending)


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
