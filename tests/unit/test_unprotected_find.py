"""Which servers `doctor`, `status` and the review pack name NOT PROTECTED, and what they offer to run.

The gap: a server the client starts past the gate must never go unnamed. The exception is Claude
Code with Bouncer's hooks installed for MCP tools: there an unwrapped entry is still gated (by the
hook), so naming it would cry wolf; an install from before the hooks covered MCP tools does not
count, and neither does a hook someone else wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bouncerctl import unprotected
from bouncerctl.hook_settings import claude_settings_with_hooks

HOOK = ["/opt/bouncer/bin/bouncerctl", "hook", "claude-code"]
CONFIG = {
    "mcpServers": {
        "tracker": {"type": "http", "url": "https://mcp.tracker.example/mcp"},
        "chat": {"type": "ws", "url": "wss://chat.example/mcp"},
        "notes": {"command": "npx", "args": ["notes"]},
    }
}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / ".claude.json").write_text(json.dumps(CONFIG))
    (tmp_path / ".claude").mkdir()
    return tmp_path


def names(home: Path) -> dict[str, str | None]:
    env = {"HOME": str(home), "BOUNCER_HOME": str(home / "b"), "XDG_CONFIG_HOME": ""}
    return {u.name: u.command for u in unprotected.find(env, home / "nowhere")}


def test_unwrapped_entries_are_named_with_the_command_that_protects_them(home: Path) -> None:
    found = names(home)
    assert found["tracker"] == "bouncerctl init --client claude-code --server tracker"
    assert found["notes"] == "bouncerctl init --client claude-code --server notes"
    assert found["chat"] is None  # the bridge cannot reach a websocket: no command is offered


def test_claude_code_with_hooks_for_mcp_tools_is_gated_by_the_hook(home: Path) -> None:
    settings = claude_settings_with_hooks({}, HOOK)
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    assert names(home) == {}


OURS = [{"type": "command", "command": " ".join(HOOK)}]
THEIRS = [{"type": "command", "command": "audit"}]


@pytest.mark.parametrize(
    "hooks",
    [
        # an install from before the hook path: MCP tools were left out
        {
            "PreToolUse": [{"matcher": "WebFetch|Bash", "hooks": OURS}],
            "PostToolUse": [{"matcher": "^(?!mcp__)", "hooks": OURS}],
        },
        # someone else's hook on the same matchers
        {
            "PreToolUse": [{"matcher": "^(WebFetch|Bash|mcp__.+)$", "hooks": THEIRS}],
            "PostToolUse": [{"matcher": ".*", "hooks": THEIRS}],
        },
    ],
)
def test_hooks_that_do_not_gate_mcp_tools_do_not_count(home: Path, hooks: dict[str, object]) -> None:
    (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    assert set(names(home)) == {"tracker", "chat", "notes"}
