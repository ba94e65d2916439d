"""A remote server that fails gives the client a clear error naming it and what to run, never a hang.

Each case is a way a hosted server goes wrong: nothing listening, an answer of 401, 403 or 5xx, a
server that accepts the request and never answers, a server that goes away mid-session. In each
the client's request is answered (within the bridge's named timeout where the server is silent)
with a JSON-RPC error that names the server and a command, and no call reaches a server without a
verdict: the audit holds none for a server that never answered the handshake.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest
from harness import audit_records, connect
from mcp.shared.exceptions import MCPError
from remotes import REMOTE_FIXTURE, bridge_params, fixture_remote, free_port, remote_server

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

# Bounds a test body; the hang case waits out the bridge's --timeout (SILENCE) first.
TEST_TIMEOUT = 60
SILENCE = "2"


def mcp_error(exc: BaseException) -> MCPError:
    """The MCPError inside `exc` (the client raises it wrapped in task-group exception groups)."""
    while isinstance(exc, BaseExceptionGroup):
        assert len(exc.exceptions) == 1, exc
        exc = exc.exceptions[0]
    assert isinstance(exc, MCPError), repr(exc)
    return exc


async def handshake_error(params: object) -> str:
    try:
        async with connect(params, "legacy", kind="shim"):  # type: ignore[arg-type]
            pass
    except BaseException as exc:
        return str(mcp_error(exc))
    raise AssertionError("the handshake succeeded against a failing server")


@pytest.mark.asyncio
async def test_server_down_is_a_clear_error_not_a_hang(daemon: RunningDaemon) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    with anyio.fail_after(TEST_TIMEOUT):
        text = await handshake_error(bridge_params("tracker", url, daemon.home))
    assert "'tracker'" in text and "cannot connect" in text and "bouncerctl doctor" in text, text


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("status", "says"),
    [
        (401, "bouncerctl auth login tracker"),
        (403, "403 Forbidden"),
        (500, "HTTP 500"),
        (503, "HTTP 503"),
    ],
)
async def test_server_refusing_or_failing_names_the_server_and_the_command(
    status: int, says: str, daemon: RunningDaemon
) -> None:
    with anyio.fail_after(TEST_TIMEOUT), fixture_remote("mail", fail=status) as url:
        text = await handshake_error(bridge_params("tracker", url, daemon.home))
    assert "'tracker'" in text and says in text, text
    assert not [r for r in audit_records(daemon.home) if r.get("server") == "tracker" and r.get("tool")]


@pytest.mark.asyncio
async def test_server_that_never_answers_is_cut_off_at_the_named_timeout(daemon: RunningDaemon) -> None:
    with anyio.fail_after(TEST_TIMEOUT), fixture_remote("mail", fail=0) as url:
        params = bridge_params("tracker", url, daemon.home, extra=["--timeout", SILENCE])
        text = await handshake_error(params)
    assert "'tracker'" in text and f"no answer within {SILENCE} s" in text, text


@pytest.mark.asyncio
async def test_server_gone_mid_session_fails_the_call_with_its_name(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    outbox = tmp_path / "outbox.json"
    with anyio.fail_after(TEST_TIMEOUT), contextlib.ExitStack() as server:
        url = server.enter_context(fixture_remote("mail", env={"FIXTURE_OUTBOX": str(outbox)}))
        async with connect(bridge_params("tracker", url, daemon.home), "legacy", kind="shim") as probe:
            await probe.client.list_tools()
            server.close()  # the remote server goes away mid-session
            with pytest.raises(MCPError) as failed:
                await probe.client.call_tool("read_inbox", {})  # a read: allowed, so it goes upstream
    text = str(failed.value)
    assert "'tracker'" in text and "cannot connect" in text, text
    # It had a verdict before it was sent: nothing reaches a remote server unjudged.
    assert [r["verdict"] for r in audit_records(daemon.home) if r.get("tool") == "read_inbox"] == ["allow"]


@pytest.mark.asyncio
async def test_header_secret_is_read_from_the_environment_and_a_missing_one_is_named(
    daemon: RunningDaemon,
) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    params = bridge_params(
        "tracker", url, daemon.home, extra=["--header", "Authorization=Bearer ${TRACKER_TOKEN}"]
    )
    assert params.env is not None
    params.env.pop("TRACKER_TOKEN", None)
    with anyio.fail_after(TEST_TIMEOUT):
        text = await handshake_error(params)
    assert "${TRACKER_TOKEN}" in text and "'tracker'" in text, text


@pytest.mark.asyncio
async def test_dropped_event_stream_fails_the_call_with_the_servers_name(daemon: RunningDaemon) -> None:
    # The server starts answering on an event stream, then drops it with no result and no event id
    # to resume from: the call is answered with an error naming the server, not left waiting.
    port = free_port()
    argv = [sys.executable, str(REMOTE_FIXTURE), "x", "--port", str(port), "--drop-stream"]
    with anyio.fail_after(TEST_TIMEOUT), remote_server(argv, port, "/mcp") as url:
        async with connect(bridge_params("tracker", url, daemon.home), "legacy", kind="shim") as probe:
            await probe.client.list_tools()
            with pytest.raises(MCPError) as failed:
                await probe.client.call_tool("export", {})
    text = str(failed.value)
    assert "'tracker'" in text and "stream" in text, text
    assert [r["verdict"] for r in audit_records(daemon.home) if r.get("tool") == "export"] == ["allow"]
