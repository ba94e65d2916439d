"""The relay is transparent: every MCP operation of our fixture server looks the same through the shim.

Each test runs one scenario with the real `mcp` client twice at once, one run straight against
tests/fixtures/servers/full.py and one through `bouncer-shim` with a real `bouncerd` answering it, in
both connection modes: "legacy" (the initialize handshake, 2025-11-25) and "auto" (server/discover,
which this server answers, so the connection runs at 2026-07-28). The two runs must give equal
normalised results. Each test also checks the direct run did what the scenario meant, so two equally
broken runs cannot pass.

The fixture's results hold no clocks or random ids, so nothing is dropped here except where a comment
says so. Every test gets a fresh daemon (the `daemon` fixture), so no pin or taint carries over from
one test into another. Each scenario lists the tools before its first call: the daemon pins a new
server's tools as they are listed, until its first tools/call closes that first-use window.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import pytest
from harness import (
    SAMPLING_MODEL,
    Probe,
    ServerSpec,
    fixture_server,
    normalise,
    run_both,
    write_policy,
)
from mcp.shared.exceptions import MCPError

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

MODES = ["legacy", "auto"]
COUNTER = "fixture://counter"
# Bounds every test body: a fixture server starts in well under a second, a scenario runs a handful of
# round trips in each of two runs at once. 60 s only turns a hang into a failure.
TEST_TIMEOUT = 60


Records = dict[str, dict[str, Path]]  # run kind ("direct", "shim") -> record name -> file


@pytest.fixture
def records(tmp_path: Path) -> Records:
    return {
        kind: {"outbox": tmp_path / f"{kind}-outbox.json", "events": tmp_path / f"{kind}-events.json"}
        for kind in ("direct", "shim")
    }


@pytest.fixture
def full(records: Records) -> Callable[[str], ServerSpec]:
    """The fixture server, writing its delivery and event records to files of its own run."""

    def spec(kind: str) -> ServerSpec:
        files = records[kind]
        return fixture_server(
            "full", env={"FIXTURE_OUTBOX": str(files["outbox"]), "FIXTURE_EVENTS": str(files["events"])}
        )

    return spec


def take(path: Path) -> list[dict[str, Any]]:
    """The records in `path`."""
    try:
        data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    return data


def event(ev: Any) -> dict[str, Any]:
    return {"event": type(ev).__name__, **dataclasses.asdict(ev)}


# The SDK marks 2025-era calls (logging/setLevel, resources/subscribe) deprecated; the tests make them on
# purpose, to check the relay still carries them.
ALLOW_DEPRECATED = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


async def call(probe: Probe, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    """A tools/call result, or the JSON-RPC error it raised, as a JSON value."""
    try:
        return normalise(await probe.client.call_tool(tool, arguments or {}))
    except MCPError as exc:
        return normalise(exc)


def texts(result: dict[str, Any]) -> list[str]:
    return [block["text"] for block in result.get("content", []) if block.get("type") == "text"]


# ---- connection and listing ------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_alter_the_handshake_or_tool_list(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec]
) -> None:
    async def scenario(probe: Probe) -> Any:
        c = probe.client
        return {
            "protocol": c.protocol_version,
            "server_info": normalise(c.server_info),
            "capabilities": normalise(c.server_capabilities),
            "instructions": c.instructions,
            "tools": normalise(await c.list_tools()),
            "errors": probe.errors,
        }

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    assert direct["protocol"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert len(direct["tools"]["tools"]) == 14
    assert relayed == direct


# ---- tool results ----------------------------------------------------------------------------------

# Text a relay could mangle: non-ASCII, a non-BMP character, U+2028 (a line break to JavaScript but
# not to JSON), an escaped newline and a quote.
AWKWARD_TEXT = 'naïve ☃ 𝄞 \u2028 two\nlines "quoted" \\ back'


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_alter_tool_results_of_any_kind(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec]
) -> None:
    async def scenario(probe: Probe) -> Any:
        await probe.client.list_tools()
        return {
            "text": await call(probe, "echo", {"text": AWKWARD_TEXT}),
            "structured": await call(probe, "weather", {"city": "Oslo"}),
            "attachments": await call(probe, "attachments"),
            "tool_error": await call(probe, "fail", {"message": "deliberate"}),
            "rpc_error": await call(probe, "fail_rpc", {"message": "deliberate"}),
            "big": await call(probe, "big", {"size": 1_000_000}),
        }

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    assert texts(direct["text"]) == [AWKWARD_TEXT]
    assert direct["structured"]["structuredContent"] == {
        "city": "Oslo",
        "temperature_c": 21.5,
        "conditions": "sunny",
    }
    assert [b["type"] for b in direct["attachments"]["content"]] == ["text", "resource", "resource_link"]
    assert direct["tool_error"]["isError"] is True
    assert direct["rpc_error"]["error"]["code"] == -32001
    assert len(texts(direct["big"])[0]) == 1_000_000
    assert relayed == direct


# The destination of the send test is one the user trusts, so every version of the decision allows it
# (the interim policy allows any destination not seen in output; the sink gate allows trusted ones).
TRUSTED = "bob@partner.example"
TRUSTING_POLICY = f"""\
version: 1
tools:
  send_message:
    trusted_destinations: [{TRUSTED}]
