"""`bouncerctl init`'s plan for one config file: read it, pick its servers, compute the new text.

Theory of operation
-------------------
Three formats (`Location.fmt`):

- ``json``: Claude Code, Claude Desktop, Cursor, Windsurf, LM Studio (JSON or JSONC). The original
  entry is kept in the entry itself, under ``x-bouncer-upstream`` (`bouncerctl.mcpconfig`);
- ``json-record``: Gemini CLI, VS Code, Zed (``context_servers``) and Cline, whose settings schemas
  reject (or whose apps drop) unknown keys. The same in-place edit without that key; the entry's
  original text goes to init's undo record (`bouncerctl.init_record`);
- ``toml``: Codex CLI (`bouncerctl.mcptoml`); the old tokens go to the undo record.

YAML configs (Continue, Goose) are refused with a message that says how to wrap an entry by hand.

A project file that teams commit (``.mcp.json``, ``.vscode/mcp.json``, ``.cursor/mcp.json``, a
project's ``.gemini/settings.json`` or ``.zed/settings.json``: `Plan.shared`) gets nothing of this
machine: the shim by its command name (found on PATH) and no ``env`` of ours.

Every wrapped entry also gets the variables `bouncerd.paths.entry_env` names in its ``env`` (a client
that starts servers with a stripped environment, as Codex does, must still reach this daemon).

Undo first tries the whole file: when it still holds exactly the text init last wrote, the text from
before init goes back, byte for byte. Otherwise (the client or the person changed the file since) each
wrapped entry is restored on its own: from ``x-bouncer-upstream``, or from the record.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bouncerctl import init_record, mcptoml
from bouncerctl import mcpconfig as mc
from bouncerctl.init_files import InitError

JSON = "json"
JSON_RECORD = "json-record"
TOML = "toml"


@dataclass(frozen=True)
class Location:
    client: str  # one of init_cmd.CLIENTS, or "file" for --config
    title: str  # how the client is named to a person
    path: Path
    top_key: str | None  # None: guess ("mcpServers", else "servers")
    projects: bool = False  # also Claude Code's projects.<path>.mcpServers
    caution: str = ""  # said before writing it
    fmt: str = JSON
    shared: bool = False  # a project file teams commit: nothing machine-specific goes into it


# Files whose apps refuse or drop a key they do not know: the original entry goes to the undo record.
RECORD_FILES = (
    (".gemini", "settings.json"),
    ("zed", "settings.json"),
    (".zed", "settings.json"),
    ("settings", "cline_mcp_settings.json"),
    (".vscode", "mcp.json"),
    ("User", "mcp.json"),
)
# Project files by their place in a repository: (directory, name), "" for the repository's top.
PROJECT_FILES = (("", ".mcp.json"), (".vscode", "mcp.json"), (".cursor", "mcp.json"),
                 (".gemini", "settings.json"), (".zed", "settings.json"))  # fmt: skip

YAML_REFUSED = (
    "a YAML config (Continue, Goose): init does not rewrite YAML. Wrap each stdio server by hand: "
    "its command becomes bouncer-shim and its arguments --name NAME -- COMMAND ARGS... "
    "(Continue: command/args; Goose: cmd/args); docs/clients.md shows both"
)


def detect_format(path: Path, text: str) -> str:
    """The format of a file named with --config: TOML by name or content; Gemini's, VS Code's, Zed's
    and Cline's by path. InitError for YAML, which init does not rewrite."""
    if path.suffix in (".yaml", ".yml"):
        raise InitError(f"{path}: {YAML_REFUSED}")
    if mcptoml.looks_like_toml(str(path), text):
        return TOML
    if (path.parent.name, path.name) in RECORD_FILES:
        return JSON_RECORD
    return JSON


def detect_top_key(path: Path) -> str | None:
    """The server block of a file named with --config, when its name tells (Zed's ``context_servers``)."""
    if path.name == "settings.json" and path.parent.name in ("zed", ".zed"):
        return "context_servers"
    return None


