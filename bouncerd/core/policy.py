"""Policy: the strict loader, the built-in packs, the layering, and the effective rule per tool.

Theory of operation
-------------------
Three kinds of layer decide how a tool is treated, lowest first:

1. **built-in packs** (`bouncerd/core/packs/*.yaml`), chosen per server by `match` (the server's
   `--name`, or a substring of one element of its upstream argv) or forced with `packs:`; a server
   that matches no pack gets none, and its tools are judged by the fallback
   (`bouncerd.core.fallback`), which also judges any tool no pack names;
2. the administrator's managed policy, if installed (`bouncerd/managedpolicy.py` finds and checks the
   file); a user or shim layer above it may tighten what it wrote but never loosen it, which
   `bouncerd.core.managed.check_layer` refuses at load time;
3. the user's `policy.yaml`;
4. a shim's `--policy` file (the most specific: it belongs to one server).

Within a file, `servers.NAME.tools` is more specific than the top-level `tools`, and sits right
above it. Entries are folded key by key by `bouncerd.core.rules.resolve` (its docstring holds the
merge semantics). Settings replace: the highest layer that sets one wins.

Loading is strict (STYLE §5): unknown keys (with the closest known key suggested), wrong types,
null entries, duplicate keys, relative path prefixes, invalid regexes, and sink or trust keys next
to `exfiltrating: false` are `PolicyError`s naming file, line, key and reason. Nothing is skipped or
guessed: the old design silently replaced a pack's entry with a null one, and read `"1"` as a budget.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, partial
from types import MappingProxyType
from typing import Any, Literal

import yaml

from bouncerd.core import consequence, fallback, packs
from bouncerd.core.exportconf import ExportConfig, parse_export
from bouncerd.core.policy_entries import parse_destinations, parse_domains, parse_tools
from bouncerd.core.rules import (
    ON_TAINTED,
    ToolEntry,
    ToolRule,
    describe,
    resolve,
)
from bouncerd.core.strict_yaml import Doc, parse, suggest
from bouncerd.errors import PolicyError

TaintScope = Literal["session", "server", "user"]
AuditArguments = Literal["full", "digest"]

TAINT_SCOPES: tuple[TaintScope, ...] = ("session", "server", "user")
AUDIT_ARGUMENTS: tuple[AuditArguments, ...] = ("full", "digest")
POLICY_VERSION = 1

# How long an ask waits for a person. Two minutes is long enough to read the prompt, short enough
# that the client (which holds the tools/call open) has not given up.
DEFAULT_APPROVAL_TIMEOUT_SECONDS = 120
# Clients time tool calls out long before an hour; a longer wait only holds a call no one sees.
MAX_APPROVAL_TIMEOUT_SECONDS = 3600
# `taint_scope: user` keeps taint across sessions; a month covers a resumed conversation.
DEFAULT_TAINT_RETENTION_SECONDS = 30 * 86400
# A year: longer retention only grows the index (which is bounded anyway) for no protection.
MAX_TAINT_RETENTION_SECONDS = 365 * 86400

_DURATION = re.compile(r"(\d+)\s*([smhdw])")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PACK_METHODS = ("live tools/list", "documented schema")

SETTING_KEYS = (
    "taint_scope",
    "taint_retention",
    "approval_timeout",
    "audit_arguments",
    "on_tainted_identity",
    "you",
)
TOP_KEYS = ("version", *SETTING_KEYS, "packs", "tools", "servers", "audit_export", "deny_trust")
DENY_TRUST_KEYS = ("destinations", "domains")
SERVER_KEYS = ("tools", "packs")
PACK_KEYS = ("pack", "description", "checked_against", "match", "tools")
# Trust and confinement depend on the user's machine and contacts; a pack that shipped them would
# trust something its user never named.
PACK_FORBIDDEN_KEYS = frozenset({"trusted_destinations", "trusted_domains", "allowed_path_prefixes"})

Node = yaml.Node


# ---- values --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerSection:
    tools: Mapping[str, ToolEntry]
    tool_lines: Mapping[str, int]
    packs: tuple[str, ...] = ()


@dataclass(frozen=True)
class PolicyFile:
    """One loaded policy file: only what it wrote, each entry with its line."""

    filename: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    setting_lines: Mapping[str, int] = field(default_factory=dict)
    packs: tuple[str, ...] = ()
    tools: Mapping[str, ToolEntry] = field(default_factory=dict)
    tool_lines: Mapping[str, int] = field(default_factory=dict)
    servers: Mapping[str, ServerSection] = field(default_factory=dict)
    audit_export: ExportConfig | None = None
    deny_trust: DenyTrust | None = None  # only in the managed policy (`bouncerd.core.managed`)
    managed: bool = False


@dataclass(frozen=True)
class DenyTrust:
    """The managed policy's `deny_trust:`: destinations and domains no layer may trust."""

    destinations: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    line: int = 1


