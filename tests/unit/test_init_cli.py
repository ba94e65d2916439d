"""``bouncerctl init`` through click's CliRunner, in a temporary home with every client's sample config.

HOME points at a temp directory and XDG_CONFIG_HOME is unset, so the command finds the samples where
each client keeps its config, never the real ones. A fake, executable bouncer-shim is passed with
--shim so the written path is known.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bouncerctl import init_cmd
from bouncerctl import mcpconfig as mc
from bouncerctl.app import main
from click.testing import CliRunner, Result

from bouncerd.paths import resolve

FIXTURES = Path(__file__).parent / "fixtures" / "mcpconfigs"

LAYOUT = {
    ".claude.json": "claude.json",
    "project/.mcp.json": "claude_code.mcp.json",
    ".config/Claude/claude_desktop_config.json": "claude_desktop_config.json",
    ".cursor/mcp.json": "cursor_mcp.json",
    "project/.vscode/mcp.json": "vscode_mcp.json",
    ".codeium/windsurf/mcp_config.json": "windsurf_mcp_config.json",
}


@dataclass
class Home:
    root: Path
    project: Path
    shim: Path
    state: Path  # Bouncer's state directory, where init keeps its backups

    def path(self, relative: str) -> Path:
        return self.root / relative

    def backups(self) -> list[Path]:
        assert not list(self.root.rglob("*.bak")), "a backup beside a config (a file someone commits)"
        return sorted(self.state.glob("init-backups/*.bouncer-*.bak"))

    def backup_of(self, path: Path) -> list[Path]:
        return sorted(self.state.glob(f"init-backups/{path.name}.*.bouncer-*.bak"))

    def unchanged(self) -> bool:
        return all(
            self.path(rel).read_bytes() == (FIXTURES / name).read_bytes() for rel, name in LAYOUT.items()
        )


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    root = tmp_path / "home"
    for relative, name in LAYOUT.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURES / name, target)
    (root / ".claude.json").chmod(0o600)
    shim = tmp_path / "bin" / "bouncer-shim"
    shim.parent.mkdir()
    shim.write_text("#!/bin/sh\nexit 0\n")
    shim.chmod(0o755)
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("BOUNCER_HOME", str(tmp_path / "bouncer"))  # init's undo records go here
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.chdir(root / "project")
    yield Home(root, root / "project", shim, resolve({"BOUNCER_HOME": str(tmp_path / "bouncer")}).state)


def run(home: Home, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, ["init", "--shim", str(home.shim), *args], input=input)


def test_refuses_to_write_without_a_terminal_or_yes(home: Home) -> None:
    result = run(home)
    assert result.exit_code == 1
    assert "no terminal to ask on" in result.stderr
    assert "--yes" in result.stderr
    assert "+++ ~/.cursor/mcp.json (with Bouncer)" in result.stdout  # the diff is still shown
    assert home.unchanged()
    assert home.backups() == []


def test_dry_run_shows_the_diff_and_writes_nothing(home: Home) -> None:
    result = run(home, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "Dry run: nothing written." in result.stdout
    assert f'+      "command": "{home.shim}",' in result.stdout
    assert home.unchanged()
    assert home.backups() == []


def test_yes_wraps_every_client_and_keeps_a_backup_of_each(home: Home) -> None:
    result = run(home, "--yes")
    assert result.exit_code == 0, result.output
    assert len(home.backups()) == len(LAYOUT)
    for relative, name in LAYOUT.items():
        path = home.path(relative)
        backup = next(b for b in home.backup_of(path) if b.read_bytes() == (FIXTURES / name).read_bytes())
        assert backup.read_bytes() == (FIXTURES / name).read_bytes()
        assert path.read_bytes() != backup.read_bytes()
    cursor = json.loads(home.path(".cursor/mcp.json").read_text())["mcpServers"]["github"]
    assert cursor["command"] == str(home.shim)
    assert cursor["args"][:4] == ["--name", "github", "--", "docker"]
    assert cursor["cwd"] == "/home/ana/src"
    # the token kept, and BOUNCER_HOME added: a client that strips the environment reaches the same daemon
    assert cursor["env"] == {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example",
        "BOUNCER_HOME": os.environ["BOUNCER_HOME"],
    }
    assert "Restart Claude Code, Claude Desktop, Cursor, VS Code, Windsurf" in result.stdout


def test_written_file_keeps_its_mode_and_backup_is_as_private(home: Home) -> None:
    assert run(home, "--yes", "--client", "claude-code").exit_code == 0
    assert stat.S_IMODE(home.path(".claude.json").stat().st_mode) == 0o600
    (backup,) = home.backup_of(home.path(".claude.json"))
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600


def test_second_init_changes_nothing_and_makes_no_backup(home: Home) -> None:
    assert run(home, "--yes").exit_code == 0
    first = {rel: home.path(rel).read_bytes() for rel in LAYOUT}
    result = run(home, "--yes")
    assert result.exit_code == 0, result.output
    assert "Nothing to change" in result.stdout
    assert "already wrapped" in result.stdout
    assert {rel: home.path(rel).read_bytes() for rel in LAYOUT} == first
    assert len(home.backups()) == len(LAYOUT)


def test_undo_restores_every_file_byte_for_byte(home: Home) -> None:
    assert run(home, "--yes").exit_code == 0
    result = run(home, "--undo", "--yes")
    assert result.exit_code == 0, result.output
    assert home.unchanged()
    assert "restore" in result.stdout


def test_remote_servers_are_wrapped_through_the_bridge_not_left_ungated(home: Home) -> None:
    # The attack this closes: a hosted server (mail, issues, documents) that init left alone met no
    # gate at all. Now it runs through `bouncer-shim --url`, and the original is kept for undo.
    result = run(home, "--yes")
    assert "through the bridge" in result.stdout
    assert "sentry → https://mcp.sentry.dev/mcp" in result.stdout
    assert "zapier → https://actions.zapier.com/mcp/KEY/sse" in result.stdout
    assert "skipped:" in result.stdout and 'broken: no "command"' in result.stdout
    mcp = json.loads(home.path("project/.mcp.json").read_text())
    sentry = mcp["mcpServers"]["sentry"]
    # a project file teams commit: the shim by its command name, not this machine's path
    assert (sentry["type"], sentry["command"]) == ("stdio", mc.SHIM_NAME)
    assert sentry["args"] == [
        "--name",
        "sentry",
        "--url",
        "https://mcp.sentry.dev/mcp",
        "--transport",
        "streamable-http",
    ]
    assert sentry["x-bouncer-upstream"] == {"type": "http", "url": "https://mcp.sentry.dev/mcp"}
    windsurf = json.loads(home.path(".codeium/windsurf/mcp_config.json").read_text())
    assert windsurf["mcpServers"]["zapier"]["args"][-1] == "sse"  # a /sse endpoint with no type


def test_server_option_limits_the_change_to_that_entry(home: Home) -> None:
    result = run(home, "--yes", "--client", "claude-code", "--server", "postgres")
    assert result.exit_code == 0, result.output
    value = json.loads(home.path(".claude.json").read_text())
    assert value["projects"]["/home/ana/work/api"]["mcpServers"]["postgres"]["command"] == str(home.shim)
    assert value["mcpServers"]["memory"]["command"] == "npx"
    assert home.path("project/.mcp.json").read_bytes() == (FIXTURES / "claude_code.mcp.json").read_bytes()


def test_unknown_server_name_is_an_error_and_nothing_is_written(home: Home) -> None:
    result = run(home, "--yes", "--server", "nope")
    assert result.exit_code == 1
    assert "no server named nope" in result.stderr
    assert home.unchanged()


def test_client_option_only_touches_that_clients_files(home: Home) -> None:
    assert run(home, "--yes", "--client", "vscode").exit_code == 0
    assert home.path("project/.vscode/mcp.json").read_bytes() != (FIXTURES / "vscode_mcp.json").read_bytes()
    assert home.path(".cursor/mcp.json").read_bytes() == (FIXTURES / "cursor_mcp.json").read_bytes()


def test_malformed_config_stops_the_run_naming_file_line_and_column(home: Home) -> None:
    shutil.copyfile(FIXTURES / "malformed.json", home.path(".cursor/mcp.json"))
    result = run(home, "--yes")
    assert result.exit_code == 1
    assert f"{home.path('.cursor/mcp.json')}: line 4, column 5: Expecting ',' delimiter" in result.stderr
    assert "nothing was changed" in result.stderr
    assert home.backups() == []
    assert home.path(".claude.json").read_bytes() == (FIXTURES / "claude.json").read_bytes()


def test_config_option_with_a_missing_file_is_an_error(home: Home) -> None:
    result = run(home, "--config", str(home.root / "nope.json"))
    assert result.exit_code == 1
    assert "nope.json: no such file" in result.stderr


def test_no_config_anywhere_lists_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["init", "--client", "windsurf"])
    assert result.exit_code == 1
    assert "no MCP client config found" in result.stderr
    assert "~/.codeium/windsurf/mcp_config.json" in result.stderr


def test_config_option_takes_any_file_with_an_mcp_servers_block(home: Home) -> None:
    target = home.root / "custom.json"
    shutil.copyfile(FIXTURES / "minified.json", target)
    result = run(home, "--yes", "--config", str(target))
    assert result.exit_code == 0, result.output
    assert json.loads(target.read_text())["mcpServers"]["b"]["env"] == {
        "X": "1",
        "BOUNCER_HOME": os.environ["BOUNCER_HOME"],
    }
    assert run(home, "--yes", "--undo", "--config", str(target)).exit_code == 0
    assert target.read_bytes() == (FIXTURES / "minified.json").read_bytes()


def test_config_without_a_server_block_is_an_error(home: Home) -> None:
    target = home.root / "other.json"
    target.write_text('{"editor": {}}\n')
    result = run(home, "--config", str(target))
    assert result.exit_code == 1
    assert 'no "mcpServers" (or "servers") block' in result.stderr


def test_symlinked_config_is_written_through_and_stays_a_link(home: Home) -> None:
    real = home.root / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    link = home.path(".cursor/mcp.json")
    shutil.move(link, real)
    link.symlink_to(real)
    assert run(home, "--yes", "--client", "cursor").exit_code == 0
    assert link.is_symlink()
    assert "bouncer-shim" in real.read_text()
    assert home.backup_of(real)


def test_answering_no_leaves_the_file_alone(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(init_cmd, "can_ask", lambda: True)
    result = run(home, "--client", "cursor", input="n\n")
    assert result.exit_code == 0, result.output
    assert "left ~/.cursor/mcp.json unchanged" in result.stdout
    assert home.unchanged()
    result = run(home, "--client", "cursor", input="y\n")
    assert result.exit_code == 0, result.output
    assert "wrote ~/.cursor/mcp.json" in result.stdout


def test_file_changed_while_asking_is_not_overwritten(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    cursor = home.path(".cursor/mcp.json")

    def client_writes_meanwhile(*_: object, **__: object) -> bool:
        cursor.write_text('{"mcpServers": {}}\n')
        return True

    monkeypatch.setattr(init_cmd, "can_ask", lambda: True)
    monkeypatch.setattr(init_cmd.click, "confirm", client_writes_meanwhile)
    result = run(home, "--client", "cursor")
    assert result.exit_code == 1
    assert "changed since it was read" in result.stderr
    assert cursor.read_text() == '{"mcpServers": {}}\n'
    assert home.backups() == []


def test_undo_names_changes_made_after_init(home: Home) -> None:
    assert run(home, "--yes", "--client", "cursor").exit_code == 0
    path = home.path(".cursor/mcp.json")
    path.write_text(path.read_text().replace('"cwd": "/home/ana/src",', '"cwd": "/elsewhere",', 1))
    result = run(home, "--undo", "--yes", "--client", "cursor")
    assert result.exit_code == 0, result.output
    assert 'github: "cwd" changed after init' in result.stdout
    assert path.read_bytes() == (FIXTURES / "cursor_mcp.json").read_bytes()


def test_default_shim_is_an_absolute_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    shim = init_cmd.find_shim({"PATH": os.defpath})
    assert os.path.isabs(shim) and shim.endswith("bouncer-shim")
    fake = tmp_path / "bin"
    fake.mkdir()
    monkeypatch.setattr(init_cmd.sys, "executable", str(fake / "python"))
    with pytest.raises(init_cmd.InitError, match="--shim PATH"):
        init_cmd.find_shim({"PATH": str(fake)})


def test_every_known_location_is_under_home_or_the_project(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "h"), "XDG_CONFIG_HOME": str(tmp_path / "x")}
    paths = {loc.client: [] for loc in init_cmd.locations(env, tmp_path / "p")}
    for loc in init_cmd.locations(env, tmp_path / "p"):
        paths[loc.client].append(str(loc.path.relative_to(tmp_path)))
    assert paths == {
        "claude-code": ["p/.mcp.json", "h/.claude.json"],
        "claude-desktop": [
            "x/Claude/claude_desktop_config.json",
            "h/Library/Application Support/Claude/claude_desktop_config.json",
        ],
        "cursor": ["p/.cursor/mcp.json", "h/.cursor/mcp.json"],
        "vscode": [
            "p/.vscode/mcp.json",
            "x/Code/User/mcp.json",
            "h/Library/Application Support/Code/User/mcp.json",
        ],
        "windsurf": ["h/.codeium/windsurf/mcp_config.json"],
        "gemini": ["p/.gemini/settings.json", "h/.gemini/settings.json"],
        "codex": ["h/.codex/config.toml"],
        "zed": ["p/.zed/settings.json", "x/zed/settings.json"],
        "cline": [
            "x/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
            "h/Library/Application Support/Code/User/globalStorage/saoudrizwan.claude-dev/settings/"
            "cline_mcp_settings.json",
        ],
        "lmstudio": ["h/.lmstudio/mcp.json"],
    }


def test_an_empty_config_file_has_no_servers_and_blocks_nothing(home: Home) -> None:
    home.path(".cursor/mcp.json").write_text("")
    result = run(home, "--yes")
    assert result.exit_code == 0, result.output
    assert home.path(".cursor/mcp.json").read_text() == ""
    assert "no servers" in result.stdout


def test_wrapped_entry_whose_shim_is_gone_is_pointed_out(home: Home) -> None:
    assert run(home, "--yes", "--client", "windsurf").exit_code == 0
    home.shim.unlink()
    result = CliRunner().invoke(main, ["init", "--dry-run", "--client", "windsurf"])
    assert result.exit_code == 0, result.output
    assert f"note: sqlite runs {home.shim}, which is not there any more" in result.stdout


def test_diff_marks_a_missing_final_newline() -> None:
    diff = init_cmd.unified_diff('{"a": 1}', '{"a": 2}', "f.json", "with Bouncer")
    assert diff.splitlines()[:2] == ["--- f.json", "+++ f.json (with Bouncer)"]
    assert "\\ No newline at end of file" in diff


def test_diff_of_a_large_file_shows_each_change_where_it_is() -> None:
    servers = {f"s{i}": {"command": "x", "args": [str(i)]} for i in range(2000)}
    text = json.dumps(
        {"mcpServers": servers, "tail": "\u2028 stays on its line"}, indent=2, ensure_ascii=False
    )
    doc = mc.parse(text)
    changes = [mc.Change(("mcpServers",), name, mc.WRAP) for name in ("s5", "s1500")]
    rewrite = mc.apply(doc, changes, "/b/bouncer-shim")
    diff = init_cmd.unified_diff(text, rewrite.text, "f", "x", rewrite.edits)
    old_lines, new_lines = text.split("\n"), rewrite.text.split("\n")
    hunks = diff.split("\n@@ ")[1:]
    assert len(hunks) == 2
    for hunk in hunks:
        header, *body = hunk.rstrip("\n").split("\n")
        old_at, new_at = (int(part.split(",")[0].lstrip("-+")) for part in header.split(" ")[:2])
        old = [line[1:] for line in body if line[0] in " -"]
        new = [line[1:] for line in body if line[0] in " +"]
        assert old_lines[old_at - 1 : old_at - 1 + len(old)] == old
        assert new_lines[new_at - 1 : new_at - 1 + len(new)] == new
        assert any(line.startswith("+") and "/b/bouncer-shim" in line for line in body)