def is_project_file(path: Path, environ: Mapping[str, str]) -> bool:
    """A file named with --config that a team would commit: a project's, not the user's own."""
    home = Path(environ.get("HOME") or Path.home())
    folder = path.parent.name if path.name != ".mcp.json" else ""
    if (folder, path.name) not in PROJECT_FILES:
        return False
    project = path.parent if not folder else path.parent.parent
    return os.path.realpath(project) != os.path.realpath(home)


@dataclass
class Plan:
    location: Location
    path: Path  # the file written (symlinks resolved)
    raw: bytes
    text: str
    doc: mc.Document | None  # JSON formats
    toml: Any  # tomlkit document, TOML format
    entries: list[mc.Entry]
    record: init_record.Record
    fmt: str = JSON
    shared: bool = False  # a project file teams commit (see the module's docstring)
    all_entries: list[mc.Entry] = field(default_factory=list)
    changes: list[mc.Change] = field(default_factory=list)
    rewrite: mc.Rewrite | None = None
    new_record: init_record.Record | None = None
    whole: bool = False  # undo puts the whole original text back

    def entry_value(self, entry: mc.Entry) -> Any:
        if self.doc is not None:
            return mc.value_at(self.doc.value, entry.block)[entry.name]
        return (mcptoml.servers(self.toml) or {}).get(entry.name)