@dataclass(frozen=True)
class CheckedAgainst:
    package: str
    version: str
    method: str  # "live tools/list" or "documented schema"
    tools: Mapping[str, tuple[str, ...]]  # tool name -> parameter paths seen


@dataclass(frozen=True)
class Pack:
    name: str
    description: str
    checked_against: tuple[CheckedAgainst, ...]
    match_names: tuple[str, ...]
    match_commands: tuple[str, ...]
    tools: Mapping[str, ToolEntry]

    def matches(self, server_name: str, upstream: Sequence[str]) -> bool:
        """By the server's --name (case-insensitive), or a substring of one upstream argv element."""
        if server_name.lower() in (n.lower() for n in self.match_names):
            return True
        return any(c.lower() in arg.lower() for c in self.match_commands for arg in upstream)


@dataclass(frozen=True)
class Settings:
    taint_scope: TaintScope = "session"
    taint_retention: int = DEFAULT_TAINT_RETENTION_SECONDS  # seconds; used with taint_scope: user
    approval_timeout: int = DEFAULT_APPROVAL_TIMEOUT_SECONDS
    audit_arguments: AuditArguments = "full"
    on_tainted_identity: Literal["ask", "deny"] = "ask"
    # The user's own addresses, handles and accounts: trusted as destinations everywhere, and never
    # taken for planted when an output repeats them (an invitation to one's own event).
    you: tuple[str, ...] = ()
    source: Mapping[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class ServerTools:
    """One server's live tool list, for `format_effective`."""

    name: str
    upstream: tuple[str, ...] = ()
    tools: tuple[Mapping[str, Any], ...] = ()


def _pack_names(doc: Doc, node: Node, key: str, known: Iterable[str]) -> tuple[str, ...]:
    names = tuple(known)
    out: list[str] = []
    for value, item in doc.strings(node, key):
        if value not in names:
            known = ", ".join(names)
            raise doc.error(item, key, f"unknown pack {value!r}{suggest(value, names)}; known: {known}")
        out.append(value)
    return tuple(dict.fromkeys(out))


def _duration(doc: Doc, node: Node, key: str) -> int:
    value = doc.scalar(node, key)
    m = _DURATION.fullmatch(value.strip()) if isinstance(value, str) else None
    if m is None:
        raise doc.error(node, key, 'expected a duration such as "30d", "12h", "90m" or "3600s"')
    seconds = int(m.group(1)) * _DURATION_UNITS[m.group(2)]
    if not 1 <= seconds <= MAX_TAINT_RETENTION_SECONDS:
        raise doc.error(node, key, f"must be between 1s and {MAX_TAINT_RETENTION_SECONDS // 86400}d")
    return seconds


def _setting(doc: Doc, name: str, node: Node) -> Any:
    if name == "taint_scope":
        return doc.string(node, name, TAINT_SCOPES)
    if name == "taint_retention":
        return _duration(doc, node, name)
    if name == "approval_timeout":
        return doc.integer(node, name, 1, MAX_APPROVAL_TIMEOUT_SECONDS)
    if name == "audit_arguments":
        return doc.string(node, name, AUDIT_ARGUMENTS)
    if name == "you":
        return parse_destinations(doc, node, name)
    return doc.string(node, name, ON_TAINTED)  # on_tainted_identity


# ---- loading ------------------------------------------------------------------------------------


def _deny_trust(doc: Doc, node: Node, key: str, line: int) -> DenyTrust:
    got: dict[str, tuple[str, ...]] = {}
    for name, knode, vnode in doc.mapping(node, key, "a mapping with destinations: and domains:"):
        if name == "destinations":
            got[name] = tuple(d.lower() for d in parse_destinations(doc, vnode, f"{key}.{name}"))
        elif name == "domains":
            got[name] = parse_domains(doc, vnode, f"{key}.{name}")
        else:
            raise doc.error(knode, f"{key}.{name}", "unknown key" + suggest(name, DENY_TRUST_KEYS))
    return DenyTrust(got.get("destinations", ()), got.get("domains", ()), line)


def load_policy(
    text: str,
    filename: str,
    known_packs: Iterable[str] | None = None,
    errors: list[PolicyError] | None = None,
    *,
    managed: bool = False,
) -> PolicyFile:
    """Parse one policy file strictly. `known_packs` defaults to the built-in pack names. `managed`
    marks the administrator's managed policy, the only file that may hold `deny_trust:`.

    Without `errors` the first error raises. With it, every top-level key, server section and tool
    entry is checked and each error appended (`policy check` prints them all); the file is bad if
    the list is not empty, and what it returns then is only what did load."""
    pack_names = tuple(known_packs) if known_packs is not None else tuple(builtin_packs())
    doc = parse(text, filename)
    if doc.root is None:
        return PolicyFile(filename, managed=managed)
    each = doc.collector(errors)
    audit_export: ExportConfig | None = None
    deny_trust: DenyTrust | None = None
    settings: dict[str, Any] = {}
    setting_lines: dict[str, int] = {}
    forced: tuple[str, ...] = ()
    tools: dict[str, ToolEntry] = {}
    tool_lines: dict[str, int] = {}
    servers: dict[str, ServerSection] = {}

    def server(name: str, snode: Node) -> None:
        where = f"servers.{name}"
        s_tools: dict[str, ToolEntry] = {}
        s_lines: dict[str, int] = {}
        s_packs: tuple[str, ...] = ()
        for sub, sknode, subnode in doc.mapping(snode, where, "a mapping with tools: and packs:"):
            if sub == "tools":
                s_tools, s_lines = parse_tools(doc, subnode, f"{where}.tools", each=each)
            elif sub == "packs":
                s_packs = _pack_names(doc, subnode, f"{where}.packs", pack_names)
            else:
                raise doc.error(sknode, f"{where}.{sub}", "unknown key" + suggest(sub, SERVER_KEYS))
        servers[name] = ServerSection(s_tools, s_lines, s_packs)

    def top(name: str, knode: Node, vnode: Node) -> None:
        nonlocal forced, tools, tool_lines, audit_export, deny_trust
        if name == "version":
            doc.integer(vnode, name, POLICY_VERSION, POLICY_VERSION)
        elif name in SETTING_KEYS:
            settings[name] = _setting(doc, name, vnode)
            setting_lines[name] = knode.start_mark.line + 1
        elif name == "packs":
            forced = _pack_names(doc, vnode, name, pack_names)
        elif name == "tools":
            tools, tool_lines = parse_tools(doc, vnode, name, each=each)
        elif name == "servers":
            for srv, _sk, snode in doc.mapping(vnode, name, "a mapping of server name: {tools, packs}"):
                each(partial(server, srv, snode))
        elif name == "audit_export":
            audit_export = parse_export(doc, vnode, name, knode.start_mark.line + 1)
        elif name == "deny_trust":
            if not managed:
                raise doc.error(knode, name, "only the administrator's managed policy may deny trust")
            deny_trust = _deny_trust(doc, vnode, name, knode.start_mark.line + 1)
        else:
            hint = suggest(name, TOP_KEYS)
            if not hint and name not in TOP_KEYS:
                hint = (
                    "; tool entries go under tools: (or servers.NAME.tools:). A bouncer-mcp 0.1.x file "
                    f"(tool names at the top level)? `bouncerctl policy migrate {shlex.quote(filename)}` "
                    "moves them"
                )
            raise doc.error(knode, name, "unknown key" + hint)

    for name, knode, vnode in doc.mapping(doc.root, "", "a mapping at the top level"):
        each(partial(top, name, knode, vnode))
    got = (settings, setting_lines, forced, tools, tool_lines, servers, audit_export, deny_trust, managed)
    return PolicyFile(filename, *got)


def _checked(doc: Doc, node: Node, key: str) -> tuple[CheckedAgainst, ...]:
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise doc.error(node, key, "expected a non-empty list of {package, version, method, tools}")
    out: list[CheckedAgainst] = []
    for i, item in enumerate(node.value):
        where = f"{key}[{i}]"
        got: dict[str, Any] = {}
        for name, knode, vnode in doc.mapping(item, where):
            if name in ("package", "version"):
                got[name] = doc.string(vnode, f"{where}.{name}")
            elif name == "method":
                got[name] = doc.string(vnode, f"{where}.{name}", _PACK_METHODS)
            elif name == "tools":
                got[name] = {
                    tool: tuple(v for v, _ in doc.strings(params, f"{where}.tools.{tool}"))
                    for tool, _tk, params in doc.mapping(vnode, f"{where}.tools")
                }
            else:
                raise doc.error(knode, f"{where}.{name}", "unknown key")
        missing = {"package", "version", "method", "tools"} - got.keys()
        if missing:
            raise doc.error(item, where, f"missing {', '.join(sorted(missing))}")
        tools = MappingProxyType(got["tools"])
        out.append(CheckedAgainst(got["package"], got["version"], got["method"], tools))
    return tuple(out)


def load_pack(text: str, filename: str) -> Pack:
    """Parse one pack file; its `pack:` name must equal the file's stem."""
    doc = parse(text, filename)
    if doc.root is None:
        raise PolicyError(f"{filename}:1: (document): a pack file must not be empty")
    got: dict[str, Any] = {}
    for name, knode, vnode in doc.mapping(doc.root, "", "a mapping at the top level"):
        if name == "pack":
            got[name] = doc.string(vnode, name)
            stem = filename.rsplit("/", 1)[-1].removesuffix(".yaml")
            if got[name] != stem:
                raise doc.error(vnode, name, f"pack {got[name]!r} must live in {got[name]}.yaml")
        elif name == "description":
            got[name] = doc.string(vnode, name)
        elif name == "checked_against":
            got[name] = _checked(doc, vnode, name)
        elif name == "match":
            for sub, sknode, subnode in doc.mapping(vnode, name):
                if sub not in ("names", "commands"):
                    hint = suggest(sub, ("names", "commands"))
                    raise doc.error(sknode, f"match.{sub}", "unknown key" + hint)
                got[f"match_{sub}"] = tuple(v for v, _ in doc.strings(subnode, f"match.{sub}"))
        elif name == "tools":
            got[name] = parse_tools(doc, vnode, name, PACK_FORBIDDEN_KEYS)[0]
        else:
            raise doc.error(knode, name, "unknown key" + suggest(name, PACK_KEYS))
    for required in ("pack", "description", "checked_against", "tools"):
        if required not in got:
            raise doc.error(doc.root, required, "missing")
    return Pack(
        got["pack"],
        got["description"],
        got["checked_against"],
        got.get("match_names", ()),
        got.get("match_commands", ()),
        MappingProxyType(got["tools"]),
    )


@cache
def builtin_packs() -> Mapping[str, Pack]:
    """Every pack shipped in `bouncerd/core/packs/`, by name. A broken pack is a bug: it raises."""
    loaded = {}
    for filename, text in packs.pack_sources().items():
        pack = load_pack(text, f"bouncerd/core/packs/{filename}")
        loaded[pack.name] = pack
    return MappingProxyType(loaded)


# ---- layering -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    settings: Settings
    layers: tuple[PolicyFile, ...]
    packs: Mapping[str, Pack]

    def packs_for(self, server_name: str, upstream: Sequence[str]) -> tuple[str, ...]:
        """The packs that apply to a server: matched ones (by name), then forced ones in file order."""
        names = [name for name in sorted(self.packs) if self.packs[name].matches(server_name, upstream)]
        for layer in self.layers:
            names.extend(layer.packs)
            section = layer.servers.get(server_name)
            if section is not None:
                names.extend(section.packs)
        return tuple(dict.fromkeys(n for n in names if n in self.packs))

    def rule_for(
        self,
        server_name: str,
        upstream: Sequence[str],
        tool: Mapping[str, Any] | str,
        input_schema: Mapping[str, Any] | None = None,
    ) -> ToolRule:
        """The effective rule for one tool of one server: packs < fallback-if-unnamed < layers."""
        description: str | None = None
        annotations: Mapping[str, Any] | None = None
        if isinstance(tool, Mapping):
            name = str(tool.get("name", ""))
            schema = tool.get("inputSchema")
            input_schema = schema if isinstance(schema, Mapping) else input_schema
            text = tool.get("description")
            description = text if isinstance(text, str) else None  # pinned with the tool: stable input
            notes_of = tool.get("annotations")
            annotations = notes_of if isinstance(notes_of, Mapping) else None
        else:
            name = tool
        entries: list[tuple[str, ToolEntry]] = []
        for pack_name in self.packs_for(server_name, upstream):
            entry = self.packs[pack_name].tools.get(name)
            if entry is not None:
                entries.append((f"pack {pack_name}", entry))
        notes: tuple[str, ...] = ()
        if not entries:
            guess = fallback.classify(name, input_schema, description=description)
            kind, why = consequence.classify(name, annotations)
            entry = replace(guess.entry, consequence=kind) if kind is not None else guess.entry
            entries.append(("fallback", entry))
            notes = (*guess.notes, why) if why is not None else guess.notes
        for layer in self.layers:
            if name in layer.tools:
                entries.append((f"{layer.filename}:{layer.tool_lines.get(name, 1)}", layer.tools[name]))
            section = layer.servers.get(server_name)
            if section is not None and name in section.tools:
                entries.append((f"{layer.filename}:{section.tool_lines.get(name, 1)}", section.tools[name]))
        return resolve(name, entries, notes)


def merge(layers: Sequence[PolicyFile], packs: Mapping[str, Pack] | None = None) -> Policy:
    """Layer the policy files (lowest first: the user's policy.yaml, then a shim's --policy)."""
    available = builtin_packs() if packs is None else MappingProxyType(dict(packs))
    for layer in layers:
        named = list(layer.packs) + [p for s in layer.servers.values() for p in s.packs]
        unknown = [n for n in named if n not in available]
        if unknown:
            raise PolicyError(f"{layer.filename}:1: packs: unknown pack {unknown[0]!r}")
    values: dict[str, Any] = {}
    source: dict[str, str] = dict.fromkeys(SETTING_KEYS, "default")
    for layer in layers:
        for key, value in layer.settings.items():
            values[key] = value
            source[key] = f"{layer.filename}:{layer.setting_lines.get(key, 1)}"
    settings = Settings(**values, source=MappingProxyType(source))
    return Policy(settings, tuple(layers), available)


# ---- showing ------------------------------------------------------------------------------------


def format_effective(policy: Policy, tools: Iterable[ServerTools] | None = None) -> str:
    """The effective policy as text for `bouncerctl policy check`: settings, then rules with sources.

    With `tools` (live tool lists), every tool of every server is shown with the packs that apply.
    Without, the tools the policy files name are shown, per server section and for every server.
    """
    s = policy.settings
    lines = ["settings:"]
    for key in SETTING_KEYS:
        value = getattr(s, key)
        if key == "you":
            value = "[" + ", ".join(value) + "]"
        elif key == "taint_retention":
            value = f"{value // 86400}d" if value % 86400 == 0 else f"{value}s"
        lines.append(f"  {key}: {value}  [{s.source.get(key, 'default')}]")
    if tools is None:
        everywhere = {t for layer in policy.layers for t in layer.tools}
        named: dict[str, set[str]] = {"*": everywhere}
        for layer in policy.layers:
            for server_name, section in layer.servers.items():
                named.setdefault(server_name, set(everywhere)).update(section.tools)
        listed = [
            ServerTools(name, (), tuple({"name": t} for t in sorted(names)))
            for name, names in named.items()
            if names or name != "*"
        ]
        lines.append("packs (applied by server name or command):")
        for pack in sorted(policy.packs.values(), key=lambda p: p.name):
            checked = "; ".join(f"{c.package} {c.version} ({c.method})" for c in pack.checked_against)
            lines.append(f"  {pack.name}: {len(pack.tools)} tools, checked against {checked}")
    else:
        listed = list(tools)
    for server in listed:
        label = "every server" if server.name == "*" else f"server {server.name}"
        applied = ", ".join(policy.packs_for(server.name, server.upstream)) or "none (fallback only)"
        lines.append(f"{label}: packs {applied}")
        for tool in server.tools:
            rule = policy.rule_for(server.name, server.upstream, tool)
            lines.append(f"  {rule.tool}:")
            lines.extend(f"    {line}" for line in describe(rule))
    return "\n".join(lines) + "\n"
