"""A second client that can do more sees more tools, and may use them without a pins accept.

`@modelcontextprotocol/server-everything` registers its elicitation tool only for a client that declares
elicitation. A person first uses it from a client that cannot elicit (its tools are pinned and its first
call closes the first-use window), then from one that can: that client is the first to be listed the
elicitation tool, so the window opens again for it (`pins.capability_profile`) and the tool is pinned as
it is, instead of being refused as unknown with no question. A tool that appears later for a client
profile already seen is still refused (tests/unit/test_pin_profiles.py holds the attack twins).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
from harness import NPM_BIN, blocked_text, connect, npm_server, shim_params

if TYPE_CHECKING:
    from daemons import RunningDaemon

EVERYTHING = "mcp-server-everything"
ELICIT_TOOL = "trigger-elicitation-request"
LIST_CHANGED = "notifications/tools/list_changed"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.npm,
    pytest.mark.skipif(
        not (NPM_BIN / EVERYTHING).exists(),
        reason="server-everything not installed; run scripts/setup --with-npm",
    ),
]
# node starts in well under a second; the bound only turns a hang into a failure.
TEST_TIMEOUT = 60


@pytest.mark.asyncio
async def test_a_tool_only_an_eliciting_client_is_listed_is_pinned_for_it(daemon: RunningDaemon) -> None:
    spec = npm_server(EVERYTHING, name="everything")
    with anyio.fail_after(TEST_TIMEOUT):
        params = shim_params(spec, daemon.home, session="plain-client")
        async with connect(params, "legacy", elicit_answer=None, kind="shim") as plain:
            await anyio.sleep(0.5)  # let the server register what it registers after initialized
            names = {t.name for t in (await plain.client.list_tools()).tools}
            assert ELICIT_TOOL not in names  # the premise: this client is not listed the tool
            echo = await plain.client.call_tool("echo", {"message": "hi"})  # closes the first-use window
            assert blocked_text(echo) is None

        params = shim_params(spec, daemon.home, session="eliciting-client")
        async with connect(params, "legacy", kind="shim") as eliciting:
            await eliciting.wait_for(lambda p: LIST_CHANGED in p.methods())
            names = {t.name for t in (await eliciting.client.list_tools()).tools}
            assert ELICIT_TOOL in names
            result = await eliciting.client.call_tool(ELICIT_TOOL, {})
            assert blocked_text(result) is None, blocked_text(result)
            assert len(eliciting.elicitation_requests) == 1  # it reached the server, which asked
