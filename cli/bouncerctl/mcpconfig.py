"""Rewriting MCP client configs so each stdio server runs through bouncer-shim, and back again.

Theory of operation
-------------------
Pure: text and values in, text and values out. `bouncerctl init` (init_cmd.py, init_files.py) does
the file I/O.

Parsing (`bouncerctl.jsonc`, re-exported here). Client configs are JSON; VS Code's are JSONC
(comments and trailing commas), Gemini CLI's may hold comments. Every parsed value knows where it
sits in the text, so a rewrite touches only the bytes of the entries concerned.

Classifying. Each entry of a server block (``mcpServers``, VS Code's ``servers``, and Claude Code's
per-project ``projects.<path>.mcpServers``) is one of: a stdio server (`STDIO`, has a ``command``),
already wrapped (`WRAPPED`, has ``x-bouncer-upstream``), run through bouncer-shim by hand (`SHIMMED`),
remote (`REMOTE`: a ``url``/``serverUrl``/``httpUrl`` or an HTTP/SSE ``type``) or something else
(`UNUSABLE`, with the reason). A remote entry is wrapped too when the shim's bridge speaks its
transport (`remote_target`: streamable HTTP or the legacy HTTP+SSE); one it cannot bridge (a
websocket, an IDE-only transport, a header computed by a helper program) stays as it is and is
reported NOT PROTECTED with the reason (`unprotected`).

Rewriting changes only the text of the entries concerned:
- wrap: inside the entry, the value of ``command`` becomes the shim's absolute path and ``args``
  becomes ``["--name", NAME, "--", COMMAND, *ARGS]`` (copied token by token from the original, so
  escapes survive); every other member (env, cwd, type, the client's own settings) stays where it
  was, so the upstream still gets its environment and directory; the variables init must pass
  (`env`, from `bouncerd.paths.entry_env`) are added to ``env`` where the entry does not set them
  (an ``env`` member is added if there is none); and a member ``x-bouncer-upstream`` holding the
  entry's original text is appended, its continuation lines indented one level deeper. With
  ``upstream=False`` (a client whose schema rejects unknown keys) that member is left out: init keeps
  the original text in its undo record instead.
- wrap a remote entry: its members that say where the server is (``type``, ``url``, ``serverUrl``,
  ``httpUrl``, ``headers``) give way to ``command`` (the shim) and ``args`` (``["--name", NAME,
  "--url", URL, "--transport", T]``); each header goes into ``env`` as ``BOUNCER_HEADER_<NAME>``
  with its value as written (a ``${VAR}`` reference stays a reference, expanded by the client or
  by the bridge), never onto the command line, where any local user could read it; a ``type``
  becomes ``"stdio"``; the client's own settings stay; ``x-bouncer-upstream`` keeps the original.
- unwrap: the entry's text is replaced by the text of its ``x-bouncer-upstream`` value with that
  level of indentation taken off again (or by `Change.original`, the record's text), so init then
  undo gives back the original bytes.
Every rewrite is checked: the new text must parse to exactly the value that the same change applied
to the parsed value gives. If it does not (an entry edited by hand into a shape the text edit does not
expect), the document is re-serialised from that value with the file's detected indentation:
semantically identical, formatting normalised. A file with comments is never re-serialised (the
comments would be lost); that is a `RewriteError` instead.
"""

from __future__ import annotations

import copy
import json
import os.path
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from bouncerctl import jsonc, jsonedit

# The parser, known to callers as part of this module.
ConfigSyntaxError = jsonc.ConfigSyntaxError
Document = jsonc.Document
McpConfigError = jsonc.McpConfigError
Member = jsonc.Member
Node = jsonc.Node
node_at = jsonc.node_at
parse = jsonc.parse
value_at = jsonc.value_at

UPSTREAM_KEY = "x-bouncer-upstream"
SHIM_NAME = "bouncer-shim"

# What marks a remote server in the clients' formats: Claude Code, Cursor and VS Code use "url" (with a
# "type" of http or sse), Windsurf "serverUrl", Gemini-style files "httpUrl".
REMOTE_KEYS = ("url", "serverUrl", "httpUrl")
REMOTE_TYPES = frozenset(
    {"http", "sse", "streamable-http", "streamableHttp", "ws", "websocket", "sse-ide", "ws-ide"}
)

