"""``bouncerctl init`` on the configs of the other clients people run, and what it leaves behind.

Zed (``context_servers`` in a JSONC settings file), Cline and LM Studio (``mcpServers``), VS Code (whose
schema allows no unknown key on a stdio server), the YAML of Continue and Goose (refused, with how to
wrap by hand), a config named with ``--config`` (remembered, so a plain ``--undo`` and ``doctor`` find
it), and project files teams commit (no machine path, no env of ours, no backup beside them).

Through click's CliRunner in a temporary HOME and BOUNCER_HOME, with a fake executable bouncer-shim.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bouncerctl import init_record, jsonc
from bouncerctl import mcpconfig as mc
from bouncerctl.app import main
from click.testing import CliRunner, Result

ZED = (
    '// Zed settings\n{\n  "theme": "One Dark",\n  "context_servers": {\n'
    '    "fs": {\n      "source": "custom", // added by hand\n      "command": "npx",\n'
    '      "args": ["-y", "srv"],\n      "env": {}\n    }\n  }\n}\n'
)
CLINE = (
    '{\n  "mcpServers": {\n    "fs": {\n      "command": "npx",\n      "args": ["-y", "srv"],\n'
    '      "disabled": false,\n      "autoApprove": []\n    }\n  }\n}'
)
LMSTUDIO = '{\n  "mcpServers": {\n    "fs": {"command": "uvx", "args": ["srv"]}\n  }\n}\n'
VSCODE = '{\n\t"servers": {\n\t\t"fs": {"type": "stdio", "command": "npx", "args": ["srv"]}\n\t}\n}\n'
PROJECT = '{\n  "mcpServers": {\n    "fs": {"command": "npx", "args": ["-y", "srv"]}\n  }\n}\n'
CONTINUE = "name: mine\nversion: 0.0.1\nmcpServers:\n  - name: fs\n    command: npx\n    args: [-y, srv]\n"
GOOSE = "extensions:\n  fs:\n    type: stdio\n    cmd: npx\n    args: [-y, srv]\n    enabled: true\n"


@dataclass
class Env:
    home: Path
    bouncer: Path
    shim: Path
    project: Path
    path_dirs: str  # PATH, which holds the shim unless a test takes it away

    @property
    def vars(self) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "BOUNCER_HOME": str(self.bouncer),
            "XDG_CONFIG_HOME": "",
            "PATH": self.path_dirs,
        }

    def write(self, path: Path, text: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
        return path

    def run(self, *args: str) -> Result:
        return CliRunner().invoke(main, ["init", "--shim", str(self.shim), *args], env=self.vars)

    def leftovers(self) -> list[Path]:
        """Backups or temporary files anywhere under HOME (the project included)."""
        return sorted(p for p in self.home.rglob("*") if p.name.endswith((".bak", ".bouncer-tmp")))


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    shim = tmp_path / "bin" / "bouncer-shim"
    shim.parent.mkdir()
    shim.write_text("#!/bin/sh\nexit 0\n")
    shim.chmod(0o755)
    home = tmp_path / "home"
    project = home / "src" / "app"
    project.mkdir(parents=True)
    monkeypatch.chdir(project)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    yield Env(home, tmp_path / "b", shim, project, f"{shim.parent}:/usr/bin:/bin")


def test_zed_context_servers_are_wrapped_without_a_key_zed_does_not_know_and_undo_is_byte_identical(
    env: Env,
) -> None:
    """Stops: Zed's settings refused as 'no "mcpServers" block', or left with a key Zed does not know."""
    path = env.write(env.home / ".config/zed/settings.json", ZED)
    result = env.run("--client", "zed", "--yes")
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert "// added by hand" in text and text.startswith("// Zed settings")  # comments kept
    entry = jsonc.parse(text).value["context_servers"]["fs"]
    assert mc.UPSTREAM_KEY not in entry
    assert entry["command"] == str(env.shim)
    assert entry["args"] == ["--name", "fs", "--", "npx", "-y", "srv"]
    assert entry["source"] == "custom"
    assert env.run("--undo", "--yes").exit_code == 0
    assert path.read_bytes() == ZED.encode()
    assert env.leftovers() == []