"""


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_delivers_an_allowed_send_exactly_once(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec], records: Records
) -> None:
    daemon.stop()
    write_policy(daemon.home, TRUSTING_POLICY)
    daemon.restart()

    async def scenario(probe: Probe) -> Any:
        await probe.client.list_tools()
        result = await call(probe, "send_message", {"to": TRUSTED, "body": "minutes attached"})
        return {"result": result, "delivered": take(records[probe.kind]["outbox"])}

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    assert direct["delivered"] == [{"tool": "send_message", "to": TRUSTED, "body": "minutes attached"}]
    assert relayed == direct


# ---- notifications ---------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_lose_or_reorder_progress_notifications(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec]
) -> None:
    async def scenario(probe: Probe) -> Any:
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        await probe.client.list_tools()
        result = await probe.client.call_tool(
            "slow", {"steps": 5, "delay": 0.01}, progress_callback=on_progress
        )
        return {"result": normalise(result), "progress": seen}

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    assert direct["progress"] == [(i, 5.0, f"step {i} of 5") for i in range(1, 6)]
    assert relayed == direct


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_passes_cancellation_on_to_the_server(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec], records: Records
) -> None:
    async def scenario(probe: Probe) -> Any:
        await probe.client.list_tools()
        started = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            started.set()

        outcome: list[Any] = []

        async def slow_call() -> None:
            # 400 steps of 50 ms: far longer than the test; only a cancellation ends it early.
            args = {"steps": 400, "delay": 0.05}
            outcome.append(await probe.client.call_tool("slow", args, progress_callback=on_progress))

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call)
            await started.wait()  # the server is inside the handler
            tg.cancel_scope.cancel()
        # The server records the cancellation when its handler is interrupted.
        with anyio.fail_after(10):
            while not records[probe.kind]["events"].exists():
                await anyio.sleep(0.02)
        after = await call(probe, "echo", {"text": "still connected"})
        return {"completed": outcome, "server_events": take(records[probe.kind]["events"]), "after": after}

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    assert direct["completed"] == []
    assert direct["server_events"] == [{"event": "cancelled", "tool": "slow"}]
    assert texts(direct["after"]) == ["still connected"]
    assert relayed == direct


@pytest.mark.asyncio
@ALLOW_DEPRECATED
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_lose_log_notifications(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec]
) -> None:
    async def scenario(probe: Probe) -> Any:
        await probe.client.list_tools()
        if mode == "legacy":
            # 2025-era level control; at 2026-07-28 the level rides each request (Client(log_level=...)).
            await probe.client.set_logging_level("info")
        results = [
            await call(probe, "log", {"message": "quiet", "level": "debug"}),
            await call(probe, "log", {"message": "loud", "level": "warning"}),
        ]
        return {"results": results, "logs": probe.logs}

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    messages = [entry["data"]["message"] for entry in direct["logs"]]
    assert messages == (["loud"] if mode == "legacy" else ["quiet", "loud"])
    assert relayed == direct


# ---- resources -------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_alter_resources(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec]
) -> None:
    async def scenario(probe: Probe) -> Any:
        c = probe.client
        return {
            "list": normalise(await c.list_resources()),
            "templates": normalise(await c.list_resource_templates()),
            "static": normalise(await c.read_resource("fixture://static/readme")),
            "templated": normalise(await c.read_resource("fixture://notes/plans")),
            "counter": normalise(await c.read_resource(COUNTER)),
        }

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    assert direct["templated"]["contents"][0]["text"] == "Note called plans."
    assert relayed == direct


@pytest.mark.asyncio
@ALLOW_DEPRECATED
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_lose_resource_update_notifications(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec]
) -> None:
    async def scenario(probe: Probe) -> Any:
        c = probe.client
        await c.list_tools()
        if mode == "legacy":
            await c.subscribe_resource(COUNTER)
            bumped = await call(probe, "bump_counter")
            await probe.wait_for(lambda p: "notifications/resources/updated" in p.methods())
            updates = [n for n in probe.notifications if n["method"] == "notifications/resources/updated"]
        else:
            # 2026-07-28 has no resources/subscribe: updates arrive on a subscriptions/listen stream.
            async with c.listen(resource_subscriptions=[COUNTER]) as sub:
                bumped = await call(probe, "bump_counter")
                with anyio.fail_after(10):
                    updates = [event(await sub.__anext__())]
        return {"bumped": bumped, "updates": updates, "now": normalise(await c.read_resource(COUNTER))}

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    assert len(direct["updates"]) == 1
    assert json.loads(direct["now"]["contents"][0]["text"]) == {"counter": 1}
    assert relayed == direct


# ---- prompts and completions -----------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_alter_prompts_or_completions(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec]
) -> None:
    async def scenario(probe: Probe) -> Any:
        c = probe.client
        prompt_ref = types.PromptReference(type="ref/prompt", name="greet")
        template_ref = types.ResourceTemplateReference(type="ref/resource", uri="fixture://notes/{name}")
        return {
            "list": normalise(await c.list_prompts()),
            "get": normalise(await c.get_prompt("greet", {"name": "Ann", "style": "pirate"})),
            "complete_prompt": normalise(await c.complete(prompt_ref, {"name": "name", "value": "al"})),
            "complete_template": normalise(await c.complete(template_ref, {"name": "name", "value": "b"})),
        }

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    assert direct["complete_prompt"]["completion"]["values"] == ["alice", "alfred"]
    assert relayed == direct


# ---- list_changed ----------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_lose_tool_list_changes(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec]
) -> None:
    async def scenario(probe: Probe) -> Any:
        c = probe.client
        before = [t.name for t in (await c.list_tools()).tools]
        if mode == "legacy":
            added = await call(probe, "add_tool", {"name": "extra"})
            await probe.wait_for(lambda p: "notifications/tools/list_changed" in p.methods())
            changes = [n for n in probe.notifications if n["method"] == "notifications/tools/list_changed"]
        else:
            async with c.listen(tools_list_changed=True) as sub:
                added = await call(probe, "add_tool", {"name": "extra"})
                with anyio.fail_after(10):
                    changes = [event(await sub.__anext__())]
        after = normalise(await c.list_tools())
        extra = await call(probe, "extra", {"value": "v"})
        return {"before": before, "added": added, "changes": changes, "after": after, "extra": extra}

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    assert "extra" not in direct["before"]
    assert len(direct["changes"]) == 1
    assert "extra" in [t["name"] for t in direct["after"]["tools"]]
    assert texts(direct["extra"]) == ["extra: v"]
    # Not a relay difference but the pinning rule: "extra" appeared after the server's first tools/call
    # closed its first-use window, so the daemon refuses it until a person pins it. The refusal is a
    # normal tool result with isError, as the design requires.
    refused = relayed.pop("extra")
    direct.pop("extra")
    assert refused["isError"] is True
    assert texts(refused)[0].startswith("[bouncer blocked]")
    assert "bouncerctl pins accept full extra" in texts(refused)[0]
    assert relayed == direct


# ---- server→client requests ------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_carries_sampling_requests_both_ways(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec]
) -> None:
    # 2025-era: a sampling/createMessage request from the server, answered by the client's callback.
    # 2026-07-28: an input_required result the client fulfils and retries (Client drives the loop).
    async def scenario(probe: Probe) -> Any:
        await probe.client.list_tools()
        result = await call(probe, "ask_llm", {"prompt": "Summarise the minutes"})
        return {"result": result, "requests": probe.sampling_requests}

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    expected = f"model {SAMPLING_MODEL} said: echo of 'Summarise the minutes'"
    if mode == "auto":
        expected += " (state ask_llm:1)"
    assert texts(direct["result"]) == [expected]
    assert len(direct["requests"]) == 1
    assert relayed == direct


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_carries_elicitation_requests_both_ways(
    mode: str, daemon: RunningDaemon, full: Callable[[str], ServerSpec]
) -> None:
    async def scenario(probe: Probe) -> Any:
        await probe.client.list_tools()
        result = await call(probe, "confirm", {"question": "Archive the thread?"})
        return {"result": result, "requests": probe.elicitation_requests}

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, mode, scenario)
    expected = 'action=accept content={"confirm": true, "note": "ok"}'
    if mode == "auto":
        expected += " (state confirm:1)"
    assert texts(direct["result"]) == [expected]
    assert direct["requests"][0]["message"] == "Archive the thread?"
    assert relayed == direct


@pytest.mark.asyncio
async def test_relay_does_not_break_the_input_required_round_trip(
    daemon: RunningDaemon, full: Callable[[str], ServerSpec]
) -> None:
    # Driven by hand so the raw InputRequiredResult, and the retry carrying inputResponses and the echoed
    # requestState, both cross the relay as separate tools/call round trips.
    async def scenario(probe: Probe) -> Any:
        session = probe.client.session
        await probe.client.list_tools()
        args = {"question": "Archive the thread?"}
        first = await session.call_tool("confirm", args, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        answer: types.InputResponses = {"confirm": types.ElicitResult(action="decline")}
        final = await session.call_tool(
            "confirm",
            args,
            input_responses=answer,
            request_state=first.request_state,
            allow_input_required=True,
        )
        # requestState is dropped: the SDK seals it (RequestStateBoundary) with a key each server process
        # draws at random, so it differs between any two runs. That the relay returns it intact is shown
        # by the retry succeeding, since the server rejects a state it cannot unseal.
        return {"first": normalise(first, drop=["requestState"]), "final": normalise(final)}

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(full, daemon.home, "auto", scenario)
    assert direct["first"]["resultType"] == "input_required"
    assert texts(direct["final"]) == ["action=decline content=null (state confirm:1)"]
    assert relayed == direct
