"""Every kind of audit record, typed, beside the field list every record carries.

Theory of operation
-------------------
An audit record is one JSON object; the log writer (`bouncerd/server/audit.py`) puts the fields of
`RECORD_FIELDS` first, in that order, null where a record does not set them, then the record's own
fields, then the chain's ``prev`` and ``hash`` (`bouncerd.core.audit`). So readers (``bouncerctl
tail``, the report, the export) see one shape whatever wrote it.

Each kind of record is a `TypedDict` here, and each is built in one place:

- `VerdictRecord`: a verdict (allow, deny, ask), by `bouncerd.server.verdicts.verdict_record` alone;
- `ApprovalRecord`: what a person or a code did (``approval.*``), decided in
  `bouncerd.core.decision`, built by `bouncerd.core.decision_types.approval_record` and carried in
  a decision's result (`Trail.records`) to the verdict path (`bouncerd.server.verdicts.VerdictPath`);
- `EventRecord` and its kinds: a record that is not a verdict (``verdict`` null): the log's own
  (``audit.rotated``, ``audit.repaired``, ``audit.gap``), a policy reload, accepted pins, accepted
  loss, a vouched prompt (`VouchRecord`), a session's end (`SessionEndedRecord`), lost export copies
  (`ExportLossRecord`).

`Audit` is the one signature of a record's writer (`AuditLog.append`), which every collaborator that
audits is handed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NotRequired, TypedDict

from bouncerd.core.model import JsonRpcId

# Every record carries these fields, in this order (absent values are null), so readers see one shape.
RECORD_FIELDS = (
    "ts",
    "session",
    "client",
    "server",
    "request_id",
    "tool",
    "arguments",
    "verdict",
    "rule",
    "reason",
    "destination",
    "provenance",
)

# With `audit_arguments: digest` a record carries this instead of `arguments` (and no `arguments`).
DIGEST_FIELD = "arguments_sha256"


class VerdictRecord(TypedDict):
    """The audit record of one verdict: RECORD_FIELDS (ts added by the log), then its own."""

    session: str
    client: str | None
    server: str
    request_id: JsonRpcId
    tool: str | None
    arguments: NotRequired[Mapping[str, Any]]  # with audit_arguments: full, while the daemon holds them
    arguments_sha256: NotRequired[str | None]  # otherwise their digest, in their place
    verdict: str
    rule: str
    reason: str
    destination: str | None
    provenance: dict[str, Any] | None
    kind: NotRequired[str]  # a request judged that is not a tools/call (wire.VERDICT_KINDS)
    code: NotRequired[str | None]  # the ask's code (an ask, an answer to one)
    channel: NotRequired[str]  # how a person answered (an answer)
    request_id_json: NotRequired[str]  # the id's exact JSON where request_id cannot carry it
    fast_path: NotRequired[Mapping[str, Any]]  # a call the shim forwarded on the fast path: epoch, seq


class EventRecord(TypedDict):
    """A record that is not a verdict: its rule and why."""

    verdict: None
    rule: str
    reason: str


class ServerEventRecord(EventRecord):
    """An event about one server (``pins.accepted``)."""

    server: str


class VouchRecord(EventRecord):
    """Destinations the user typed, vouched for the session (``vouch.user_prompt``)."""

    session: str
    destination: str  # the vouched keys, comma-separated


class SessionEndedRecord(EventRecord):
    """A session archived (``session.ended``)."""

    session: str
    client: str | None


class ExportLossRecord(EventRecord):
    """Exported copies lost (``audit.export_dropped``): counts per channel."""

    export: Mapping[str, Mapping[str, int]]


class BoundCall(TypedDict, total=False):
    """The call an approval is about, as its record names it (none for a wrong code)."""

    session: str
    server: str
    tool: str
    destination: str | None
    arguments_sha256: str


class ApprovalHow(TypedDict, total=False):
    """How an approval came about and, for a grant, what it trusts and for how long."""

    channel: str  # elicitation, code (bouncerctl), input_required (requestState)
    code: str | None
    request_id: JsonRpcId
    action: str | None  # the elicitation's action (accept, decline, cancel)
    scope: str  # a grant: once, session, always
    lasts: str
    destinations: list[str] | None  # a grant: what it trusts beyond this call


class ApprovalRecord(EventRecord, BoundCall, ApprovalHow):
    """What a person or a code did about an ask (``approval.*``): the bound call where there is one,
    then how (`bouncerd.core.decision_types.approval_record` builds it)."""


AnyRecord = Mapping[str, Any]  # any of the kinds above, as the writer takes it
Audit = Callable[[AnyRecord, float], None]  # `AuditLog.append`
