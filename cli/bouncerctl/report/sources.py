"""Where the report's tool lists and policy come from: the running daemon, a --tools file, or the log.

Theory of operation
-------------------
The review pack shows every tool of every server with the controls policy puts on it. The tools come
from, in order of preference:

1. ``--tools FILE``: a ``tools/list`` result (``{"tools": [...]}``, a JSON-RPC response holding one,
   a bare list of tools, or a map of server name to any of these). Pin states are unknown.
2. the running daemon's ``pins`` op: every server that listed its tools, with each tool's pin state
   (``pinned``, ``new``, ``changed``, ``not listed``); the daemon's ``status`` names the policy file
   in force and whether its last reload failed.
3. neither: the servers and tools the log shows being called (no pin states, no schemas).

The policy is the user's ``policy.yaml`` (the one the daemon names, else this environment's) on
top of the built-in packs, loaded with the daemon's own strict loader. A shim's ``--policy`` file is
not known here; the pack says so. Problems (a policy that does not load, a daemon that refuses)
become notes in the pack, never a crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bouncerd.client import Client
from bouncerd.core.managed import check_layer
from bouncerd.core.policy import Policy, PolicyFile, merge
from bouncerd.errors import DaemonRequestError, DaemonUnavailableError, PolicyError
from bouncerd.managedpolicy import managed_source, read_managed
from bouncerd.paths import Paths
from bouncerd.policyfiles import read_policy

# A report is not worth waiting long for a daemon that does not answer: fall back to the log.
DAEMON_TIMEOUT_SECONDS = 3.0

# A tools/list result is a few hundred kilobytes at most; a larger --tools file is a mistake.
MAX_TOOLS_FILE_BYTES = 16 * 1024 * 1024


@dataclass
class ServerTools:
    name: str
    upstream: tuple[str, ...]
    tools: list[dict[str, Any]]  # each {"name": str, "state": str | None, "inputSchema"?: dict}


@dataclass
class Sources:
    servers: list[ServerTools]
    origin: str  # a sentence: where the tool lists came from
    policy: Policy
    policy_label: str
    policy_problem: str | None = None
    reload_error: str | None = None
    pins_known: bool = False
    notes: list[str] = field(default_factory=list)
    managed_file: str | None = None  # the administrator's managed policy, when one is installed
    unprotected: list[str] = field(default_factory=list)  # NOT PROTECTED lines (bouncerctl.unprotected)


class ToolsFileError(Exception):
    pass


def _tool_list(value: Any) -> list[dict[str, Any]] | None:
    if isinstance(value, Mapping) and isinstance(value.get("result"), Mapping):
        value = value["result"]
    if isinstance(value, Mapping) and isinstance(value.get("tools"), list):
        value = value["tools"]
    if isinstance(value, list) and all(
        isinstance(t, Mapping) and isinstance(t.get("name"), str) for t in value
    ):
        return [dict(t) for t in value]
    return None


def load_tools_file(path: Path, server: str | None) -> list[ServerTools]:
    """The servers and tools in a --tools file. Raises ToolsFileError with a sentence."""
    try:
        if path.stat().st_size > MAX_TOOLS_FILE_BYTES:
            raise ToolsFileError(f"{path}: larger than {MAX_TOOLS_FILE_BYTES} bytes")
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise ToolsFileError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ToolsFileError(f"{path}: not JSON ({exc})") from None
    single = _tool_list(data)
    if single is not None:
        return [ServerTools(server or path.stem, (), [{**t, "state": None} for t in single])]
    if isinstance(data, Mapping) and data:
        servers = []
        for name, value in data.items():
            tools = _tool_list(value)
            if tools is None:
                raise ToolsFileError(f"{path}: the entry for {name!r} is not a tools/list result")
            servers.append(ServerTools(str(name), (), [{**t, "state": None} for t in tools]))
        return servers
    raise ToolsFileError(
        f'{path}: expected a tools/list result ({{"tools": [...]}}), or a map of server name to one'
    )


def _daemon(paths: Paths) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(pins reply, status reply) from the running daemon, or None if there is none to ask."""
    try:
        with Client.connect(paths, role="ctl", timeout=DAEMON_TIMEOUT_SECONDS) as client:
            return client.request("pins"), client.request("status")
    except (DaemonUnavailableError, DaemonRequestError):
        return None


