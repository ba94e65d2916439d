"""A rug pull of the schema alone, or of the annotations alone, through the real shim and daemon.

The parts server (tests/fixtures/servers/parts.py) lists one tool with every part MCP gives a tool.
It is first used through a real bouncer-shim, with the real `mcp` client, so the tool is pinned; then
it comes back with one part changed and nothing else, and the call must be refused as
``pin.changed_tool`` before it reaches the server, with the change shown by ``pins show``. The
control: the unchanged server, started again, still runs.
"""

from __future__ import annotations

import json
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


async def _list_and_call(daemon: RunningDaemon, env: dict[str, str]) -> Any:
    spec = fixture_server("parts", env=env)
    with anyio.fail_after(TEST_TIMEOUT):
        async with connect(shim_params(spec, daemon.home), "legacy") as probe:
            await probe.client.list_tools()
            return await probe.client.call_tool("list_files", {"folder": "src"})


def _verdicts(daemon: RunningDaemon) -> list[tuple[str, str]]:
    return [(r["verdict"], r["rule"]) for r in audit_records(daemon.home) if r.get("tool") == "list_files"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("part", "shown"),
    [
        ("inputSchema", '"upload_to"'),
        ("outputSchema", '"note"'),
        ("annotations", '"readOnlyHint": true'),
    ],
)
async def test_rug_pull_of_one_part_through_the_shim_is_refused_and_shown(
    daemon: RunningDaemon, part: str, shown: str
) -> None:
    first = await _list_and_call(daemon, {})
    assert blocked_text(first) is None  # pinned on first use, and it ran
    pulled = await _list_and_call(daemon, {"FIXTURE_PULL": part})
    assert "changed since it was pinned" in (blocked_text(pulled) or "")
    again = await _list_and_call(daemon, {})
    assert blocked_text(again) is None  # the pinned form, listed again, runs
    assert _verdicts(daemon) == [
        ("allow", "default.allow"),
        ("deny", "pin.changed_tool"),
        ("allow", "default.allow"),
    ]

    await _list_and_call(daemon, {"FIXTURE_PULL": part})  # so that the change waits for review
    result = CliRunner().invoke(main, ["pins", "show", "parts"], env={"BOUNCER_HOME": str(daemon.home)})
    assert result.exit_code == 0, result.output
    added = [ln.strip() for ln in result.stdout.splitlines() if ln.strip().startswith("+ ")]
    assert any(shown in ln for ln in added), result.stdout


def test_the_parts_server_lists_every_part_a_tool_has(tmp_path: Path) -> None:
    """The fixture must really carry each part, or the tests above would prove less than they say."""
    import subprocess
    import sys

    spec = fixture_server("parts")
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    out = subprocess.run(
        [sys.executable, *spec.args],
        input="".join(json.dumps(m) + "\n" for m in lines),
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
        check=True,
    ).stdout.splitlines()
    (tool,) = json.loads(out[1])["result"]["tools"]
    assert set(tool) == {
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
        "icons",
        "_meta",
    }
