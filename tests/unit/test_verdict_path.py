"""One path out of the daemon for every decision (bouncerd/server/verdicts.py), and typed audit records.

The crash this stops: a decision's audit record written before its events reach the journal. A
`kill -9` between the two leaves a log that says a person granted a call (or that a code was opened)
while the restarted daemon, replaying the journal, knows nothing of it: the grant is gone, or the
code the log names is not open. So `VerdictPath` journals a decision's events in one write first,
then its records, then the verdict's; the approvals desk journals nothing on a path of its own.

The drift this stops: audit records built as bare dicts in a dozen places, each free to misspell a
field the report and the export read. Every writer in bouncerd/server hands the log a typed record
(bouncerd/core/auditrecords.py), and the records a decision makes in the core (``approval.*``) are
built typed too: the decision's results carry `ApprovalRecord`s, never `dict[str, Any]`.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any, get_type_hints, is_typeddict

from bouncerd.core import auditrecords, decision_types
from bouncerd.core.model import Verdict
from bouncerd.server import approvals
from bouncerd.server.sessions import ClientInfo, Session
from bouncerd.server.verdicts import Judged, VerdictPath

SERVER_DIR = Path(__file__).resolve().parents[2] / "bouncerd" / "server"
CORE_DIR = SERVER_DIR.parent / "core"
RECORD_KINDS = frozenset(name for name, value in vars(auditrecords).items() if is_typeddict(value))
GRANT = {"ev": "approval_grant", "code": "K7Q-F2M"}  # the shape does not matter to the path


def _path(log: list[tuple[str, Any]]) -> VerdictPath:
    return VerdictPath(
        lambda events: log.append(("journal", list(events))),
        lambda record, now: log.append(("audit", record["rule"])),
        lambda: "digest",
    )


def test_a_decisions_events_are_journaled_before_any_of_its_records_is_audited() -> None:
    log: list[tuple[str, Any]] = []
    granted = {"verdict": None, "rule": "approval.granted", "reason": "a person allowed this call"}
    _path(log).settle([GRANT], [granted], 1.0)  # type: ignore[list-item]
    assert log == [("journal", [GRANT]), ("audit", "approval.granted")]


def test_a_verdicts_events_are_journaled_before_its_record_and_reply() -> None:
    log: list[tuple[str, Any]] = []
    session = Session("s1", 0.0, client=ClientInfo(name="claude-code"))
    judged = Judged(session, "mail", 1, "send_email", Verdict("allow", "default.allow", "ok"), {})
    reply = _path(log).deliver(4, judged, 1.0, [GRANT])  # type: ignore[list-item]
    assert log == [("journal", [GRANT]), ("audit", "default.allow")]
    assert (reply["id"], reply["verdict"]) == (4, "allow")


def test_nothing_to_journal_writes_no_empty_journal_entry() -> None:
    """The benign twin: a decision without events (a wrong code) costs no journal write."""
    log: list[tuple[str, Any]] = []
    wrong = {"verdict": None, "rule": "approval.wrong_code", "reason": "not open"}
    _path(log).settle([], [wrong], 1.0)
    assert log == [("audit", "approval.wrong_code")]


def test_the_approvals_desk_journals_nothing_of_its_own() -> None:
    """Its decisions reach the journal only through the verdict path it is handed."""
    assert "journal" not in inspect.signature(approvals.ApprovalDesk).parameters
    tree = ast.parse(inspect.getsource(approvals))
    called = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert "journal" not in called and "settle" in called


def _untyped_writes(source: str) -> list[int]:
    """Lines where a dict literal is handed straight to an audit writer (append, audit_append, _audit,
    audit, append_record) instead of a variable typed as one of the record kinds."""
    writers = {"append", "audit_append", "_audit", "audit"}
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Dict):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        keys = {k.value for k in node.args[0].keys if isinstance(k, ast.Constant)}
        if name in writers and "rule" in keys:
            lines.append(node.lineno)
    return lines


def test_no_server_module_hands_the_audit_log_an_untyped_record() -> None:
    found = {
        path.name: lines
        for path in sorted(SERVER_DIR.glob("*.py"))
        if (lines := _untyped_writes(path.read_text(encoding="utf-8")))
    }
    assert found == {}, f"audit records built as bare dicts (type them in core/auditrecords.py): {found}"


def test_the_untyped_write_check_catches_a_bare_dict() -> None:
    """The check above can fail: a bare dict handed to the log is found."""
    bare = 'self.audit_append({"verdict": None, "rule": "pins.accepted", "reason": "x"}, now)\n'
    typed = 'record: EventRecord = {"verdict": None, "rule": "pins.accepted", "reason": "x"}\n'
    assert _untyped_writes(bare) == [1]
    assert _untyped_writes(typed + "self.audit_append(record, now)\n") == []


def _untyped_records(source: str) -> list[int]:
    """Lines where an audit record (a dict literal with "verdict", "rule" and "reason") is built other
    than as the value of a variable annotated with one of the record kinds of auditrecords.py, or
    returned by a function annotated to return one."""

    def names_a_kind(annotation: ast.expr | None) -> bool:
        return annotation is not None and any(
            isinstance(n, ast.Name) and n.id in RECORD_KINDS for n in ast.walk(annotation)
        )

    tree = ast.parse(source)
    typed = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and names_a_kind(node.annotation)
    }
    typed |= {
        id(ret.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and names_a_kind(node.returns)
        for ret in ast.walk(node)
        if isinstance(ret, ast.Return)
    }
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and id(node) not in typed:
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if {"verdict", "rule", "reason"} <= keys:
                lines.append(node.lineno)
    return lines


def test_no_core_or_server_module_builds_an_audit_record_as_a_bare_dict() -> None:
    """The core's approval records (bouncerd/core/decision.py) and every server record are built as a
    typed record kind, so mypy checks each field's name and type where the record is made."""
    found = {
        f"{path.parent.name}/{path.name}": lines
        for path in sorted([*CORE_DIR.glob("*.py"), *SERVER_DIR.glob("*.py")])
        if (lines := _untyped_records(path.read_text(encoding="utf-8")))
    }
    assert found == {}, f"audit records built as bare dicts (type them in core/auditrecords.py): {found}"


