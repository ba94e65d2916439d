"""The clients the tests install accept what `init` writes for a remote entry, and reach the server.

For Claude Code and Gemini CLI (versions pinned in tests/npm/package.json), a project config holds a
remote entry in the client's own format, with an API key header given as a ``${VAR}`` reference; the
server is the mail fixture over streamable HTTP on loopback, which answers 401 without the key.
After `bouncerctl init` the client's ``mcp list`` must show the entry as the shim's bridge and
Connected (the client started it, the bridge carried the key, the server answered), with no
configuration warning; undo gives back the original bytes.
"""

from __future__ import annotations

import json
import sys

import pytest
import test_real_clients
from harness import NPM_BIN, SHIM
from remotes import REMOTE_FIXTURE, free_port, remote_server
from test_real_clients import Sandbox

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.npm,
    pytest.mark.skipif(
        not (NPM_BIN / "claude").exists(), reason="clients not installed; scripts/setup --with-npm"
    ),
]

KEY = "k-51b7e0aa"

sandbox = test_real_clients.sandbox  # the same fixture: a temporary HOME and project, the test's daemon


def mail_server() -> tuple[list[str], int]:
    port = free_port()
    argv = [
        sys.executable,
        str(REMOTE_FIXTURE),
        "mail",
        "--port",
        str(port),
        "--require-header",
        f"X-Api-Key={KEY}",
    ]
    return argv, port


def test_claude_code_connects_to_a_remote_entry_wrapped_through_the_bridge(sandbox: Sandbox) -> None:
    argv, port = mail_server()
    with remote_server(argv, port, "/mcp") as url:
        sandbox.write(sandbox.home / ".claude" / "settings.json", '{"enableAllProjectMcpServers": true}')
        entry = {"type": "http", "url": url, "headers": {"X-Api-Key": "${MAIL_KEY}"}}
        config = sandbox.write(sandbox.project / ".mcp.json", json.dumps({"mcpServers": {"mail": entry}}))
        original = config.read_bytes()
        sandbox.init("--client", "claude-code")
        listed = sandbox.run(str(NPM_BIN / "claude"), "mcp", "list", env=sandbox.env(MAIL_KEY=KEY))
        out = listed.stdout + listed.stderr
        assert listed.returncode == 0, out
        (line,) = [line for line in out.splitlines() if line.startswith("mail:")]
        assert f"{SHIM.name} --name mail --url {url}" in line and str(SHIM) not in line, out  # project file
        assert "✔ Connected" in line, out
        assert KEY not in config.read_text()
        sandbox.init("--client", "claude-code", "--undo")
        assert config.read_bytes() == original


def test_gemini_cli_connects_to_a_remote_entry_wrapped_through_the_bridge(sandbox: Sandbox) -> None:
    argv, port = mail_server()
    with remote_server(argv, port, "/mcp") as url:
        trusted = {str(sandbox.project): "TRUST_FOLDER"}
        sandbox.write(sandbox.home / ".gemini" / "trustedFolders.json", json.dumps(trusted))
        entry = {"httpUrl": url, "headers": {"X-Api-Key": "${MAIL_KEY}"}}
        text = json.dumps({"mcpServers": {"mail": entry}}, indent=2)
        config = sandbox.write(sandbox.project / ".gemini" / "settings.json", text)
        sandbox.init("--client", "gemini")
        listed = sandbox.run(str(NPM_BIN / "gemini"), "mcp", "list", env=sandbox.env(MAIL_KEY=KEY))
        out = listed.stdout + listed.stderr
        assert listed.returncode == 0, out
        assert "Invalid configuration" not in out and "Unrecognized key" not in out, out
        (line,) = [line for line in out.splitlines() if "mail:" in line]
        assert f"{SHIM.name} --name mail --url {url}" in line and str(SHIM) not in line, out  # project file
        assert line.rstrip().endswith("Connected") and "Disconnected" not in line, out
        sandbox.init("--client", "gemini", "--undo")
        assert config.read_text() == text
