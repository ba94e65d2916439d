"""The engine's events, one `TypedDict` per kind: what the journal holds and `Engine.apply` reads.

Theory of operation
-------------------
Every change to the state that must survive a crash is one of these (see bouncerd/core/engine.py).
They are plain dicts, so msgpack and JSON carry them unchanged; the types only say, once, which keys
each kind has. Builders use the constructors below, readers narrow on ``ev["ev"]``. A field marked
`NotRequired` may be missing in a journal written by an older bouncerd and is read with a default.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class BindingFields(TypedDict):
    """`bouncerd.core.approvals.Binding.as_dict`."""

    session: str
    server: str
    tool: str
    parameter: str | None
    destination: str | None
    digest: str


class PinEvent(TypedDict):
    ev: Literal["pin"]
    server: str  # ServerIdentity.key
    tool: str
    digest: str
    description: NotRequired[str | None]
    schema: NotRequired[Any]
    form: NotRequired[dict[str, Any]]  # every part of the tool but its name (absent in older journals)


class UnpinEvent(TypedDict):
    ev: Literal["unpin"]
    server: str
    tool: str


class PinSeenEvent(TypedDict):
    """The last form of a tool seen that its pin does not cover (changed, or new after the first-use
    window): kept until a person accepts it or the server lists the pinned form again, so `pins show`,
    `pins accept`, `status` and `report` read it after the server has gone and after a restart."""

    ev: Literal["pin_seen"]
    server: str  # ServerIdentity.key
    tool: str
    digest: str | None  # None: the server lists the pinned form again; forget the one seen
    description: NotRequired[str | None]
    schema: NotRequired[Any]
    form: NotRequired[dict[str, Any]]  # every part of the tool but its name (absent in older journals)
    ts: NotRequired[float]  # when it was listed
    client: NotRequired[str | None]  # the client of the session whose shim listed it
    session: NotRequired[str]


class PinWindowEvent(TypedDict):
    ev: Literal["pin_window"]
    server: str
    until: float | None  # None: the first-use window is closed
    # A client capability profile (`pins.capability_profile`) the server has now been listed to: a
    # server may list more tools to a client that can do more.
    profile: NotRequired[str]
    # The profile an open window is for (absent: for every client, as on a first use by a client that
    # did not say what it can do).
    window_for: NotRequired[str]


class TaintEvent(TypedDict):
    ev: Literal["taint"]
    scope: str
    data: dict[str, Any]  # taint.encode_records: each provenance once, records point at it


class TaintEvictedEvent(TypedDict):
    ev: Literal["taint_evicted"]
    scope: str
    filter: bytes  # TaintIndex.export_evicted


class AttemptEvent(TypedDict):
    ev: Literal["attempt"]
    session: str
    server: str  # the server's name
    tool: str
    n: NotRequired[int]  # calls tried (a snapshot); 1 when missing


class BlindEvent(TypedDict):
    ev: Literal["blind"]
    scope: str


class VouchEvent(TypedDict):
    ev: Literal["vouch"]
    session: str
    keys: list[str]


class ListedEvent(TypedDict):
    """Destinations a directory tool (`ToolRule.directory`) listed in identity fields of its output:
    trusted for the session's sends unless also seen in free text. `source` is `server/tool`."""

    ev: Literal["listed"]
    session: str
    source: str
    keys: list[str]


class SessionEndedEvent(TypedDict):
    """A session's last shim left a grace period ago: its budgets, vouched destinations and approvals
    are dropped; its taint stays until `taint_retention` (TaintExpiredEvent)."""

    ev: Literal["session_ended"]
    session: str


class TaintExpiredEvent(TypedDict):
    """Taint of `scope` first seen before `before` is forgotten (`taint_retention`)."""

    ev: Literal["taint_expired"]
    scope: str
    before: float


class ApprovalPendingEvent(TypedDict):
    ev: Literal["approval_pending"]
    code: str
    binding: BindingFields
    created: float
    expires: float
    reason: str
    summary: NotRequired[str]
    question: NotRequired[str]
    destinations: NotRequired[list[str]]
    rule: NotRequired[str]  # the ask's rule: what the person was asked about


class ApprovalClosedEvent(TypedDict):
    ev: Literal["approval_closed"]
    code: str
    why: str  # "expired", "approved", "declined", "settled"


class GrantEvent(TypedDict):
    ev: Literal["grant"]
    scope: Literal["once", "session", "always"]
    binding: BindingFields
    # once grants: when the person was asked, the ask's rule then, and when the grant lapses. A once
    # grant without them (journalled before they existed) has lapsed: a person approves again.
    asked: NotRequired[float]
    rule: NotRequired[str]
    expires: NotRequired[float]


class GrantUsedEvent(TypedDict):
    ev: Literal["grant_used"]
    session: str
    server: str
    tool: str
    digest: str
    asked: NotRequired[float]  # which grant of the call was used (the first one when missing)


class NonceUsedEvent(TypedDict):
    ev: Literal["nonce_used"]
    nonce: str
    expires: float


class WrongCodeEvent(TypedDict):
    ev: Literal["wrong_code"]
    ts: float


ApprovalEvent = (
    ApprovalPendingEvent | ApprovalClosedEvent | GrantEvent | GrantUsedEvent | NonceUsedEvent | WrongCodeEvent
)
EngineEvent = (
    PinEvent
    | SessionEndedEvent
    | TaintExpiredEvent
    | UnpinEvent
    | PinSeenEvent
    | PinWindowEvent
    | TaintEvent
    | TaintEvictedEvent
    | AttemptEvent
    | BlindEvent
    | VouchEvent
    | ListedEvent
    | ApprovalEvent
)