def test_the_bare_record_check_catches_an_untyped_approval_record() -> None:
    """The check above can fail: the core's old way, a dict annotated as `dict[str, Any]` and
    appended to the decision's records, is found; the typed twin is not."""
    bare = 'fields: dict[str, Any] = {"verdict": None, "rule": "approval.granted", "reason": "x"}\n'
    appended = 'out.records.append({"verdict": None, "rule": "approval.expired", "reason": "x"})\n'
    typed = 'record: ApprovalRecord = {"verdict": None, "rule": "approval.granted", "reason": "x"}\n'
    returned = 'def r() -> EventRecord:\n    return {"verdict": None, "rule": "audit.gap", "reason": "x"}\n'
    assert _untyped_records(bare) == [1]
    assert _untyped_records(appended) == [1]
    assert _untyped_records(typed) == [] and _untyped_records(returned) == []


def test_every_decision_result_carries_typed_approval_records() -> None:
    """What a decision hands the verdict path is typed, whatever its outcome (a result type added
    later is a subclass of Trail, and is checked too)."""
    results = [decision_types.Trail, *decision_types.Trail.__subclasses__()]
    assert {decision_types.CallVerdict, decision_types.AnswerVerdict, decision_types.Refusal} <= set(results)
    for result in results:
        assert get_type_hints(result)["records"] == tuple[auditrecords.ApprovalRecord, ...], result.__name__


def test_every_record_that_is_not_a_verdict_says_so_and_why() -> None:
    kinds = [
        auditrecords.EventRecord,
        auditrecords.ServerEventRecord,
        auditrecords.VouchRecord,
        auditrecords.SessionEndedRecord,
        auditrecords.ExportLossRecord,
        auditrecords.ApprovalRecord,
    ]
    for kind in kinds:
        hints = get_type_hints(kind)
        assert hints["verdict"] is type(None), kind.__name__
        assert {"rule", "reason"} <= kind.__required_keys__, kind.__name__
    # what the log puts first is named by every kind it writes, so a reader sees one shape
    verdict_fields = set(get_type_hints(auditrecords.VerdictRecord))
    assert set(auditrecords.RECORD_FIELDS) - {"ts"} <= verdict_fields
