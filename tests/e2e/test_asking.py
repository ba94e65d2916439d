"""Asking a person through the real shim and daemon, with the real `mcp` client: each test is named
after the failure or attack it stops.

The upstream is tests/fixtures/servers/full.py; its `send_message` records every delivery in the file
named by FIXTURE_OUTBOX, so "never forwarded" is checked where it matters, at the server. The daemon
(BOUNCER_NO_NOTIFY=1) judges a send to an address nobody vouched for as an ask. Clients:

- legacy (2025-11-25) with an elicitation callback: the shim's elicitation/create reaches the callback;
- auto (2026-07-28) with an elicitation callback: the ask is an input_required round trip driven by the
  SDK's own retry loop;
- either without a callback: the refusal names a one-time code for `bouncerctl approve`;
- raw JSON-RPC lines (for the tampered requestState, which no SDK client would send).
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import anyio
import mcp_types as types
import pytest
from daemons import RunningDaemon
from harness import SHIM, audit_records, blocked_text, fixture_server, shim_params
from mcp import Client
from mcp.client.session import ClientRequestContext

from bouncerd.client import Client as DaemonClient

pytestmark = pytest.mark.e2e

BOB = "bob@partner.example"
CODE_HINT = re.compile(r"`bouncerctl approve ([0-9A-HJKMNP-TV-Z]{3}-[0-9A-HJKMNP-TV-Z]{3})`")
TEST_TIMEOUT = 30.0  # a bound, never an expectation: each test takes a few seconds
# An upstream tool with a round of its own (full.py's `confirm` asks through input_required at
# 2026-07-28), gated here as a send so that Bouncer asks about it too. Its round repeats the question,
# which taints the destination in it (rightly: a deny on the retry); `on_tainted: ask` makes that a
# second question instead, so Bouncer's round nests inside the upstream's.
CONFIRM_IS_A_SEND = """\
version: 1
tools:
  confirm:
    exfiltrating: true
    sink_params: [question]
    on_tainted: ask
