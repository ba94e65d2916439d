"""Fault: the audit log is deleted while the daemon runs, or replaced by a forgery while it is down.

A real daemon, the mail fixture server behind a real bouncer-shim, the real `mcp` client, and
`bouncerctl audit verify`. Before, records written after the deletion went to the unlinked file and
were found nowhere, and `audit verify` said "intact: 1 records" after a restart; a forged line in place
of the log was set aside as a crash tear and verify said intact. Now the next record starts a new file
after a gap record that links to the last hash written, and verify reports the break and says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from bouncerctl.app import main
from click.testing import CliRunner
from harness import audit_records, blocked_text, connect, fixture_server, shim_params

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

# A fixture server and its shim start in about a second; this only turns a hang into a failure.
TEST_TIMEOUT = 60


def _ctl(daemon: RunningDaemon, *args: str) -> Any:
    env = {"BOUNCER_HOME": str(daemon.home), "COLUMNS": "200"}
    return CliRunner().invoke(main, list(args), env=env)


async def _read_inbox(daemon: RunningDaemon) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with connect(
            shim_params(fixture_server("mail"), daemon.home, session="audit"), "legacy"
        ) as probe:
            await probe.client.list_tools()
            assert blocked_text(await probe.client.call_tool("read_inbox", {})) is None


@pytest.mark.asyncio
async def test_audit_log_deleted_while_running_continues_in_a_new_file_and_verify_reports_the_gap(
    daemon: RunningDaemon,
) -> None:
    await _read_inbox(daemon)
    head = audit_records(daemon.home)[-1]["hash"]
    daemon.paths.audit.unlink()
    await _read_inbox(daemon)
    records = audit_records(daemon.home)
    assert records[0]["rule"] == "audit.gap" and records[0]["prev"] == head
    assert records[-1]["tool"] == "read_inbox"  # the verdict is in the file a person finds
    assert "was deleted or moved while bouncerd ran" in daemon.stderr()
    status = _ctl(daemon, "status", "--json")
    assert '"audit_gaps": [' in status.stdout and "deleted or moved" in status.stdout
    verify = _ctl(daemon, "audit", "verify")
    assert verify.exit_code == 1
    assert "audit chain broken at audit.jsonl line 1: deleted" in verify.stderr
    assert "bouncerd noticed the loss and recorded it here" in verify.stderr


@pytest.mark.asyncio
async def test_forged_log_found_at_restart_is_set_aside_and_verify_reports_a_break(
    daemon: RunningDaemon,
) -> None:
    await _read_inbox(daemon)
    daemon.stop()  # the journal keeps the last audit hash written
    head = audit_records(daemon.home)[-1]["hash"]
    daemon.paths.audit.write_bytes(
        b'{"ts":"2026-01-01T00:00:00.000Z","verdict":"allow","rule":"default.allow"'
    )
    daemon.restart()
    assert "does not hold the last record bouncerd wrote to it" in daemon.stderr()
    [aside] = Path(daemon.paths.audit).parent.glob("audit.jsonl.replaced-*")
    assert aside.read_bytes().startswith(b'{"ts":"2026-01-01')
    assert not list(Path(daemon.paths.audit).parent.glob("audit.jsonl.torn-*"))  # not a crash tear
    assert audit_records(daemon.home)[0]["prev"] == head
    verify = _ctl(daemon, "audit", "verify")
    assert verify.exit_code == 1 and "intact" not in verify.stdout
    assert "bouncerd noticed the loss" in verify.stderr
