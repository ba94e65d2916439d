"""``bouncerctl init`` for Gemini CLI and Codex, the undo record, and byte-identical undo for every client.

Through click's CliRunner in a temporary HOME and BOUNCER_HOME (never the real ones), with a fake
executable bouncer-shim passed by --shim.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomlkit
from bouncerctl import init_record
from bouncerctl.app import main
from click.testing import CliRunner, Result

GEMINI = (
    '{\n  // mine\n  "mcpServers": {\n    "fs": {"command": "npx", "args": ["-y", "srv"], "trust": true}\n'
    "  }\n}"
)
CODEX = (
    'model = "o3"  # the model\r\n\r\n[mcp_servers.fs]\r\ncommand = \'npx\'\r\nargs = [\r\n  "-y", # pkg\r\n'
    '  "srv",\r\n]\r\n\r\n[mcp_servers.fs.env]\r\nTOKEN = "t"\r\n\r\n[mcp_servers.web]\r\nurl = "https://x"\r\n'
)


@dataclass
class Env:
    home: Path
    bouncer: Path
    shim: Path
    project: Path

    @property
    def vars(self) -> dict[str, str]:
        return {"HOME": str(self.home), "BOUNCER_HOME": str(self.bouncer), "XDG_CONFIG_HOME": ""}

    def write(self, relative: str, text: str) -> Path:
        path = self.home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
        return path

    def run(self, *args: str) -> Result:
        return CliRunner().invoke(main, ["init", "--shim", str(self.shim), *args], env=self.vars)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    shim = tmp_path / "bin" / "bouncer-shim"
    shim.parent.mkdir()
    shim.write_text("#!/bin/sh\nexit 0\n")
    shim.chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    yield Env(tmp_path / "home", tmp_path / "b", shim, project)


def test_gemini_entry_gets_no_unknown_key_and_undo_is_byte_identical(env: Env) -> None:
    """Stops: Gemini CLI refusing its settings ("Unrecognized key(s) in object: 'x-bouncer-upstream'")."""
    path = env.write(".gemini/settings.json", GEMINI)
    result = env.run("--client", "gemini", "--yes")
    assert result.exit_code == 0, result.output
    entry = json.loads(path.read_text().replace("// mine", ""))["mcpServers"]["fs"]
    assert set(entry) == {"command", "args", "trust", "env"}  # only keys Gemini's schema knows
    assert entry["command"] == str(env.shim)
    assert entry["env"] == {"BOUNCER_HOME": str(env.bouncer)}
    record = init_record.record_file(env.vars, path)
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    assert env.run("--client", "gemini", "--yes").exit_code == 0  # idempotent: nothing to do
    assert not list(path.parent.glob("*.bak"))  # no backup beside the config
    assert len(list(record.parent.parent.glob("init-backups/settings.json.*.bak"))) == 1
    result = env.run("--client", "gemini", "--undo", "--yes")
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == GEMINI.encode()
    assert not record.exists()  # nothing left to undo, no record left behind


def test_gemini_undo_after_the_client_rewrote_another_part_restores_the_entry_bytes(env: Env) -> None:
    """Stops: undo losing a change the client made meanwhile, or leaving the entry reformatted."""
    path = env.write(".gemini/settings.json", GEMINI)
    assert env.run("--client", "gemini", "--yes").exit_code == 0
    path.write_text(path.read_text().replace("// mine", '"theme": "GitHub",'))
    assert env.run("--client", "gemini", "--undo", "--yes").exit_code == 0
    assert path.read_text() == GEMINI.replace("// mine", '"theme": "GitHub",')


def test_project_gemini_settings_are_found(env: Env) -> None:
    path = env.project / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text(GEMINI)
    result = env.run("--client", "gemini", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "Gemini CLI:" in result.stdout and "wrap: fs" in result.stdout


def test_codex_toml_is_wrapped_and_undone_byte_for_byte(env: Env) -> None:
    """Stops: `init --config ~/.codex/config.toml` failing with a JSON error ("Expecting value"), and a
    Codex shim that, started with only HOME and PATH, reaches another daemon (BOUNCER_HOME in env)."""
    path = env.write(".codex/config.toml", CODEX)
    result = env.run("--config", str(path), "--yes")
    assert result.exit_code == 0, result.output
    assert "through the bridge" in result.stdout and "web → https://x" in result.stdout
    web = tomlkit.parse(path.read_text()).unwrap()["mcp_servers"]["web"]
    assert web["args"] == ["--name", "web", "--url", "https://x", "--transport", "streamable-http"]
    assert "url" not in web  # Codex would otherwise connect to it directly, past the gate
    fs = tomlkit.parse(path.read_text()).unwrap()["mcp_servers"]["fs"]
    assert fs["command"] == str(env.shim)
    assert fs["args"] == ["--name", "fs", "--", "npx", "-y", "srv"]
    assert fs["env"] == {"TOKEN": "t", "BOUNCER_HOME": str(env.bouncer)}
    assert b"\r\n" in path.read_bytes() and b"\n" not in path.read_bytes().replace(b"\r\n", b"")
    wrapped = path.read_bytes()
    again = env.run("--client", "codex", "--yes")
    assert again.exit_code == 0 and "Nothing to change" in again.stdout  # idempotent
    assert path.read_bytes() == wrapped
    assert env.run("--client", "codex", "--undo", "--yes").exit_code == 0
    assert path.read_bytes() == CODEX.encode()


def test_codex_home_is_honoured_and_per_entry_undo_keeps_other_edits(env: Env) -> None:
    codex_home = env.home / "elsewhere"
    path = env.write("elsewhere/config.toml", CODEX)
    vars_ = {**env.vars, "CODEX_HOME": str(codex_home)}
    runner = CliRunner()
    r = runner.invoke(main, ["init", "--shim", str(env.shim), "--client", "codex", "--yes"], env=vars_)
    assert r.exit_code == 0, r.output
    path.write_bytes(path.read_bytes().replace(b'"o3"', b'"o4"'))  # Codex changed the model meanwhile
    r = runner.invoke(main, ["init", "--client", "codex", "--undo", "--yes"], env=vars_)
    assert r.exit_code == 0, r.output
    assert path.read_bytes() == CODEX.replace('"o3"', '"o4"').encode()


def test_a_hand_made_shim_entry_in_codex_is_left_alone_by_undo(env: Env) -> None:
    """Stops: undo "restoring" an entry it has no record of (it would have to guess the original)."""
    text = '[mcp_servers.fs]\ncommand = "/usr/bin/bouncer-shim"\nargs = ["--name", "fs", "--", "npx"]\n'
    path = env.write(".codex/config.toml", text)
    result = env.run("--client", "codex", "--undo", "--yes")
    assert result.exit_code == 0, result.output
    assert "set up by hand" in result.stdout
    assert path.read_text() == text


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("config.toml", '[mcp_servers.fs\ncommand = "x"\n', "line 1"),
        ("custom.conf", 'model = "o3"\n[mcp_servers.fs]\ncommand = \n', "line 3"),
        ("x.json", '{"mcpServers": {"a": }}', "line 1, column 22"),
    ],
)
def test_unparsable_config_is_an_error_naming_the_file_and_line(
    env: Env, name: str, text: str, where: str
) -> None:
    """Stops: a traceback (or a JSON error for a TOML file) instead of the file, line and reason."""
    path = env.write(name, text)
    result = env.run("--config", str(path), "--yes")
    assert result.exit_code == 1
    assert f"{path}: {where}" in result.stderr
    assert "Traceback" not in result.output
    assert path.read_text() == text


def test_the_entrys_own_bouncer_home_wins_and_undo_removes_only_what_init_added(env: Env) -> None:
    text = json.dumps(
        {"mcpServers": {"a": {"command": "x", "env": {"BOUNCER_HOME": "/mine"}}, "b": {"command": "y"}}},
        indent=2,
    )
    path = env.write(".cursor/mcp.json", text)
    assert env.run("--client", "cursor", "--yes").exit_code == 0
    servers = json.loads(path.read_text())["mcpServers"]
    assert servers["a"]["env"] == {"BOUNCER_HOME": "/mine"}
    assert servers["b"]["env"] == {"BOUNCER_HOME": str(env.bouncer)}
    path.write_text(path.read_text().replace('"mcpServers"', '"other": 1,\n  "mcpServers"'))
    result = env.run("--client", "cursor", "--undo", "--yes")
    assert result.exit_code == 0, result.output
    assert "changed after init" not in result.stdout  # the added variable is no change of the person's
    assert path.read_text() == text.replace('"mcpServers"', '"other": 1,\n  "mcpServers"')


def test_a_damaged_undo_record_stops_init_before_anything_is_written(env: Env) -> None:
    """Stops: undo guessing from a record it cannot read (it would put back something else)."""
    path = env.write(".gemini/settings.json", GEMINI)
    assert env.run("--client", "gemini", "--yes").exit_code == 0
    wrapped = path.read_bytes()
    record = init_record.record_file(env.vars, path)
    record.write_text("{not json")
    result = env.run("--client", "gemini", "--undo", "--yes")
    assert result.exit_code == 1
    assert str(record) in result.stderr and "damaged" in result.stderr
    assert path.read_bytes() == wrapped


def test_every_clients_file_comes_back_byte_for_byte(env: Env) -> None:
    """Stops: any client's config (JSON, JSONC, one line, tabs, CRLF, Gemini, Codex) not coming back."""
    files = {
        ".claude.json": '{"numStartups":3,"mcpServers":{"a":{"command":"x","args":["1"]}}}',
        "project/.mcp.json": '{\n\t"mcpServers": {\n\t\t"a": {\n\t\t\t"command": "x"\n\t\t}\n\t}\n}\n',
        ".config/Claude/claude_desktop_config.json": '{\r\n  "mcpServers": {"a": {"command": "x"}}\r\n}',
        ".cursor/mcp.json": (
            '{\n    "mcpServers": {\n        "a": {"command": "x", "env": {"K": "v"}}\n    }\n}'
        ),
        "project/.vscode/mcp.json": '{\n  // c\n  "servers": {\n    "a": {"command": "x",},\n  },\n}\n',
        ".codeium/windsurf/mcp_config.json": '{"mcpServers": {"a": {"command": "x"}}}\n',
        ".gemini/settings.json": GEMINI,
        ".codex/config.toml": CODEX,
    }
    paths = {}
    for relative, text in files.items():
        target = env.project.parent / relative if relative.startswith("project/") else env.home / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode())
        paths[target] = text.encode()
    env.vars["XDG_CONFIG_HOME"] = ""
    r = CliRunner().invoke(
        main,
        ["init", "--shim", str(env.shim), "--yes", "--hooks"],
        env={**env.vars, "XDG_CONFIG_HOME": str(env.home / ".config")},
    )
    assert r.exit_code == 0, r.output
    assert all(path.read_bytes() != text for path, text in paths.items())
    assert (env.home / ".claude/settings.json").exists()
    r = CliRunner().invoke(
        main,
        ["init", "--undo", "--yes", "--hooks"],
        env={**env.vars, "XDG_CONFIG_HOME": str(env.home / ".config")},
    )
    assert r.exit_code == 0, r.output
    for path, text in paths.items():
        assert path.read_bytes() == text, path
    assert not (env.home / ".claude/settings.json").exists()  # init created it; undo takes it away
    assert list((env.bouncer / "state" / init_record.RECORD_DIR).iterdir()) == []


