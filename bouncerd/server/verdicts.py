"""A decision leaves the daemon one way: events journaled, records audited, one verdict record, one reply.

Theory of operation
-------------------
Four ops end in a verdict: ``verdict`` (a call the shim relays, `Daemon.verdict`), ``forwarded`` (a
call the shim forwarded on the fast path, `Daemon.forwarded`), ``answer`` (a person's answer to an
elicitation, `ApprovalDesk.answer`) and ``check_builtin`` (a client's own tool,
`HookOps.check_builtin`); approval ops (``approve``, expiries, wrong codes) end in decisions without a
verdict. Each hands what the core decided to one `VerdictPath`:

- `VerdictPath.settle` journals a decision's engine events in one write, then writes the audit
  records the decision made on the way (``approval.*``, typed `ApprovalRecord`s), in order. The
  journal comes first: state a crash must not lose is on disk before anything says it happened.
- `VerdictPath.deliver` settles the verdict's own events, then hands the verdict, as a `Judged`, to
  `deliver`, which writes its audit record (`verdict_record`: a `VerdictRecord`, the fields of
  `auditrecords.RECORD_FIELDS` plus the verdict's own), counts it for the session (`bouncerctl
  status`) and returns the reply (`wire.verdict_reply`, with the provenance, plus what the op adds:
  an ask's code and question, an open code's expiry).

So the ops cannot drift apart again: every verdict record carries the provenance, the request id's
exact JSON where the shim sent it, and the arguments as ``audit_arguments`` says (their digest only
where the daemon no longer holds them: an answer after a restart), and no op journals a decision's
events on a path of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bouncerd import wire
from bouncerd.core.approvals import arguments_digest
from bouncerd.core.auditrecords import AnyRecord, Audit, VerdictRecord
from bouncerd.core.events import EngineEvent
from bouncerd.core.model import JsonRpcId, ToolCall, Verdict
from bouncerd.server.sessions import Session

Journal = Callable[[Sequence[EngineEvent]], None]  # append engine events to the journal, one write


@dataclass(frozen=True)
class Judged:
    """What one op judged, as its record and reply need it."""

    session: Session
    server: str
    request_id: JsonRpcId
    tool: str | None
    verdict: Verdict
    arguments: Mapping[str, Any] | None  # None: the daemon no longer holds them (see `digest`)
    digest: str | None = None  # the arguments' digest when they are not held
    kind: str = "tool"
    reason: str | None = None  # the record's reason, when it differs from the reply's (an ask's)
    code: str | None = None
    channel: str | None = None
    request_id_json: str | None = None
    fast_path: Mapping[str, Any] | None = None  # the `forwarded` op's epoch, instance and seq
    extra: Mapping[str, Any] = field(default_factory=dict)  # what the op adds to the reply

    @classmethod
    def of_call(cls, session: Session, call: ToolCall, verdict: Verdict, **more: Any) -> Judged:
        """What was judged of a call a shim relayed or forwarded (its server, id, tool and arguments)."""
        return cls(session, call.server.name, call.request_id, call.tool, verdict, call.arguments, **more)


def verdict_record(judged: Judged, audit_arguments: str) -> VerdictRecord:
    """The one audit record of a verdict. `audit_arguments` is the policy setting (full or digest)."""
    verdict = judged.verdict
    provenance = verdict.provenance.as_dict() if verdict.provenance is not None else None
    record: VerdictRecord = {
        "session": judged.session.key,
        "client": judged.session.client.name,
        "server": judged.server,
        "request_id": judged.request_id,
        "tool": judged.tool,
        "verdict": verdict.verdict,
        "rule": verdict.rule,
        "reason": judged.reason if judged.reason is not None else verdict.reason,
        "destination": verdict.destination,
        "provenance": provenance,
    }
    if judged.kind != "tool":
        record["kind"] = judged.kind
    if judged.arguments is not None and audit_arguments != "digest":
        record["arguments"] = judged.arguments
    elif judged.arguments is not None:
        record["arguments_sha256"] = arguments_digest(judged.arguments)
    else:
        record["arguments_sha256"] = judged.digest
    if judged.channel is not None:
        record["channel"] = judged.channel
    if judged.code is not None or judged.channel is not None:
        record["code"] = judged.code
    if judged.request_id_json is not None:
        record["request_id_json"] = judged.request_id_json
    if judged.fast_path is not None:
        record["fast_path"] = judged.fast_path
    return record


def deliver(rid: int, judged: Judged, audit: Audit, audit_arguments: str, now: float) -> dict[str, Any]:
    """Audit the verdict, count it for the session, and return its reply."""
    verdict = judged.verdict
    audit(verdict_record(judged, audit_arguments), now)
    judged.session.counts[verdict.verdict] += 1
    reply = wire.verdict_reply(
        rid,
        verdict=verdict.verdict,
        rule=verdict.rule,
        reason=verdict.reason,
        destination=verdict.destination,
        provenance=verdict.provenance.as_dict() if verdict.provenance is not None else None,
    )
    reply.update(judged.extra)
    return reply


class VerdictPath:
    """The one way out of the daemon for a decision; see the module's theory of operation."""

    def __init__(self, journal: Journal, audit: Audit, audit_arguments: Callable[[], str]) -> None:
        self.journal = journal
        self.audit = audit
        self.audit_arguments = audit_arguments  # the policy setting, read per record (a reload may change it)

    def settle(self, events: Sequence[EngineEvent], records: Iterable[AnyRecord], now: float) -> None:
        """Journal `events` in one write, then audit `records` in order."""
        if events:
            self.journal(events)
        for record in records:
            self.audit(record, now)

    def deliver(
        self, rid: int, judged: Judged, now: float, events: Sequence[EngineEvent] = ()
    ) -> dict[str, Any]:
        """Journal the verdict's `events`, audit the verdict, count it, and return its reply."""
        self.settle(events, (), now)
        return deliver(rid, judged, self.audit, self.audit_arguments(), now)
