"""`bouncerctl init` installs Claude Code's hooks only when asked, and `--undo` takes them out again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bouncerctl.app import main
from click.testing import CliRunner


def _setup(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    settings = home / ".claude" / "settings.json"
    settings.write_text(
        '{\n  "theme": "dark",\n  "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}\n}\n'
    )
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".mcp.json").write_text('{"mcpServers": {"mail": {"command": "mail-mcp", "args": []}}}\n')
    # BOUNCER_HOME: init's undo record goes there, never to the real state directory
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "BOUNCER_HOME": str(tmp_path / "b")}
    return settings, project, env


def test_hooks_installed_with_consent_and_removed_by_undo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, project, env = _setup(tmp_path)
    before = settings.read_text()
    runner = CliRunner()
    monkeypatch.chdir(project)
    r = runner.invoke(main, ["init", "--client", "claude-code", "--yes", "--hooks"], env=env)
    assert r.exit_code == 0, r.output
    data = json.loads(settings.read_text())
    assert data["theme"] == "dark" and "Stop" in data["hooks"]  # the user's own hooks are kept
    commands = [h["command"] for e in data["hooks"]["UserPromptSubmit"] for h in e["hooks"]]
    assert any(c.endswith("hook claude-code") for c in commands)
    r = runner.invoke(main, ["init", "--client", "claude-code", "--undo", "--yes", "--hooks"], env=env)
    assert r.exit_code == 0, r.output
    assert settings.read_text() == before  # byte for byte, not only the same JSON


def test_hooks_not_installed_without_consent_when_there_is_no_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script running init --yes wraps servers but must not change how Claude Code runs hooks."""
    settings, project, env = _setup(tmp_path)
    before = settings.read_text()
    monkeypatch.chdir(project)
    r = CliRunner().invoke(main, ["init", "--client", "claude-code", "--yes"], env=env)
    assert r.exit_code == 0, r.output
    assert settings.read_text() == before
    assert "--hooks" in r.output