def read_config(location: Location, environ: Mapping[str, str]) -> Plan:
    """Read and parse one config; InitError naming the file if it cannot be."""
    path = Path(os.path.realpath(location.path))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InitError(f"{location.path}: cannot read it: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InitError(f"{location.path}: not UTF-8 text (byte {exc.start})") from None
    named = location.client == "file"
    fmt = detect_format(location.path, text) if named else location.fmt
    shared = is_project_file(location.path, environ) if named else location.shared
    record = init_record.load(environ, path)
    recorded = {key.split("\x1f")[-1] for key in record.entries}
    try:
        if fmt == TOML:
            toml = mcptoml.parse(text)
            found = mcptoml.entries(toml, recorded)
            return Plan(location, path, raw, text, None, toml, found, record, fmt, shared, list(found))
        if not text.strip():  # a client may create its config empty; it has no servers and stays as it is
            return Plan(location, path, raw, text, mc.parse("{}"), None, [], record, fmt, shared)
        doc = mc.parse(text)
        top_key = location.top_key or (detect_top_key(location.path) if named else None)
        top_key = top_key or mc.guess_top_key(doc.value)
        projects = location.projects or location.client == "file"
        found = mc.entries(doc.value, mc.find_blocks(doc.value, top_key, projects=projects))
    except mc.McpConfigError as exc:
        raise InitError(f"{location.path}: {exc}") from None
    if fmt == JSON_RECORD:
        keys = set(record.entries)
        found = [
            mc.Entry(e.block, e.name, mc.WRAPPED, e.detail)
            if e.kind == mc.SHIMMED and init_record.entry_key(e.block, e.name) in keys
            else e
            for e in found
        ]
    return Plan(location, path, raw, text, doc, None, found, record, fmt, shared, list(found))


def bare_url(plan: Plan) -> str:
    """The transport of a remote entry's bare ``url``: SSE for Gemini CLI, streamable HTTP elsewhere."""
    return "sse" if plan.fmt == JSON_RECORD else "streamable-http"


def bridged(plan: Plan, entry: mc.Entry) -> bool:
    """A remote entry the shim's bridge can reach (wrapped like a stdio one)."""
    if entry.kind != mc.REMOTE:
        return False
    value = plan.entry_value(entry)
    if plan.fmt == TOML:
        return isinstance(mcptoml.remote_target(value), mc.RemoteTarget)
    return isinstance(mc.remote_target(value, bare_url=bare_url(plan)), mc.RemoteTarget)


def not_protected(plan: Plan, entry: mc.Entry) -> str | None:
    """Why `entry` stays unprotected whatever init does, or None (it is, or init can protect it)."""
    if entry.kind != mc.REMOTE or bridged(plan, entry):
        return None
    value = plan.entry_value(entry)
    if plan.fmt == TOML:
        target = mcptoml.remote_target(value)
    else:
        target = mc.remote_target(value, bare_url=bare_url(plan))
    return target if isinstance(target, str) else None


def select(plan: Plan, servers: Sequence[str], undo: bool) -> None:
    action = mc.UNWRAP if undo else mc.WRAP
    plan.entries = [entry for entry in plan.entries if not servers or entry.name in servers]
    if undo:
        chosen = [e for e in plan.entries if e.kind == mc.WRAPPED]
    else:
        chosen = [e for e in plan.entries if e.kind == mc.STDIO or bridged(plan, e)]
    plan.changes = [mc.Change(e.block, e.name, action) for e in chosen]


def _original(plan: Plan, change: mc.Change) -> str | None:
    """For an entry without x-bouncer-upstream: its original text, from the undo record."""
    entry = plan.record.entries.get(init_record.entry_key(change.block, change.name))
    if entry is None:
        return None
    text = entry.get("original")
    if entry.get("format") != "json" or not isinstance(text, str):
        raise mc.RewriteError(f"{change.name}: the undo record does not hold this entry's JSON text")
    return text


def original_value(plan: Plan, entry: mc.Entry) -> Any:
    """The entry as it was before init, for the notes undo prints (None if not known)."""
    value = plan.entry_value(entry)
    if isinstance(value, dict) and mc.UPSTREAM_KEY in value:
        return value[mc.UPSTREAM_KEY]
    if plan.fmt == JSON_RECORD:
        text = _original(plan, mc.Change(entry.block, entry.name, mc.UNWRAP))
        return mc.parse(text).value if text is not None else None
    return None


def rewrite(plan: Plan, shim: str, env: Mapping[str, str], undo: bool) -> None:
    """Compute plan.rewrite and plan.new_record. McpConfigError if the change cannot be made."""
    record = init_record.Record(
        plan.record.path, plan.record.original, plan.record.written, plan.record.absent,
        dict(plan.record.entries), plan.record.named,
    )  # fmt: skip
    plan.new_record = record
    if undo:
        wrapped = {(e.block, e.name) for e in plan.all_entries if e.kind == mc.WRAPPED}
        undone = {(c.block, c.name) for c in plan.changes}
        whole = init_record.whole_file(plan.record, plan.text) if undone >= wrapped else None
        for block, name in undone:
            record.entries.pop(init_record.entry_key(block, name), None)
        if whole is not None:
            plan.whole = True
            plan.rewrite = mc.Rewrite(whole, None, in_place=True)
            record.original = record.written = None
            record.entries = {}
            return
        record.original, record.absent = None, False
    if plan.fmt == TOML:
        doc = mcptoml.parse(plan.text)
        for change in plan.changes:
            key = init_record.entry_key(change.block, change.name)
            if undo:
                mcptoml.unwrap(doc, change.name, plan.record.entries[key])
            else:
                record.entries[key] = mcptoml.wrap(doc, change.name, shim, env)
        plan.rewrite = mc.Rewrite(mcptoml.dumps(doc, plan.text), None, in_place=True)
        return
    assert plan.doc is not None
    changes = plan.changes
    if undo and plan.fmt == JSON_RECORD:
        changes = [mc.Change(c.block, c.name, c.action, _original(plan, c)) for c in changes]
    elif not undo and plan.fmt == JSON_RECORD:
        root = plan.doc.root
        for change in changes:
            node = mc.node_at(root, change.block)
            member = node.member(change.name) if node is not None else None
            assert member is not None
            original = plan.doc.text[member.value.start : member.value.end]
            record.entries[init_record.entry_key(change.block, change.name)] = {
                "format": "json",
                "original": original,
            }
    plan.rewrite = mc.apply(plan.doc, changes, shim, env, upstream=plan.fmt == JSON, bare_url=bare_url(plan))


def record_written(plan: Plan, undo: bool) -> init_record.Record:
    """The record to save just before plan.rewrite is written."""
    record = plan.new_record
    assert record is not None and plan.rewrite is not None
    if undo:
        record.written = None if plan.whole else plan.rewrite.text
        return record
    clean = not any(e.kind == mc.WRAPPED for e in plan.all_entries)
    init_record.after_write(record, plan.text, plan.rewrite.text, clean=clean)
    record.named = record.named or plan.location.client == "file"  # so undo, doctor and status find it
    return record