# The transport each ``type`` names, for the bridge's --transport. Gemini CLI reads a bare ``url`` as
# SSE and ``httpUrl`` as streamable HTTP; every other client's bare ``url`` is streamable HTTP.
BRIDGED_TYPES = {
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "streamableHttp": "streamable-http",
    "sse": "sse",
}
# The environment variable prefix that carries one header to the bridge (see bouncer_shim.bridge).
HEADER_ENV_PREFIX = "BOUNCER_HEADER_"
# Members of a remote entry that say where and how to reach it: the wrapped entry does not keep them.
REMOTE_MEMBERS = ("type", "url", "serverUrl", "httpUrl", "headers")

STDIO = "stdio"
WRAPPED = "wrapped"
SHIMMED = "shimmed"
REMOTE = "remote"
UNUSABLE = "unusable"

WRAP = "wrap"
UNWRAP = "unwrap"

Block = tuple[str, ...]

_NO_ENV: Mapping[str, str] = MappingProxyType({})
_MISSING = object()


class ConfigShapeError(McpConfigError):
    """Valid JSON, but not the shape of an MCP config (a server block that is not an object, ...)."""


class RewriteError(McpConfigError):
    """The change cannot be made without losing something (comments)."""


# ---- finding and classifying servers ---------------------------------------------------------------


def find_blocks(value: Any, top_key: str, *, projects: bool = False) -> list[Block]:
    """The server blocks of a config: ``top_key`` and, with `projects`, ``projects.<path>.mcpServers``."""
    if not isinstance(value, dict):
        raise ConfigShapeError("the top level is not a JSON object")
    blocks: list[Block] = []
    if top_key in value:
        if not isinstance(value[top_key], dict):
            raise ConfigShapeError(f'"{top_key}" is not an object')
        blocks.append((top_key,))
    if projects and isinstance(value.get("projects"), dict):
        for path, project in value["projects"].items():
            if isinstance(project, dict) and "mcpServers" in project:
                if not isinstance(project["mcpServers"], dict):
                    raise ConfigShapeError(f'"projects" → "{path}" → "mcpServers" is not an object')
                blocks.append(("projects", path, "mcpServers"))
    return blocks


def guess_top_key(value: Any) -> str:
    """For a file of unknown origin: ``mcpServers``, VS Code's ``servers`` or Zed's ``context_servers``;
    ConfigShapeError if none."""
    if isinstance(value, dict):
        for key in ("mcpServers", "servers", "context_servers"):
            if key in value:
                return key
    raise ConfigShapeError('no "mcpServers" (or "servers") block, nor Zed\'s "context_servers"')


def block_label(block: Block) -> str:
    """How a block is named to a person: empty for the top level, ``project PATH`` for Claude Code's."""
    return f"project {block[1]}" if len(block) == 3 and block[0] == "projects" else ""


@dataclass(frozen=True)
class Entry:
    block: Block
    name: str
    kind: str
    detail: str = ""  # the URL of a remote server, the reason an entry is unusable


def classify(entry: Any) -> tuple[str, str]:
    if not isinstance(entry, dict):
        return UNUSABLE, "the entry is not an object"
    if UPSTREAM_KEY in entry:
        if not isinstance(entry[UPSTREAM_KEY], dict):
            return UNUSABLE, f'"{UPSTREAM_KEY}" is not an object'
        return WRAPPED, ""
    for key in REMOTE_KEYS:
        if key in entry:
            return REMOTE, str(entry[key])
    if entry.get("type") in REMOTE_TYPES:
        return REMOTE, f"type {entry['type']}"
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        return UNUSABLE, 'no "command"'
    if os.path.basename(command) == SHIM_NAME:
        return SHIMMED, ""
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        return UNUSABLE, '"args" is not a list of strings'
    if not isinstance(entry.get("env", {}), dict):  # init adds to it: it must be an object
        return UNUSABLE, '"env" is not an object'
    return STDIO, ""


def entries(value: Any, blocks: Iterable[Block]) -> list[Entry]:
    found = []
    for block in blocks:
        for name, entry in value_at(value, block).items():
            kind, detail = classify(entry)
            if kind == STDIO and not name:
                kind, detail = UNUSABLE, "the server name is empty"
            found.append(Entry(block, name, kind, detail))
    return found


@dataclass(frozen=True)
class RemoteTarget:
    url: str
    transport: str  # "streamable-http" or "sse"
    headers: tuple[tuple[str, str], ...]


