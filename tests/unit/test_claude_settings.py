"""Installing and removing Bouncer's hooks in Claude Code's settings (pure functions used by `init`).

Named after the mistake each test prevents: losing the person's own hooks, installing twice,
leaving a stale path behind, or leaving traces after an undo.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from bouncerctl.hook_settings import (
    HOOK_TIMEOUT_SECONDS,
    claude_settings_with_hooks,
    claude_settings_without_hooks,
    is_bouncer_hook,
)

CMD = ["/opt/bouncer/bin/bouncerctl", "hook", "claude-code"]
LINE = "/opt/bouncer/bin/bouncerctl hook claude-code"

THEIRS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "PostToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier -w"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def _ours(settings: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [g for g in settings["hooks"].get(event, []) if any(is_bouncer_hook(h) for h in g["hooks"])]


def test_hooks_are_installed_for_the_three_events_with_the_documented_matchers() -> None:
    out = claude_settings_with_hooks({}, CMD)
    hook = {"type": "command", "command": LINE, "timeout": HOOK_TIMEOUT_SECONDS}
    assert out == {
        "hooks": {
            "UserPromptSubmit": [{"hooks": [hook]}],
            "PreToolUse": [{"matcher": "^(WebFetch|Bash|mcp__.+)$", "hooks": [hook]}],
            "PostToolUse": [{"matcher": ".*", "hooks": [hook]}],
        }
    }
    json.dumps(out)  # plain JSON, as settings.json holds it


def test_installing_keeps_the_persons_own_hooks_and_settings_in_order() -> None:
    out = claude_settings_with_hooks(THEIRS, CMD)
    assert out["model"] == "opus" and out["permissions"] == THEIRS["permissions"]
    assert out["hooks"]["Stop"] == THEIRS["hooks"]["Stop"]
    assert out["hooks"]["PostToolUse"][0] == THEIRS["hooks"]["PostToolUse"][0]
    assert len(_ours(out, "PostToolUse")) == 1


def test_installing_twice_changes_nothing() -> None:
    once = claude_settings_with_hooks(THEIRS, CMD)
    assert claude_settings_with_hooks(once, CMD) == once


def test_installing_from_a_new_path_replaces_the_stale_one() -> None:
    old = claude_settings_with_hooks(THEIRS, ["/old/venv/bin/bouncerctl", "hook", "claude-code"])
    new = claude_settings_with_hooks(old, CMD)
    assert new == claude_settings_with_hooks(THEIRS, CMD)
    assert "/old/venv" not in json.dumps(new)


def test_undo_restores_the_persons_settings_exactly() -> None:
    assert claude_settings_without_hooks(claude_settings_with_hooks(THEIRS, CMD)) == THEIRS
    assert claude_settings_without_hooks(claude_settings_with_hooks({}, CMD)) == {}


def test_undo_keeps_a_hook_the_person_added_to_bouncers_group() -> None:
    out = claude_settings_with_hooks({}, CMD)
    out["hooks"]["PreToolUse"][0]["hooks"].append({"type": "command", "command": "audit-log"})
    undone = claude_settings_without_hooks(out)
    assert undone == {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "^(WebFetch|Bash|mcp__.+)$",
                    "hooks": [{"type": "command", "command": "audit-log"}],
                }
            ]
        }
    }


def test_undo_of_settings_without_bouncer_changes_nothing() -> None:
    assert claude_settings_without_hooks(THEIRS) == THEIRS
    assert claude_settings_without_hooks({"hooks": {}}) == {"hooks": {}}


def test_the_input_settings_are_never_modified() -> None:
    before = copy.deepcopy(THEIRS)
    claude_settings_without_hooks(claude_settings_with_hooks(THEIRS, CMD))
    assert before == THEIRS


def test_other_tools_hooks_that_merely_mention_bouncer_are_not_taken_for_ours() -> None:
    assert not is_bouncer_hook({"type": "command", "command": "echo bouncerctl hook"})
    assert not is_bouncer_hook({"type": "command", "command": "bouncerctl status"})
    assert is_bouncer_hook({"type": "command", "command": "python3 -m bouncerctl hook claude-code"})
    assert is_bouncer_hook(
        {"type": "command", "command": "'/Users/ann/My Tools/bouncerctl' hook claude-code"}
    )


@pytest.mark.parametrize(
    "hooks",
    [["not", "a", "map"], {"PreToolUse": {"matcher": "x"}}, {"PreToolUse": ["nope"]}],
    ids=["list", "event-not-list", "group-not-object"],
)
def test_malformed_hooks_are_a_clear_error_not_a_half_written_file(hooks: Any) -> None:
    with pytest.raises(ValueError, match="hooks"):
        claude_settings_with_hooks({"hooks": hooks}, CMD)


def test_a_command_that_is_not_the_hook_is_refused() -> None:
    with pytest.raises(ValueError, match="hook command"):
        claude_settings_with_hooks({}, ["/usr/bin/bouncerctl", "status"])
