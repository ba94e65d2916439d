"""Bouncer's hooks in Claude Code's settings (``~/.claude/settings.json``): add them, remove them.

Theory of operation
-------------------
`bouncerctl init` calls `claude_settings_with_hooks(settings, command)` when the person agrees, and
`claude_settings_without_hooks(settings)` on ``--undo``. Both are pure: a parsed settings dict in, a
new dict out, the input untouched. What they install (Claude Code hooks reference, "Configuration" and
"Matcher patterns": https://code.claude.com/docs/en/hooks; a matcher of letters, digits, ``_`` and ``|``
is a list of exact tool names, anything else an unanchored JavaScript regular expression)::

    {"hooks": {
      "UserPromptSubmit": [{"hooks": [HOOK]}],
      "PreToolUse":  [{"matcher": "^(WebFetch|Bash|mcp__.+)$", "hooks": [HOOK]}],
      "PostToolUse": [{"matcher": ".*", "hooks": [HOOK]}]
    }}
    HOOK = {"type": "command", "command": CMD, "timeout": 30}

where CMD is ``shlex.join(command)``, e.g. ``/home/ann/.local/bin/bouncerctl hook claude-code`` (an
absolute path: a desktop-launched client does not inherit the shell's PATH). PreToolUse matches the
network tools and every MCP tool (``mcp__<server>__<tool>``), PostToolUse every tool: an MCP server
no shim fronts (a remote one, one from managed settings) is gated by the hook, and the hook leaves a
shimmed server's calls to its shim (`bouncerctl.hook_mcp`). The timeout is longer than the hook's
own deadline (`bouncerctl.hook.DAEMON_TIMEOUT_SECONDS`),
so the hook always answers, and fails closed, before Claude Code gives up on it.

Other hooks are kept as they are, in their order. Bouncer's own entries are recognised by their
command (``... bouncerctl ... hook claude-code``), so adding twice changes nothing, a new path replaces
the old one, and removing leaves no trace: an event list or ``hooks`` map that only Bouncer's entries
filled is removed with them.
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final

# Seconds Claude Code waits for one hook run. The hook's own deadline for the daemon is shorter (it
# then denies a network tool), so this only bounds a hook stuck before it could say anything.
HOOK_TIMEOUT_SECONDS: Final = 30

# event -> matcher (None: the event takes no matcher)
MATCHERS: Final[Mapping[str, str | None]] = {
    "UserPromptSubmit": None,
    "PreToolUse": "^(WebFetch|Bash|mcp__.+)$",
    "PostToolUse": ".*",
}
HOOK_ARGS: Final = ("hook", "claude-code")


def is_bouncer_hook(hook: Any) -> bool:
    """Whether one hook entry (``{"type": "command", "command": ...}``) is Bouncer's."""
    if not isinstance(hook, Mapping) or not isinstance(hook.get("command"), str):
        return False
    try:
        words = shlex.split(hook["command"])
    except ValueError:
        return False
    return tuple(words[-2:]) == HOOK_ARGS and any(
        w.rsplit("/", 1)[-1].startswith("bouncerctl") for w in words
    )


def _hooks_map(settings: Mapping[str, Any]) -> dict[str, Any] | None:
    hooks = settings.get("hooks")
    if hooks is None:
        return None
    if not isinstance(hooks, dict):
        raise ValueError(f'"hooks" in Claude Code settings must be an object, not {type(hooks).__name__}')
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise ValueError(f'"hooks.{event}" in Claude Code settings must be a list')
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks", []), list):
                raise ValueError(f'"hooks.{event}" holds an entry that is not {{"matcher", "hooks": [...]}}')
    return hooks


def claude_settings_without_hooks(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `settings` without Bouncer's hooks. ValueError if its ``hooks`` are malformed."""
    out = copy.deepcopy(dict(settings))
    hooks = _hooks_map(out)
    if hooks is None:
        return out
    for event in list(hooks):
        groups = hooks[event]
        kept = []
        touched = False
        for group in groups:
            entries = group.get("hooks", [])
            mine = [h for h in entries if is_bouncer_hook(h)]
            if not mine:
                kept.append(group)
                continue
            touched = True
            rest = [h for h in entries if not is_bouncer_hook(h)]
            if rest:
                kept.append({**group, "hooks": rest})
        if touched:
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if not hooks and "hooks" in settings and settings["hooks"]:
        del out["hooks"]
    return out


def gates_mcp_tools(settings: Any) -> bool:
    """Whether Bouncer's hooks in `settings` run for MCP tools before and after each call (an install
    from before the hook path covered them does not)."""
    hooks = settings.get("hooks") if isinstance(settings, Mapping) else None
    if not isinstance(hooks, Mapping):
        return False
    for event in ("PreToolUse", "PostToolUse"):
        groups = hooks.get(event)
        if not isinstance(groups, list) or not any(
            isinstance(g, Mapping)
            and g.get("matcher") == MATCHERS[event]
            and any(is_bouncer_hook(h) for h in g.get("hooks") or [])
            for g in groups
        ):
            return False
    return True


def claude_settings_with_hooks(settings: Mapping[str, Any], command: Sequence[str]) -> dict[str, Any]:
    """A copy of `settings` with Bouncer's hooks running `command` (argv ending in ``hook claude-code``).

    Idempotent; replaces Bouncer's earlier entries; keeps every other hook. ValueError if `command`
    is not Bouncer's hook command or the settings' ``hooks`` are malformed."""
    line = shlex.join(command)
    if not is_bouncer_hook({"command": line}):
        raise ValueError(
            f"{line!r} is not a Bouncer hook command (it must run `bouncerctl hook claude-code`)"
        )
    out = claude_settings_without_hooks(settings)
    hooks = out.setdefault("hooks", {})
    for event, matcher in MATCHERS.items():
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [{"type": "command", "command": line, "timeout": HOOK_TIMEOUT_SECONDS}]
        hooks.setdefault(event, []).append(group)
    return out
