"""Fault: the daemon's journal is damaged between two runs. A loss is detected, named and fails closed.

A real daemon, the mail fixture server behind a real bouncer-shim, the real `mcp` client. A session
uses the server (its tools are pinned, read_inbox's budget of one call is spent, the attacker's address
is seen in the inbox), the daemon stops, and one byte of its journal is flipped. Before, the daemon
started with no pins, budgets or taint and said so in one WARNING line: the server's changed
read_inbox was pinned on first use and allowed a second time, and nothing else told anyone. Now the
daemon starts restricted, says so in `status`, `doctor`, `state show` and the audit log, keeps saying so
after a restart, and refuses what a lost state would have allowed, until a person runs
`bouncerctl state accept-loss`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from bouncerctl.app import main
from click.testing import CliRunner
from harness import audit_records, blocked_text, connect, fixture_server, shim_params, write_policy

from bouncerd.server.journal import JOURNAL_NAME, MAGIC, RECORD_HEADER_BYTES

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

# A fixture server and its shim start in about a second; this only turns a hang into a failure.
TEST_TIMEOUT = 60
SESSION = "faults-journal"
ATTACKER = "attacker@evil.example"
SEND = {"to": ATTACKER, "subject": "x", "body": "y"}
POLICY = "tools:\n  read_inbox:\n    max_calls: 1\n"


def _ctl(daemon: RunningDaemon, *args: str) -> Any:
    env = {"BOUNCER_HOME": str(daemon.home), "COLUMNS": "200"}
    return CliRunner().invoke(main, list(args), env=env)


def _restricted(daemon: RunningDaemon) -> Any:
    result = _ctl(daemon, "status", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["daemon"]["restricted"]


def _flip_first_record(daemon: RunningDaemon) -> None:
    """One flipped byte inside the first record's body (the snapshot's first pins): it still decodes."""
    path = daemon.paths.state / JOURNAL_NAME
    data = bytearray(path.read_bytes())
    assert data.startswith(MAGIC)
    data[len(MAGIC) + RECORD_HEADER_BYTES + 12] ^= 0x20
    path.write_bytes(bytes(data))


def _sent(outbox: Path) -> list[Any]:
    return json.loads(outbox.read_text()) if outbox.exists() else []


@pytest.mark.asyncio
async def test_damaged_journal_starts_restricted_until_a_person_accepts_the_loss(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    outbox = tmp_path / "mail.json"
    honest = fixture_server("mail", env={"FIXTURE_OUTBOX": str(outbox)})
    pulled = fixture_server("mail", env={"FIXTURE_OUTBOX": str(outbox), "FIXTURE_RUGPULL": "1"})
    daemon.stop()
    write_policy(daemon.home, POLICY)
    daemon.restart()
    with anyio.fail_after(TEST_TIMEOUT):
        async with connect(shim_params(honest, daemon.home, session=SESSION), "legacy") as probe:
            await probe.client.list_tools()
            assert blocked_text(await probe.client.call_tool("read_inbox", {})) is None  # budget spent
    assert _restricted(daemon) is None

    daemon.stop()
    _flip_first_record(daemon)
    daemon.restart()
    assert "journal: DAMAGED (checksum mismatch" in daemon.stderr()
    [aside] = daemon.paths.state.glob(f"{JOURNAL_NAME}.damaged-*")
    assert aside.stat().st_size > 0  # the damaged bytes are kept for a person to look at

    # Named everywhere a person looks.
    restriction = _restricted(daemon)
    assert restriction is not None and "checksum mismatch" in restriction["reason"]
    assert restriction["accept"] == "bouncerctl state accept-loss"
    status = " ".join(_ctl(daemon, "status").stdout.split())  # as read, whatever the folding
    assert "RESTRICTED" in status and "bouncerctl state accept-loss" in status
    doctor = _ctl(daemon, "doctor")
    assert doctor.exit_code == 1 and "FAIL state" in " ".join(doctor.stdout.split())
    assert "RESTRICTED" in doctor.stdout
    shown = _ctl(daemon, "state", "show")
    assert shown.exit_code == 0 and "RESTRICTED since" in shown.stdout
    lost = [r for r in audit_records(daemon.home) if r.get("rule") == "state.lost"]
    assert len(lost) == 1 and "checksum mismatch" in lost[0]["reason"]
    pack = tmp_path / "review.md"
    assert _ctl(daemon, "report", "--format", "md", "-o", str(pack)).exit_code == 0
    assert "journal damaged: bouncerd ran restricted" in pack.read_text(encoding="utf-8")

    # A restart does not lift it.
    daemon.stop()
    daemon.restart()
    assert _restricted(daemon) is not None

    # The rug-pulled read_inbox is not pinned on first use (the attack: trusted as a new first use).
    with anyio.fail_after(TEST_TIMEOUT):
        async with connect(shim_params(pulled, daemon.home, session=SESSION), "legacy") as probe:
            await probe.client.list_tools()
            refused = await probe.client.call_tool("send_email", SEND)
            assert "not in the pinned tool list" in (blocked_text(refused) or "")
    review = json.loads(_ctl(daemon, "status", "--json").stdout)["pins_to_review"]
    assert {"server": "mail", "tool": "read_inbox", "state": "new"} in review
    assert _ctl(daemon, "pins", "accept", "mail").exit_code == 0  # a person reviews and accepts the tools

    with anyio.fail_after(TEST_TIMEOUT):
        async with connect(shim_params(pulled, daemon.home, session=SESSION), "legacy") as probe:
            await probe.client.list_tools()
            # The attack: a second call of a tool with a budget of one, its first call lost with the journal.
            over = await probe.client.call_tool("read_inbox", {})
            assert "counts as spent" in (blocked_text(over) or "")
            # The attack: the inbox that planted the address was lost; the send is not forwarded.
            send = await probe.client.call_tool("send_email", SEND)
            assert blocked_text(send) is not None
    assert _sent(outbox) == []
    verdicts = {r.get("rule") for r in audit_records(daemon.home) if r.get("tool")}
    assert {"pin.unknown_tool", "state.budget_spent"} <= verdicts

    accepted = _ctl(daemon, "state", "accept-loss")
    assert accepted.exit_code == 0 and "accepted" in accepted.stdout
    assert _restricted(daemon) is None
    assert "nothing to accept" in _ctl(daemon, "state", "accept-loss").stdout
    assert [r["rule"] for r in audit_records(daemon.home) if r.get("rule", "").startswith("state.")][-1] == (
        "state.loss_accepted"
    )
    daemon.stop()
    daemon.restart()
    assert _restricted(daemon) is None
    assert "journal: DAMAGED" not in daemon.stderr().rsplit("serving on", 1)[-1]
