"""The MCP clients people run, installed from npm (tests/npm/package.json), against `bouncerctl init`'s work.

Each test writes a client's own config in a temporary HOME, runs the real `bouncerctl init` on it, and
asks the real client (no model, no network) what it makes of the result:

- Claude Code: ``claude mcp list`` (project ``.mcp.json``, approved through ``enableAllProjectMcpServers``)
  starts every server to check its health: the wrapped one must show "✔ Connected";
- Gemini CLI: ``gemini mcp list`` (project ``.gemini/settings.json`` in a trusted folder) validates the
  settings against its schema and connects: connected, and no "Invalid configuration";
- Codex: ``codex mcp list`` / ``codex mcp get --json`` only read the config (Codex connects to servers
  only inside a model session), so the entry is checked there, and then the shim is started the way
  Codex starts it, with only HOME and PATH plus the entry's ``env``: it must reach the test's daemon;
- the MCP Inspector CLI drives a wrapped server with ``tools/list`` and ``tools/call``.

The daemon is the `daemon` fixture's (a real bouncerd in a short BOUNCER_HOME). BOUNCER_NO_AUTOSTART is
passed wherever the environment reaches, so a shim that missed the daemon fails instead of starting
another one. The clients are slow to start (node, and their own start-up work); the per-command
timeout only turns a hang into a failure.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest
import tomlkit
from harness import BIN, NPM_BIN, SHIM, audit_records, short_tmpdir
from mcp import Client, StdioServerParameters, stdio_client

if TYPE_CHECKING:
    from collections.abc import Iterator

    from daemons import RunningDaemon

CLIENTS = {"claude": "Claude Code", "gemini": "Gemini CLI", "codex": "Codex", "mcp-inspector": "Inspector"}
FILESYSTEM = NPM_BIN / "mcp-server-filesystem"
BOUNCERCTL = BIN / "bouncerctl"
# Bounds one client command: each starts in seconds; a minute only turns a hang into a failure.
COMMAND_TIMEOUT = 60


def _missing() -> str:
    return ", ".join(name for name in [*CLIENTS, FILESYSTEM.name] if not (NPM_BIN / name).exists())


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.npm,
    pytest.mark.skipif(
        bool(_missing()), reason=f"not installed ({_missing()}); run scripts/setup --with-npm"
    ),
]

# What keeps the clients quiet and offline: no update checks, telemetry or colour codes in the output.
QUIET = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "NO_COLOR": "1",
    "CI": "1",
}


class Sandbox:
    """A temporary HOME with a project directory; commands run there with a small environment."""

    def __init__(self, root: Path, daemon: RunningDaemon) -> None:
        self.home = root / "h"
        self.project = root / "p"
        self.home.mkdir()
        self.project.mkdir()
        (self.project / "notes.txt").write_text("hello from the project\n")
        self.daemon = daemon

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            # a project file names the shim by its command name: the client finds it on PATH
            "PATH": f"{SHIM.parent}{os.pathsep}{os.environ['PATH']}",
            "BOUNCER_HOME": str(self.daemon.home),
            "BOUNCER_NO_AUTOSTART": "1",
            "BOUNCER_NO_NOTIFY": "1",
            **QUIET,
            **extra,
        }

    def run(self, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            cwd=self.project,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def init(self, *args: str) -> str:
        done = self.run(str(BOUNCERCTL), "init", "--yes", "--no-hooks", "--shim", str(SHIM), *args)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def write(self, path: Path, text: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path


@pytest.fixture
def sandbox(daemon: RunningDaemon) -> Iterator[Sandbox]:
    root = short_tmpdir("c")
    try:
        yield Sandbox(root, daemon)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _fs_entry(sandbox: Sandbox) -> dict[str, object]:
    return {"command": str(FILESYSTEM), "args": [str(sandbox.project)]}


def test_claude_code_lists_the_wrapped_server_connected(sandbox: Sandbox) -> None:
    """Stops: an init whose entry Claude Code cannot start, or shows with a warning."""
    sandbox.write(sandbox.home / ".claude" / "settings.json", '{"enableAllProjectMcpServers": true}')
    config = sandbox.write(
        sandbox.project / ".mcp.json", json.dumps({"mcpServers": {"fs": _fs_entry(sandbox)}})
    )
    original = config.read_bytes()
    sandbox.init("--client", "claude-code")
    listed = sandbox.run(str(NPM_BIN / "claude"), "mcp", "list")
    out = listed.stdout + listed.stderr
    assert listed.returncode == 0, out
    (line,) = [line for line in out.splitlines() if line.startswith("fs:")]
    assert f"{SHIM.name} --name fs -- {FILESYSTEM}" in line and str(SHIM) not in line  # no machine path
    assert "✔ Connected" in line, out
    assert "warning" not in out.lower() and "invalid" not in out.lower(), out
    sandbox.init("--client", "claude-code", "--undo")
    assert config.read_bytes() == original


def test_gemini_cli_lists_the_wrapped_server_connected_without_a_configuration_warning(
    sandbox: Sandbox,
) -> None:
    """Stops: "Invalid configuration … Unrecognized key(s) in object: 'x-bouncer-upstream'" on every start."""
    trusted = {str(sandbox.project): "TRUST_FOLDER"}
    sandbox.write(sandbox.home / ".gemini" / "trustedFolders.json", json.dumps(trusted))
    text = json.dumps({"mcpServers": {"fs": _fs_entry(sandbox)}}, indent=2)
    config = sandbox.write(sandbox.project / ".gemini" / "settings.json", text)
    sandbox.init("--client", "gemini")
    listed = sandbox.run(str(NPM_BIN / "gemini"), "mcp", "list")
    out = listed.stdout + listed.stderr
    assert listed.returncode == 0, out
    assert "Invalid configuration" not in out and "Unrecognized key" not in out, out
    (line,) = [line for line in out.splitlines() if "fs:" in line]
    assert f"{SHIM.name} --name fs -- {FILESYSTEM}" in line and str(SHIM) not in line  # no machine path
    assert line.rstrip().endswith("Connected") and "Disconnected" not in line, out
    sandbox.init("--client", "gemini", "--undo")
    assert config.read_text() == text


def test_codex_shows_the_wrapped_entry_and_its_shim_reaches_the_daemon_with_a_stripped_environment(
    sandbox: Sandbox,
) -> None:
    """Stops: a Codex shim (started with only HOME and PATH) talking to another daemon, or to none."""
    codex_home = sandbox.home / ".codex"
    text = (
        f'# mine\nmodel = "o3"\n\n[mcp_servers.fs]\ncommand = "{FILESYSTEM}"\nargs = ["{sandbox.project}"]\n'
    )
    config = sandbox.write(codex_home / "config.toml", text)
    sandbox.init("--client", "codex")
    env = sandbox.env(CODEX_HOME=str(codex_home))
    listed = sandbox.run(str(NPM_BIN / "codex"), "mcp", "list", env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    (line,) = [line for line in listed.stdout.splitlines() if line.startswith("fs ")]
    assert str(SHIM) in line and "enabled" in line
    got = sandbox.run(str(NPM_BIN / "codex"), "mcp", "get", "fs", "--json", env=env)
    assert got.returncode == 0, got.stdout + got.stderr
    transport = json.loads(got.stdout)["transport"]
    assert transport["command"] == str(SHIM)
    assert transport["args"] == ["--name", "fs", "--", str(FILESYSTEM), str(sandbox.project)]
    assert transport["env"] == {"BOUNCER_HOME": str(sandbox.daemon.home)}
    assert tomlkit.parse(config.read_text())["model"] == "o3"

    # Started as Codex starts it: HOME and PATH, and the entry's env (the guard below is ours, so a shim
    # that misses the daemon fails here instead of starting a daemon of its own).
    stripped = {"HOME": str(sandbox.home), "PATH": os.environ["PATH"], "BOUNCER_NO_AUTOSTART": "1"}
    params = StdioServerParameters(
        command=transport["command"], args=transport["args"], env={**stripped, **transport["env"]}
    )

    async def call() -> str:
        with anyio.fail_after(COMMAND_TIMEOUT):
            async with Client(stdio_client(params), mode="legacy") as client:
                await client.list_tools()
                result = await client.call_tool(
                    "read_text_file", {"path": str(sandbox.project / "notes.txt")}
                )
                return "".join(getattr(part, "text", "") for part in result.content)

    assert "hello from the project" in anyio.run(call)
    assert any(
        r.get("server") == "fs" and r.get("tool") == "read_text_file"
        for r in audit_records(sandbox.daemon.home)
    )
    sandbox.init("--client", "codex", "--undo")
    assert config.read_text() == text


def _inspect(sandbox: Sandbox, *method: str) -> subprocess.CompletedProcess[str]:
    # The Inspector, like Codex, gives a server only a few variables of its own environment: what the
    # shim needs is passed with -e, as a wrapped entry's env would.
    return sandbox.run(
        str(NPM_BIN / "mcp-inspector"),
        "--cli",
        str(SHIM),
        "--name",
        "fs",
        "--",
        str(FILESYSTEM),
        str(sandbox.project),
        "-e",
        f"BOUNCER_HOME={sandbox.daemon.home}",
        "-e",
        "BOUNCER_NO_AUTOSTART=1",
        *method,  # last: --tool-arg takes every word after it
    )


def test_inspector_cli_lists_tools_through_the_shim(sandbox: Sandbox) -> None:
    done = _inspect(sandbox, "--method", "tools/list")
    assert done.returncode == 0, done.stdout + done.stderr
    names = {tool["name"] for tool in json.loads(done.stdout)["tools"]}
    assert {"read_text_file", "write_file", "list_directory"} <= names


def test_inspector_cli_tools_call_through_the_shim_is_decided_on_its_merits(sandbox: Sandbox) -> None:
    """The Inspector CLI (2.12) lists tools itself before a tools/call (it converts --tool-arg values by
    the tool's schema), so this is the call of a client that lists first; it must be allowed."""
    path = sandbox.project / "notes.txt"
    done = _inspect(
        sandbox, "--method", "tools/call", "--tool-name", "read_text_file", "--tool-arg", f"path={path}"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert not result.get("isError"), result
    assert "hello from the project" in json.dumps(result)


def _raw_exchange(sandbox: Sandbox, messages: list[dict[str, object]], want_id: int) -> dict[str, object]:
    """Send JSON-RPC lines to a wrapped server the way a bare stdio client does; the reply to `want_id`."""
    argv = [str(SHIM), "--name", "fs", "--", str(FILESYSTEM), str(sandbox.project)]
    with subprocess.Popen(
        argv, env=sandbox.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(proc.stdout, selectors.EVENT_READ)
                for message in messages:
                    proc.stdin.write(json.dumps(message).encode() + b"\n")
                    proc.stdin.flush()
                    if "id" not in message:
                        continue
                    while True:
                        assert selector.select(COMMAND_TIMEOUT), "no answer from the shim"
                        reply = json.loads(proc.stdout.readline())
                        if reply.get("id") == message["id"]:
                            break
                    if message["id"] == want_id:
                        return dict(reply)
            raise AssertionError(f"no message with id {want_id} was sent")
        finally:
            proc.kill()


def test_raw_client_tools_call_before_any_tools_list_in_a_fresh_home_is_decided_on_its_merits(
    sandbox: Sandbox,
) -> None:
    """Stops: a client that calls without listing (raw stdio, tool lists cached across connections,
    2026-07-28 stateless) being refused as "not in the pinned tool list"."""
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    path = str(sandbox.project / "notes.txt")
    reply = _raw_exchange(
        sandbox,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "read_text_file", "arguments": {"path": path}},
            },
        ],
        want_id=2,
    )
    assert "result" in reply, reply
    assert not reply["result"].get("isError"), reply  # type: ignore[union-attr]
    assert "hello from the project" in json.dumps(reply)
