"""Which MCP servers the known clients would start past the gate, and what would put them behind it.

Theory of operation
-------------------
Nothing unprotected may be silent. `find(environ, cwd)` reads every client config `bouncerctl init`
knows (`init_cmd.locations`, the same files, read the same way, read-only) and lists each entry
that runs without Bouncer:

- a stdio server not wrapped, or a remote one the shim's bridge speaks but init has not wrapped:
  the command that protects it is ``bouncerctl init --client CLIENT --server NAME``;
- a remote server the bridge cannot reach (a websocket, credentials a helper program computes, an
  entry init cannot read): no command protects it; the reason says why, and what to change.

Claude Code is the exception: when Bouncer's hooks are installed for MCP tools
(`hook_settings.gates_mcp_tools`), an entry of its configs that no shim fronts is still gated, by
the hook (`bouncerctl.hook_mcp`), so it is not listed. `doctor`, `status` and the review pack print
each entry listed as NOT PROTECTED with that command. A config that
cannot be parsed is reported as one entry of its own (its servers are unknown, so none is vouched for).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bouncerctl import mcpconfig as mc

LABEL = "NOT PROTECTED"

# What a person can do about a remote entry the bridge cannot reach: no command does it for them.
FIX_UNREACHABLE = "give it a streamable HTTP or SSE endpoint over http(s), or remove it"


@dataclass(frozen=True)
class Unprotected:
    client: str  # the init client name
    path: str  # the config file
    name: str  # the server entry's name ("" for a whole file that could not be read)
    reason: str
    command: str | None  # what to run to protect it; None when nothing can yet

    def line(self) -> str:
        """One line for a person: ``NOT PROTECTED name (client, path): reason; run: command``."""
        who = f"{self.name} ({self.client}, {self.path})" if self.name else f"{self.client}, {self.path}"
        fix = f"; run: {self.command}" if self.command else ""
        return f"{LABEL} {who}: {self.reason}{fix}"


def _claude_code_hooked(environ: Mapping[str, str]) -> bool:
    import json

    from bouncerctl.hook_settings import gates_mcp_tools
    from bouncerctl.init_hooks import settings_path

    try:
        return gates_mcp_tools(json.loads(settings_path(environ).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return False


def find(environ: Mapping[str, str], cwd: Path) -> list[Unprotected]:
    from bouncerctl import init_cmd, init_plan
    from bouncerctl.init_files import InitError

    found: list[Unprotected] = []
    hooked = _claude_code_hooked(environ)
    for location in init_cmd.locations(environ, cwd):
        if not location.path.exists() or (location.client == "claude-code" and hooked):
            continue
        path = str(location.path)
        try:
            plan = init_plan.read_config(location, environ)
        except (InitError, mc.McpConfigError, ValueError) as exc:
            found.append(Unprotected(location.client, path, "", f"cannot be read ({exc})", None))
            continue
        for entry in plan.entries:
            which = f"--config {path}" if location.client == "file" else f"--client {location.client}"
            command = f"bouncerctl init {which} --server {entry.name}"
            if entry.kind == mc.STDIO:
                found.append(
                    Unprotected(location.client, path, entry.name, "stdio server not wrapped", command)
                )
            elif entry.kind == mc.REMOTE and init_plan.bridged(plan, entry):
                reason = f"remote server ({entry.detail}) not wrapped"
                found.append(Unprotected(location.client, path, entry.name, reason, command))
            elif entry.kind == mc.REMOTE:
                why = init_plan.not_protected(plan, entry) or entry.detail
                reason = f"remote server the bridge cannot reach: {why}; {FIX_UNREACHABLE}"
                found.append(Unprotected(location.client, path, entry.name, reason, None))
    return found