def remote_target(entry: Any, *, bare_url: str = "streamable-http") -> RemoteTarget | str:
    """How the bridge reaches a remote entry, or why it cannot (the reason, for NOT PROTECTED).

    `bare_url`: the transport of a ``url`` with no ``type`` (``sse`` for Gemini CLI)."""
    if not isinstance(entry, dict):
        return "the entry is not an object"
    kind = entry.get("type")
    if "httpUrl" in entry:
        key, transport = "httpUrl", "streamable-http"
    elif "serverUrl" in entry:
        key = "serverUrl"
        transport = BRIDGED_TYPES.get(kind, "") if kind is not None else "streamable-http"
    elif "url" in entry:
        key, transport = "url", BRIDGED_TYPES.get(kind, "") if kind is not None else bare_url
    else:
        return f"type {kind} without a URL"
    if not transport:
        return f"the bridge does not speak type {kind!r}"
    url = entry[key]
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return f"{key} is not an http(s) URL"
    if kind is None and key != "httpUrl" and url.partition("?")[0].rstrip("/").endswith("/sse"):
        transport = "sse"  # no type to go by: a path ending in /sse is the legacy transport's endpoint
    if "command" in entry:
        return f'both "command" and "{key}"'
    headers = entry.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        return '"headers" is not an object of strings'
    for extra in ("headersHelper", "oauth", "authProviderType"):
        if extra in entry:
            return f'"{extra}" (the client computes its credentials; the bridge cannot)'
    if any(not name or "=" in name or "\x00" in name for name in headers):
        return "a header name the environment cannot carry"
    return RemoteTarget(url, transport, tuple(headers.items()))


def unprotected(entry: Entry, *, bare_url: str = "streamable-http", value: Any = None) -> str | None:
    """Why an entry stays NOT PROTECTED after init, or None: a remote entry the bridge cannot reach."""
    if entry.kind != REMOTE:
        return None
    target = remote_target(value, bare_url=bare_url) if value is not None else entry.detail
    return target if isinstance(target, str) else None


# ---- the change, on values --------------------------------------------------------------------------


def shim_args(name: str, entry: dict[str, Any]) -> list[Any]:
    return ["--name", name, "--", entry["command"], *entry.get("args", [])]


