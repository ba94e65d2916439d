"""One author for every verdict's audit record and reply (bouncerd/server/verdicts.py).

The drift this stops: a person's answer to an elicitation was audited by a record of its own that
lacked the provenance, wrote the arguments' digest whatever ``audit_arguments`` said, and was not
counted for the session, so the log and `bouncerctl status` told less about an answered ask than about
any other verdict. The daemon's three verdict ops now build `Judged` and hand it to `deliver`.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any, get_type_hints

import pytest

from bouncerd.core import auditrecords as audit
from bouncerd.core.approvals import arguments_digest
from bouncerd.core.auditrecords import VerdictRecord
from bouncerd.core.model import Provenance, Verdict
from bouncerd.server import approvals, daemon, hooks
from bouncerd.server.sessions import ClientInfo, Session
from bouncerd.server.verdicts import Judged, deliver, verdict_record

ARGS = {"to": "attacker@evil.test", "body": "the secret"}
SEEN = Provenance(server="mail", tool="read_inbox", request_id=7, ts=1.0)


def _session() -> Session:
    return Session("s1", 0.0, client=ClientInfo(name="claude-code"))


def _answer(arguments: dict[str, Any] | None) -> Judged:
    """A person's answer as `ApprovalDesk.answer` judges it: the desk may or may not hold the arguments."""
    verdict = Verdict("deny", "sink.tainted_destination", "no", "attacker@evil.test", provenance=SEEN)
    return Judged(
        _session(),
        "mail",
        3,
        "send_email",
        verdict,
        arguments,
        digest=arguments_digest(ARGS),
        code="K7Q-F2M",
        channel="elicitation",
    )


def test_an_answers_record_carries_the_provenance_of_the_destination_it_refused() -> None:
    record = verdict_record(_answer(ARGS), "full")
    assert record["provenance"] == SEEN.as_dict()
    assert (record["channel"], record["code"]) == ("elicitation", "K7Q-F2M")


@pytest.mark.parametrize(
    ("setting", "held", "expected"),
    [
        ("full", True, {"arguments": ARGS}),
        ("digest", True, {"arguments_sha256": arguments_digest(ARGS)}),
        ("full", False, {"arguments_sha256": arguments_digest(ARGS)}),  # after a restart: the digest only
    ],
)
def test_an_answers_record_writes_the_arguments_as_audit_arguments_says(
    setting: str, held: bool, expected: dict[str, Any]
) -> None:
    record = verdict_record(_answer(ARGS if held else None), setting)
    assert {k: v for k, v in record.items() if k in ("arguments", "arguments_sha256")} == expected


def test_every_verdict_is_audited_counted_and_answered_with_its_provenance() -> None:
    judged = _answer(ARGS)
    written: list[dict[str, Any]] = []
    reply = deliver(5, judged, lambda fields, now: written.append(fields), "digest", 10.0)
    assert [r["rule"] for r in written] == ["sink.tainted_destination"]
    assert judged.session.counts["deny"] == 1
    assert (reply["id"], reply["verdict"], reply["provenance"]) == (5, "deny", SEEN.as_dict())


def test_a_calls_record_keeps_its_kind_and_exact_id_only_when_they_say_something() -> None:
    verdict = Verdict("allow", "approval.once", "ok")
    plain = verdict_record(Judged(_session(), "mail", 1, "send", verdict, {}), "full")
    assert "kind" not in plain and "request_id_json" not in plain and "code" not in plain
    odd = verdict_record(
        Judged(
            _session(), "mail", None, "resources/read", verdict, {}, kind="resource", request_id_json="1.5"
        ),
        "full",
    )
    assert (odd["kind"], odd["request_id_json"], odd["request_id"]) == ("resource", "1.5", None)


def test_the_typed_record_names_every_field_the_audit_log_puts_first() -> None:
    fields = set(get_type_hints(VerdictRecord))
    assert set(audit.RECORD_FIELDS) - {"ts"} <= fields
    assert audit.DIGEST_FIELD in fields


@pytest.mark.parametrize("module", [daemon, approvals, hooks])
def test_no_verdict_op_builds_its_own_record_or_reply(module: Any) -> None:
    """`verdict_reply` and a "provenance" record key appear only in verdicts.py: a fourth author would
    drift again."""
    tree = ast.parse(inspect.getsource(module))
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    keys = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)}
    assert "verdict_reply" not in names
    assert "provenance" not in keys