@pytest.mark.parametrize(
    "text",
    [
        '{"theme":"dark","hooks":{"Stop":[{"hooks":[{"type":"command","command":"x"}]}]}}',
        '{\r\n\t"theme": "dark"\r\n}',
        '{\n    "permissions": {"allow": []}\n}\n',
    ],
)
def test_hooks_undo_gives_settings_json_back_byte_for_byte(env: Env, text: str) -> None:
    """Stops: `init --undo --hooks` turning a one-line settings.json into seven indented lines."""
    path = env.write(".claude/settings.json", text)
    args = ["--client", "claude-code", "--yes", "--hooks"]
    r = CliRunner().invoke(main, ["init", *args], env=env.vars)
    assert r.exit_code == 0, r.output
    written = path.read_bytes().decode()
    assert "hook claude-code" in written
    if "\n" not in text:  # the file's own layout: one line stays one line, CRLF and tabs stay
        assert "\n" not in written
    assert ("\r\n" in written) == ("\r\n" in text)
    assert ("\n\t" in written) == ("\n\t" in text)
    r = CliRunner().invoke(main, ["init", "--undo", *args], env=env.vars)
    assert r.exit_code == 0, r.output
    assert path.read_bytes() == text.encode()


def test_hooks_undo_after_claude_code_changed_settings_keeps_its_change(env: Env) -> None:
    text = '{"theme":"dark"}'
    path = env.write(".claude/settings.json", text)
    args = ["--client", "claude-code", "--yes", "--hooks"]
    assert CliRunner().invoke(main, ["init", *args], env=env.vars).exit_code == 0
    data = json.loads(path.read_text())
    data["model"] = "opus"
    path.write_text(json.dumps(data, indent=2))
    assert CliRunner().invoke(main, ["init", "--undo", *args], env=env.vars).exit_code == 0
    assert json.loads(path.read_text()) == {"theme": "dark", "model": "opus"}


def test_help_names_every_client() -> None:
    out = CliRunner().invoke(main, ["init", "--help"], env={"HOME": os.devnull}).output
    for name in ("Claude Code", "Codex", "Cursor", "Gemini CLI", "VS Code", "Windsurf"):
        assert name in out


def test_gemini_entry_from_an_earlier_init_is_restored_and_can_be_wrapped_again(env: Env) -> None:
    """Stops: a Gemini file broken by an older init (x-bouncer-upstream) staying broken after init."""
    old = json.dumps(
        {
            "mcpServers": {
                "fs": {
                    "command": "/old/bouncer-shim",
                    "args": ["--name", "fs", "--", "npx"],
                    "x-bouncer-upstream": {"command": "npx"},
                }
            }
        },
        indent=2,
    )
    path = env.write(".gemini/settings.json", old)
    result = env.run("--client", "gemini", "--dry-run")
    assert "makes Gemini CLI refuse this file" in result.stdout
    assert env.run("--client", "gemini", "--undo", "--yes").exit_code == 0
    assert json.loads(path.read_text())["mcpServers"]["fs"] == {"command": "npx"}
    assert env.run("--client", "gemini", "--yes").exit_code == 0
    assert "x-bouncer-upstream" not in path.read_text()