"""

Elicit = Callable[[ClientRequestContext, types.ElicitRequestParams], Awaitable[types.ElicitResult]]


def outbox(daemon: RunningDaemon) -> Path:
    return daemon.home / "outbox.json"


def deliveries(daemon: RunningDaemon) -> list[dict[str, Any]]:
    try:
        records: list[dict[str, Any]] = json.loads(outbox(daemon).read_text())
    except FileNotFoundError:
        return []
    return records


@asynccontextmanager
async def client(daemon: RunningDaemon, mode: str, elicit: Elicit | None) -> AsyncIterator[Client]:
    """The real SDK client through the real shim to full.py; no elicitation capability without `elicit`."""
    spec = fixture_server("full", env={"FIXTURE_OUTBOX": str(outbox(daemon))})
    async with Client(
        shim_params(spec, daemon.home, session="s1"), mode=mode, elicitation_callback=elicit, cache=None
    ) as c:
        await c.list_tools()  # pins the tools on first use
        yield c


def person(*choices: str, asked: list[str] | None = None) -> Elicit:
    """An elicitation callback that answers Bouncer's questions with `choices` in turn (a choice of
    "decline" declines) and accepts any other form with confirm=True."""
    answers = list(choices)

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        schema = getattr(params, "requested_schema", None) or {}
        if "choice" not in schema.get("properties", {}):
            return types.ElicitResult(action="accept", content={"confirm": True})
        if asked is not None:
            asked.append(params.message)
        choice = answers.pop(0)
        if choice == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"choice": choice})

    return elicit


def rules(daemon: RunningDaemon, tool: str = "send_message") -> list[str]:
    return [r["rule"] for r in audit_records(daemon.home) if r.get("tool") == tool]


# ---- elicitation (2025-11-25) -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_person_allowing_through_elicitation_runs_the_send_exactly_once(start: Any) -> None:
    daemon = start()
    asked: list[str] = []
    with anyio.fail_after(TEST_TIMEOUT):
        async with client(daemon, "legacy", person("once", asked=asked)) as c:
            sent = await c.call_tool("send_message", {"to": BOB, "body": "minutes attached"})
    assert blocked_text(sent) is None, sent
    assert deliveries(daemon) == [{"tool": "send_message", "to": BOB, "body": "minutes attached"}]
    (question,) = asked
    assert "send_message" in question and BOB in question
    assert rules(daemon)[-3:] == ["sink.unproven", "approval.granted", "approval.elicited"]


@pytest.mark.asyncio
async def test_person_declining_through_elicitation_means_the_server_never_sees_the_send(start: Any) -> None:
    daemon = start()
    with anyio.fail_after(TEST_TIMEOUT):
        async with client(daemon, "legacy", person("decline")) as c:
            refused = await c.call_tool("send_message", {"to": BOB, "body": "minutes attached"})
    text = blocked_text(refused)
    assert text is not None and "declined" in text
    assert deliveries(daemon) == []
    assert rules(daemon)[-1] == "approval.declined"


@pytest.mark.asyncio
async def test_unanswered_elicitation_is_denied_at_the_timeout(start: Any) -> None:
    daemon = start("version: 1\napproval_timeout: 2\n")
    called = anyio.Event()

    async def never(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        called.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    with anyio.fail_after(TEST_TIMEOUT):
        async with client(daemon, "legacy", never) as c:
            refused = await c.call_tool("send_message", {"to": BOB, "body": "minutes attached"})
    assert called.is_set()
    text = blocked_text(refused)
    assert text is not None and "nobody answered in time" in text
    assert CODE_HINT.search(text), text  # a person can still approve it from a terminal
    assert deliveries(daemon) == []
    assert rules(daemon)[-2:] == ["approval.timeout", "approval.timeout"]


# ---- input_required (2026-07-28) ----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_person_allowing_through_input_required_runs_the_send_exactly_once(start: Any) -> None:
    daemon = start()
    asked: list[str] = []
    with anyio.fail_after(TEST_TIMEOUT):
        async with client(daemon, "auto", person("once", asked=asked)) as c:
            assert c.session.protocol_version == "2026-07-28"
            sent = await c.call_tool("send_message", {"to": BOB, "body": "minutes attached"})
    assert blocked_text(sent) is None, sent
    assert deliveries(daemon) == [{"tool": "send_message", "to": BOB, "body": "minutes attached"}]
    assert len(asked) == 1 and BOB in asked[0]
    assert rules(daemon)[-3:] == ["sink.unproven", "approval.granted", "approval.elicited"]


@pytest.mark.asyncio
async def test_person_declining_through_input_required_means_the_server_never_sees_the_send(
    start: Any,
) -> None:
    daemon = start()
    with anyio.fail_after(TEST_TIMEOUT):
        async with client(daemon, "auto", person("decline")) as c:
            refused = await c.call_tool("send_message", {"to": BOB, "body": "minutes attached"})
    text = blocked_text(refused)
    assert text is not None and "declined" in text
    assert deliveries(daemon) == []


@pytest.mark.asyncio
async def test_bouncers_round_and_the_upstreams_own_round_both_complete(start: Any) -> None:
    """Bouncer asks, the upstream then asks for its own input, and Bouncer asks again about that retry
    (a "once" covers one call): the upstream's state and answer must survive Bouncer's second round."""
    daemon = start(CONFIRM_IS_A_SEND)
    asked: list[str] = []
    with anyio.fail_after(TEST_TIMEOUT):
        async with client(daemon, "auto", person("once", "once", asked=asked)) as c:
            done = await c.call_tool("confirm", {"question": "https://reports.example/q3"})
    assert blocked_text(done) is None, done
    assert isinstance(done.content[0], types.TextContent)
    assert done.content[0].text == 'action=accept content={"confirm": true} (state confirm:1)'
    assert len(asked) == 2
    assert rules(daemon, "confirm").count("approval.elicited") == 2


# ---- clients that cannot ask --------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_client_without_elicitation_is_refused_with_a_code_a_person_can_copy(
    start: Any, mode: str
) -> None:
    daemon = start()
    with anyio.fail_after(TEST_TIMEOUT):
        async with client(daemon, mode, None) as c:
            refused = await c.call_tool("send_message", {"to": BOB, "body": "minutes attached"})
    text = blocked_text(refused)
    assert text is not None and text.startswith("[bouncer blocked] ")
    match = CODE_HINT.search(text)
    assert match is not None, text
    with DaemonClient.connect(daemon.paths, role="ctl") as ctl:
        assert [p["code"] for p in ctl.request("pending")["pending"]] == [match.group(1)]
    assert deliveries(daemon) == []


# ---- a client that forges Bouncer's requestState ------------------------------------------------------


class RawClient:
    """The shim driven with raw 2026-07-28 JSON-RPC lines (what an SDK client would never send)."""

    META: ClassVar[dict[str, Any]] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }

    def __init__(self, daemon: RunningDaemon) -> None:
        env = {
            **os.environ,
            "BOUNCER_HOME": str(daemon.home),
            "BOUNCER_NO_AUTOSTART": "1",
            "BOUNCER_SESSION": "raw",
            "FIXTURE_OUTBOX": str(outbox(daemon)),
        }
        full = fixture_server("full").args[0]
        self.process = subprocess.Popen(
            [str(SHIM), "--name", "full", "--", sys.executable, full],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.put(raw)

    def request(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": method,
            "params": {**params, "_meta": self.META},
        }
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            answer: dict[str, Any] = json.loads(self.lines.get(timeout=TEST_TIMEOUT))
            if answer.get("id") == self.next_id:
                return answer

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


def accept_once() -> dict[str, Any]:
    return {"bouncer_approval": {"action": "accept", "content": {"choice": "once"}}}


def tamper(state: str) -> str:
    """Flip one character of the state's MAC. Not the last: base64's last character carries padding
    bits, and two of its values can decode to the same MAC (the tampering would go unnoticed)."""
    i = len(state) - 6
    return state[:i] + ("A" if state[i] != "A" else "B") + state[i + 1 :]


def test_tampered_or_replayed_request_state_is_denied_and_the_server_never_sees_it(start: Any) -> None:
    daemon = start()
    raw = RawClient(daemon)
    try:
        raw.request("server/discover")
        raw.request("tools/list")
        args = {"to": BOB, "body": "minutes attached"}
        first = raw.request("tools/call", name="send_message", arguments=args)["result"]
        assert first["resultType"] == "input_required"
        state = first["requestState"]
        forged = raw.request(
            "tools/call",
            name="send_message",
            arguments=args,
            requestState=tamper(state),
            inputResponses=accept_once(),
        )
        assert forged["result"]["isError"] is True
        assert "was refused" in forged["result"]["content"][0]["text"]
        other = {"to": "eve@elsewhere.example", "body": "minutes attached"}  # the state of another call
        moved = raw.request(
            "tools/call",
            name="send_message",
            arguments=other,
            requestState=state,
            inputResponses=accept_once(),
        )
        assert moved["result"]["isError"] is True
        assert deliveries(daemon) == []
        good = raw.request(
            "tools/call",
            name="send_message",
            arguments=args,
            requestState=state,
            inputResponses=accept_once(),
        )
        assert good["result"].get("isError") is not True, good
        replayed = raw.request(
            "tools/call",
            name="send_message",
            arguments=args,
            requestState=state,
            inputResponses=accept_once(),
        )
        assert replayed["result"]["isError"] is True
    finally:
        raw.close()
    assert deliveries(daemon) == [{"tool": "send_message", "to": BOB, "body": "minutes attached"}]
    bad = [
        r for r in audit_records(daemon.home) if r["rule"] == "approval.bad_state" and r["verdict"] is None
    ]
    assert len(bad) == 3  # tampered, another call's, replayed