def added_env(entry: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """The variables of `env` the entry does not set itself (its own settings win: the person wrote them)."""
    own = entry.get("env")
    own = own if isinstance(own, Mapping) else {}
    return {key: value for key, value in env.items() if key not in own}


def remote_args(name: str, target: RemoteTarget) -> list[str]:
    return ["--name", name, "--url", target.url, "--transport", target.transport]


def header_env(target: RemoteTarget) -> dict[str, str]:
    return {HEADER_ENV_PREFIX + key: value for key, value in target.headers}


def wrap_value(
    name: str,
    entry: dict[str, Any],
    shim: str,
    env: Mapping[str, str] = _NO_ENV,
    *,
    upstream: bool = True,
    bare_url: str = "streamable-http",
) -> dict[str, Any]:
    if classify(entry)[0] == REMOTE:
        return _wrap_remote_value(name, entry, shim, env, upstream=upstream, bare_url=bare_url)
    wrapped: dict[str, Any] = {}
    for key, item in entry.items():
        if key == "command":
            wrapped["command"] = shim
            wrapped["args"] = shim_args(name, entry)
        elif key != "args":
            wrapped[key] = copy.deepcopy(item)
    extra = added_env(entry, env)
    if extra:
        wrapped["env"] = {**wrapped.get("env", {}), **extra}
    if upstream:
        wrapped[UPSTREAM_KEY] = copy.deepcopy(entry)
    return wrapped


def _wrap_remote_value(
    name: str, entry: dict[str, Any], shim: str, env: Mapping[str, str], *, upstream: bool, bare_url: str
) -> dict[str, Any]:
    target = remote_target(entry, bare_url=bare_url)
    assert isinstance(target, RemoteTarget)  # select() wraps only the remote entries the bridge reaches
    wrapped: dict[str, Any] = {}
    if "type" in entry:
        wrapped["type"] = "stdio"
    wrapped["command"] = shim
    wrapped["args"] = remote_args(name, target)
    for key, item in entry.items():
        if key not in REMOTE_MEMBERS and key != "env":
            wrapped[key] = copy.deepcopy(item)
    own_env = entry.get("env")
    own: dict[str, Any] = own_env if isinstance(own_env, dict) else {}
    extra = {**header_env(target), **added_env(entry, env)}
    if own or extra:
        wrapped["env"] = {**copy.deepcopy(own), **extra}
    if upstream:
        wrapped[UPSTREAM_KEY] = copy.deepcopy(entry)
    return wrapped


def unwrap_value(entry: dict[str, Any]) -> dict[str, Any]:
    upstream: dict[str, Any] = copy.deepcopy(entry[UPSTREAM_KEY])
    return upstream


def dropped_on_undo(
    entry: dict[str, Any], upstream: dict[str, Any] | None = None, env: Mapping[str, str] = _NO_ENV
) -> list[str]:
    """Keys of a wrapped entry changed (or added) after init: undo restores the original and drops them.

    `upstream` is the original entry (default: the one kept under ``x-bouncer-upstream``); `env` the
    variables init adds, which are no change of the person's."""
    if upstream is None:
        upstream = entry[UPSTREAM_KEY]
    assert upstream is not None
    ignored = {"command", "args", UPSTREAM_KEY}
    headers: dict[str, str] = {}
    if classify(upstream)[0] == REMOTE:
        ignored |= set(REMOTE_MEMBERS)
        target = remote_target(upstream)
        headers = header_env(target) if isinstance(target, RemoteTarget) else {}
    expected = {**entry, "env": {**upstream.get("env", {}), **headers, **added_env(upstream, env)}}
    if not expected["env"]:
        del expected["env"]
    keys = (set(entry) | set(upstream)) - ignored
    return sorted(
        key
        for key in keys
        if entry.get(key, _MISSING) != (expected if key == "env" else upstream).get(key, _MISSING)
    )


# ---- the change, on text ----------------------------------------------------------------------------


def _wrap_remote_text(
    doc: Document, name_member: Member, shim: str, env: Mapping[str, str], *, upstream: bool, bare_url: str
) -> str:
    """A remote entry's new text: the wrapped members in the entry's own layout, then the original."""
    entry = name_member.value
    original = doc.text[entry.start : entry.end]
    name = json.loads(doc.text[name_member.key_start : name_member.key_end])
    value = _wrap_remote_value(name, json.loads(doc.blanked[entry.start : entry.end]), shim, env,
                               upstream=False, bare_url=bare_url)  # fmt: skip
    layout = jsonedit.layout_of(doc, entry)
    members = [json.dumps(k, ensure_ascii=False) + layout.colon + json.dumps(v, ensure_ascii=False)
               for k, v in value.items()]  # fmt: skip
    if upstream:
        members.append(json.dumps(UPSTREAM_KEY) + layout.colon + jsonedit.indent_more(original, layout.unit))
    if layout.separator.startswith("," + doc.newline):
        indent = layout.separator[1 + len(doc.newline) :]
        closing = (
            doc.newline + jsonedit.indent_at(doc.text, entry.end - 1)
            if jsonedit.first_on_line(doc.blanked, entry.end - 1)
            else ""
        )
        return "{" + doc.newline + indent + layout.separator.join(members) + closing + "}"
    return "{" + layout.separator.join(members) + "}"


def _wrap_text(
    doc: Document,
    name_member: Member,
    shim: str,
    env: Mapping[str, str] = _NO_ENV,
    *,
    upstream: bool = True,
    bare_url: str = "streamable-http",
) -> str:
    text = doc.text
    entry = name_member.value
    if classify(json.loads(doc.blanked[entry.start : entry.end]))[0] == REMOTE:
        return _wrap_remote_text(doc, name_member, shim, env, upstream=upstream, bare_url=bare_url)
    command = entry.member("command")
    assert command is not None  # classify() said STDIO
    args = entry.member("args")
    layout = jsonedit.layout_of(doc, entry)
    items = ['"--name"', text[name_member.key_start : name_member.key_end], '"--"']
    items.append(text[command.value.start : command.value.end])
    if args is not None:
        items += [text[item.start : item.end] for item in args.value.items or []]
    edits = [(command.value.start, command.value.end, json.dumps(shim, ensure_ascii=False))]
    if args is not None:
        edits.append((args.value.start, args.value.end, jsonedit.array_text(doc, args.value, items)))
    else:
        inline = "[" + ", ".join(items) + "]"
        edits.append(
            (command.value.end, command.value.end, layout.separator + '"args"' + layout.colon + inline)
        )
    original = text[entry.start : entry.end]
    env_edit = jsonedit.add_strings_edit(
        doc, entry, "env", added_env(json.loads(doc.blanked[entry.start : entry.end]), env)
    )
    if env_edit is not None:
        edits.append(env_edit)
    if upstream:
        last = (entry.members or [])[-1].value
        kept = (
            layout.separator
            + json.dumps(UPSTREAM_KEY)
            + layout.colon
            + jsonedit.indent_more(original, layout.unit)
        )
        edits.append((last.end, last.end, kept))
    return jsonedit.apply_edits(original, entry.start, edits)


def _unwrap_text(doc: Document, entry: Node) -> str:
    upstream = entry.member(UPSTREAM_KEY)
    assert upstream is not None  # classify() said WRAPPED
    raw = doc.text[upstream.value.start : upstream.value.end]
    restored = jsonedit.indent_less(raw, jsonedit.layout_of(doc, entry).unit)
    return raw if restored is None else restored


# ---- the change, whole -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    block: Block
    name: str
    action: str  # WRAP or UNWRAP
    # UNWRAP of an entry without x-bouncer-upstream: the entry's original text, kept in init's undo record
    original: str | None = None


@dataclass
class Rewrite:
    text: str
    value: Any
    in_place: bool  # False: re-serialised (formatting normalised)
    edits: list[tuple[int, int, str]] = field(default_factory=list)  # in place: [start, end) of the old text


def expected_value(
    doc: Document,
    changes: Iterable[Change],
    shim: str,
    env: Mapping[str, str] = _NO_ENV,
    *,
    upstream: bool = True,
    bare_url: str = "streamable-http",
) -> Any:
    """The document's value with `changes` made. Only the containers on the way are copied."""
    value = dict(doc.value)
    copied: set[Block] = {()}
    for change in changes:
        container = value
        for depth, key in enumerate(change.block, start=1):
            if change.block[:depth] not in copied:
                container[key] = dict(container[key])
                copied.add(change.block[:depth])
            container = container[key]
        entry = container[change.name]
        if change.action == WRAP:
            container[change.name] = wrap_value(
                change.name, entry, shim, env, upstream=upstream, bare_url=bare_url
            )
        elif change.original is not None:
            container[change.name] = parse(change.original).value
        else:
            container[change.name] = unwrap_value(entry)
    return value


def apply(
    doc: Document,
    changes: Sequence[Change],
    shim: str = "",
    env: Mapping[str, str] = _NO_ENV,
    *,
    in_place: bool = True,
    upstream: bool = True,
    bare_url: str = "streamable-http",
) -> Rewrite:
    """`changes` made to the document: in place if that gives the expected value, else re-serialised.

    `env`: variables each wrapped entry must carry (added to its ``env`` where it does not set them).
    `upstream` False: the original entry is not kept in the file (a client whose schema rejects unknown
    keys); init keeps its text in an undo record instead, and gives it back as `Change.original`."""
    expected = expected_value(doc, changes, shim, env, upstream=upstream, bare_url=bare_url)
    if in_place:
        edits = []
        for change in changes:
            block = node_at(doc.root, change.block)
            member = block.member(change.name) if block is not None else None
            if member is None:
                break
            if change.action == WRAP:
                new = _wrap_text(doc, member, shim, env, upstream=upstream, bare_url=bare_url)
            elif change.original is not None:
                new = change.original
            else:
                new = _unwrap_text(doc, member.value)
            edits.append((member.value.start, member.value.end, new))
        else:
            text = jsonedit.apply_edits(doc.text, 0, edits)
            try:
                if parse(text).value == expected:
                    return Rewrite(text, expected, in_place=True, edits=sorted(edits))
            except McpConfigError:
                pass
    if doc.has_comments:
        raise RewriteError("the file has comments, and the change cannot be made without dropping them")
    return Rewrite(serialise(expected, doc.text), expected, in_place=False)


def detect_indent(text: str) -> str | None:
    """The indentation unit of a JSON text: a tab, some spaces, or None for a one-line document."""
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else lead
    return None


def serialise(value: Any, like: str) -> str:
    """`value` as JSON in the style of the text `like`: its indent, newlines, final newline and BOM."""
    body = json.dumps(value, indent=detect_indent(like), ensure_ascii=False)
    if like.rstrip(" \t").endswith("\n"):
        body += "\n"
    if "\r\n" in like:
        body = body.replace("\n", "\r\n")
    return ("\ufeff" if like.startswith("\ufeff") else "") + body