def test_vscode_entry_keeps_only_keys_its_schema_allows_and_undo_is_byte_identical(env: Env) -> None:
    """Stops: VS Code flagging "x-bouncer-upstream" (its schema allows no unknown key on a stdio server)."""
    path = env.write(env.home / ".config/Code/User/mcp.json", VSCODE)
    assert env.run("--client", "vscode", "--yes").exit_code == 0
    entry = json.loads(path.read_text())["servers"]["fs"]
    assert set(entry) == {"type", "command", "args", "env"}
    assert entry["command"] == str(env.shim)
    assert env.run("--client", "vscode", "--undo", "--yes").exit_code == 0
    assert path.read_bytes() == VSCODE.encode()


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("cline_mcp_settings.json", CLINE),
        ("lmstudio/mcp.json", LMSTUDIO),
        ("zed/settings.json", ZED),
    ],
)
def test_a_config_named_with_config_is_found_again_by_a_plain_undo_and_by_doctor(
    env: Env, where: str, text: str
) -> None:
    """Stops: `init --undo` saying "no MCP client config found" after `init --config`, so a person who
    undoes and uninstalls leaves the client pointing at a deleted shim."""
    path = env.write(env.home / "elsewhere" / where, text)
    assert env.run("--config", str(path), "--yes").exit_code == 0
    assert str(env.shim) in path.read_text()
    doctor = CliRunner().invoke(main, ["doctor"], env=env.vars)
    assert f"{path}: 1 wrapped, 0 not" in doctor.output
    result = env.run("--undo", "--yes")  # no --config: init remembers the file
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == text.encode()
    assert init_record.remembered(env.vars) == []  # nothing left to undo: forgotten again
    assert env.leftovers() == []


def test_a_remembered_config_that_is_not_wrapped_is_reported_with_a_command_that_works(env: Env) -> None:
    """Stops: status naming `--client file` (no such client) as the fix for a server edited back by hand."""
    path = env.write(env.home / "elsewhere" / "lmstudio.json", LMSTUDIO)
    assert env.run("--config", str(path), "--yes").exit_code == 0
    path.write_text(LMSTUDIO.replace('"fs"', '"other"'))  # the person added a server by hand
    from bouncerctl import unprotected

    (item,) = unprotected.find(env.vars, env.project)
    assert item.name == "other"
    assert item.command == f"bouncerctl init --config {path} --server other"


@pytest.mark.parametrize(("name", "text"), [("continue/config.yaml", CONTINUE), ("goose/config.yaml", GOOSE)])
def test_a_yaml_config_is_refused_with_how_to_wrap_by_hand_not_misread_as_toml(
    env: Env, name: str, text: str
) -> None:
    """Stops: Continue's and Goose's YAML read as TOML ("line 1, column 4: Unexpected character")."""
    path = env.write(env.home / ".config" / name, text)
    result = env.run("--config", str(path), "--yes")
    assert result.exit_code == 1
    assert "Unexpected character" not in result.stderr
    assert "YAML" in result.stderr and "--name NAME -- COMMAND" in result.stderr
    assert path.read_bytes() == text.encode()


def test_a_project_file_gets_the_command_name_and_nothing_of_this_machine(env: Env) -> None:
    """Stops: init writing this machine's shim path and BOUNCER_HOME into a .mcp.json a team commits,
    and leaving a .bak beside it that gets committed too."""
    path = env.write(env.project / ".mcp.json", PROJECT)
    result = env.run("--client", "claude-code", "--yes")
    assert result.exit_code == 0, result.output
    entry = json.loads(path.read_text())["mcpServers"]["fs"]
    assert entry["command"] == mc.SHIM_NAME
    assert "env" not in entry  # BOUNCER_HOME is set for this run, yet not written
    assert str(env.bouncer) not in path.read_text() and str(env.shim) not in path.read_text()
    assert "a project file others may use" in result.stdout
    assert "BOUNCER_HOME is not written into it" in result.stdout
    assert "is not on PATH" not in result.stdout
    assert env.leftovers() == []
    assert list((env.bouncer / "state" / "init-backups").glob(".mcp.json.*.bak"))
    assert env.run("--client", "claude-code", "--undo", "--yes").exit_code == 0
    assert path.read_bytes() == PROJECT.encode()
    assert env.leftovers() == []


def test_a_project_file_warns_when_the_shim_is_not_on_path(env: Env) -> None:
    """Stops: a silent init whose entry the client cannot start (the command name is not on PATH)."""
    env.write(env.project / ".cursor/mcp.json", PROJECT)
    env.path_dirs = "/usr/bin:/bin"
    result = env.run("--client", "cursor", "--yes")
    assert result.exit_code == 0, result.output
    assert "bouncer-shim is not on PATH" in result.stdout


def test_the_users_own_config_still_gets_the_absolute_path(env: Env) -> None:
    """The benign twin: ~/.cursor/mcp.json is nobody else's, and desktop apps do not see the shell's PATH."""
    path = env.write(env.home / ".cursor/mcp.json", PROJECT)
    assert env.run("--client", "cursor", "--yes").exit_code == 0
    entry = json.loads(path.read_text())["mcpServers"]["fs"]
    assert entry["command"] == str(env.shim)
    assert entry["env"] == {"BOUNCER_HOME": str(env.bouncer)}
