"""Nothing unprotected is silent: a server the client starts past the gate is named NOT PROTECTED.

The gap this closes: init used to print "remote, left alone" once, after which `doctor` reported
"2 wrapped, 0 not" for a file that also held a remote server, and `status` and the review pack never
named it; a hijacked agent's sends through it met no gate and nothing said so. Here one Cursor
config holds a wrapped stdio server (the control: protected, never named), a stdio server not
wrapped, a remote server the bridge speaks but init has not wrapped, and a websocket server the
bridge cannot reach. `doctor`, `status` and the review pack, run against a real daemon, each name the
three unprotected ones with the command that would protect them (none for the websocket: the reason
says what to change instead).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bouncerctl.app import main
from click.testing import CliRunner
from harness import SHIM

pytestmark = pytest.mark.e2e

SERVERS = {
    "fs": {"command": "/opt/bin/bouncer-shim", "args": ["--name", "fs", "--", "npx", "fs"]},
    "notes": {"command": "npx", "args": ["-y", "notes-server"]},
    "tracker": {"url": "https://mcp.tracker.example/mcp"},
    "chat": {"type": "ws", "url": "wss://chat.example/mcp"},
}


@pytest.fixture
def user_home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="h", dir="/tmp"))
    (path / ".cursor").mkdir()
    (path / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": SERVERS}))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def invoke(home: Path, user_home: Path, *args: str) -> Any:
    env = {"BOUNCER_HOME": str(home), "HOME": str(user_home), "COLUMNS": "400", "NO_COLOR": "1"}
    return CliRunner().invoke(main, list(args), env=env)


def assert_names_the_unprotected(text: str) -> None:
    flat = " ".join(text.split())
    assert (
        "NOT PROTECTED notes (cursor" in flat
        and "run: bouncerctl init --client cursor --server notes" in flat
    )
    assert (
        "NOT PROTECTED tracker (cursor" in flat
        and "run: bouncerctl init --client cursor --server tracker" in flat
    )
    assert "NOT PROTECTED chat (cursor" in flat and "does not speak type 'ws'" in flat
    assert "--server chat" not in flat  # no command would protect it: none is offered
    assert "NOT PROTECTED fs" not in flat  # the wrapped one is protected


def test_doctor_names_every_unprotected_server_with_its_command(daemon: Any, user_home: Path) -> None:
    result = invoke(daemon.home, user_home, "doctor")
    assert result.exit_code == 0, result.output
    assert "1 wrapped, 3 not" in result.stdout  # the remote ones count as not wrapped
    assert_names_the_unprotected(result.stdout)


def test_status_names_every_unprotected_server_in_text_and_json(daemon: Any, user_home: Path) -> None:
    text = invoke(daemon.home, user_home, "status")
    assert text.exit_code == 0, text.output
    assert_names_the_unprotected(text.stdout)
    as_json = invoke(daemon.home, user_home, "status", "--json")
    listed = {item["name"]: item for item in json.loads(as_json.stdout)["unprotected"]}
    assert set(listed) == {"notes", "tracker", "chat"}
    assert listed["chat"]["command"] is None


def test_review_pack_lists_unprotected_servers_as_high_findings(daemon: Any, user_home: Path) -> None:
    out = user_home / "pack.md"
    result = invoke(daemon.home, user_home, "report", "-o", str(out))
    assert result.exit_code == 0, result.output
    pack = out.read_text()
    assert "NOT PROTECTED" in pack
    flat = " ".join(pack.split())
    for name in ("notes", "tracker", "chat"):
        assert f"{name} (cursor" in flat, name
    assert "bouncerctl init --client cursor --server tracker" in flat


def test_init_names_a_remote_server_it_cannot_bridge(daemon: Any, user_home: Path) -> None:
    result = invoke(daemon.home, user_home, "init", "--client", "cursor", "--yes", "--shim", str(SHIM))
    assert result.exit_code == 0, result.output
    flat = " ".join(result.stdout.split())
    assert (
        "NOT PROTECTED (remote; the bridge cannot reach it): chat: the bridge does not speak type 'ws'"
        in flat
    )
    assert "through the bridge" in flat and "tracker → https://mcp.tracker.example/mcp" in flat
    after = invoke(daemon.home, user_home, "doctor")
    flat = " ".join(after.stdout.split())
    assert (
        "NOT PROTECTED chat" in flat
        and "NOT PROTECTED tracker" not in flat
        and "NOT PROTECTED notes" not in flat
    )
