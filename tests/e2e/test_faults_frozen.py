"""Fault: the daemon is alive but not answering (SIGSTOP). Every wait has a bound with a name.

A real daemon, the mail fixture server behind a real bouncer-shim, the real `mcp` client. The daemon is
stopped while a send it would allow waits for its verdict. Before, the shim waited without bound (45 s
observed) and, on SIGCONT, forwarded the call long after the client had given up. Now the call is
refused after `bouncer_shim.sync.VERDICT_WAIT_SECONDS` with a message saying the daemon did not
answer, and it never reaches the server, not even once the daemon answers again; the next call is
checked as usual.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from harness import blocked_text, connect, fixture_server, shim_params, write_policy

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

# The refusal comes after VERDICT_WAIT_SECONDS; this only turns a hang into a failure.
TEST_TIMEOUT = 60
# The shim reconnects within RECONNECT_FIRST_DELAY_SECONDS of giving up; 0.2 s apart, this is 10 s.
RECONNECT_TRIES = 50
BOSS = {"to": "boss@corp.example", "subject": "report", "body": "the numbers"}
POLICY = """
tools:
  send_email:
    exfiltrating: true
    sink_params: [to]
    trusted_destinations: [boss@corp.example]
"""


def _sent(outbox: Path) -> list[Any]:
    return json.loads(outbox.read_text()) if outbox.exists() else []


@pytest.mark.asyncio
async def test_verdict_from_a_stopped_daemon_is_refused_in_time_and_never_forwarded_later(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    daemon.stop()
    write_policy(daemon.home, POLICY)
    daemon.restart()
    outbox = tmp_path / "mail.json"
    mail = fixture_server("mail", env={"FIXTURE_OUTBOX": str(outbox)})
    with anyio.fail_after(TEST_TIMEOUT):
        async with connect(shim_params(mail, daemon.home, session="frozen"), "legacy") as probe:
            await probe.client.list_tools()
            assert blocked_text(await probe.client.call_tool("read_inbox", {})) is None
            os.kill(daemon.proc.pid, signal.SIGSTOP)
            try:
                refused = await probe.client.call_tool("send_email", BOSS)
            finally:
                os.kill(daemon.proc.pid, signal.SIGCONT)
            assert "did not answer in time" in (blocked_text(refused) or "")
            assert "will not be sent later" in (blocked_text(refused) or "")
            assert _sent(outbox) == []
            # The benign twin: once the shim is connected again (refused as unreachable until then),
            # the same call is checked and sent. Any late verdict for the refused call would have
            # reached the shim before this one's: the mail is sent once, not twice.
            for _ in range(RECONNECT_TRIES):
                again = blocked_text(await probe.client.call_tool("send_email", BOSS))
                if again is None or "unreachable" not in again:
                    break
                await anyio.sleep(0.2)
            assert again is None
    assert [m["to"] for m in _sent(outbox)] == ["boss@corp.example"]