def _from_pins(reply: Mapping[str, Any]) -> list[ServerTools]:
    servers = []
    for srv in reply.get("servers", []):
        tools = []
        for tool in srv.get("tools", []):
            entry: dict[str, Any] = {"name": str(tool.get("name")), "state": tool.get("state")}
            live = tool.get("live")
            if isinstance(tool.get("inputSchema"), Mapping):
                entry["inputSchema"] = tool["inputSchema"]
            elif isinstance(live, Mapping) and isinstance(live.get("inputSchema"), Mapping):
                entry["inputSchema"] = live["inputSchema"]
            tools.append(entry)
        servers.append(ServerTools(str(srv.get("name")), tuple(srv.get("upstream") or ()), tools))
    return servers


def from_log(called: Iterable[tuple[str, str]]) -> list[ServerTools]:
    by_server: dict[str, list[dict[str, Any]]] = {}
    for server, tool in sorted(called):
        by_server.setdefault(server, []).append({"name": tool, "state": None})
    return [ServerTools(name, (), tools) for name, tools in by_server.items()]


def _policy(path: Path | None, managed: PolicyFile | None = None) -> tuple[Policy, str, str | None]:
    below = [managed] if managed is not None else []
    alone = "built-in packs and defaults only"
    under = "the built-in packs"
    if managed is not None:
        alone = f"the managed policy {managed.filename}, built-in packs and defaults only"
        under = f"the managed policy {managed.filename} and the built-in packs"
    if path is None or not path.exists():
        where = f" ({path} does not exist)" if path is not None else ""
        return merge(below), f"{alone}{where}", None
    try:
        user = read_policy(path)
        check_layer(managed, user)  # the daemon refuses a user policy that loosens the managed one
        return merge([*below, user]), f"{path} on top of {under}", None
    except PolicyError as exc:
        return merge(below), f"{alone} ({path} does not load)", str(exc)


def gather(
    paths: Paths,
    *,
    tools_file: Path | None,
    server: str | None,
    called: Iterable[tuple[str, str]],
    ask_daemon: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Sources:
    """Tool lists and policy for the pack; `called` is the (server, tool) pairs the log shows."""
    reply = _daemon(paths) if ask_daemon and tools_file is None else None
    reload_error = None
    policy_path: Path | None = paths.policy
    notes: list[str] = []
    if reply is not None:
        pins, status = reply
        policy_info = status.get("policy") or {}
        if isinstance(policy_info.get("user_policy"), str):
            policy_path = Path(policy_info["user_policy"])
        reload_error = policy_info.get("reload_error")
        servers = _from_pins(pins)
        origin = "the running daemon's pins (every server that has listed its tools)"
        pins_known = True
    elif tools_file is not None:
        servers = load_tools_file(tools_file, server)
        origin = f"the tools/list result in {tools_file} (pin states unknown)"
        pins_known = False
    else:
        servers = from_log(called)
        origin = "the calls in the log (no daemon answered: pin states and schemas unknown)"
        pins_known = False
    if server is not None:
        servers = [s for s in servers if s.name == server]
    managed: PolicyFile | None = None
    try:
        managed = read_managed(managed_source(environ or {}))
    except PolicyError as exc:
        notes.append(f"the managed policy is not shown: {exc}")
    policy, label, problem = _policy(policy_path, managed)
    notes.append("a shim's own --policy file, if any, is not included: its server may be stricter")
    managed_file = managed.filename if managed is not None else None
    return Sources(servers, origin, policy, label, problem, reload_error, pins_known, notes, managed_file)
