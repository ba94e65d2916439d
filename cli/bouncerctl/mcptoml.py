"""Codex CLI's ``config.toml``: its ``[mcp_servers.NAME]`` tables wrapped through bouncer-shim, and back.

Theory of operation
-------------------
Codex keeps its MCP servers in TOML (``$CODEX_HOME/config.toml``, default ``~/.codex/config.toml``)::

    [mcp_servers.fs]
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
    env = { "API_KEY" = "..." }        # or a [mcp_servers.fs.env] table

and rejects keys it does not know, so nothing of Bouncer's can live in the entry. `tomlkit` edits the
document in place (comments, quoting, key order and blank lines everywhere else keep their bytes):

- wrap: ``command`` becomes the shim's absolute path, ``args`` ``["--name", NAME, "--", COMMAND,
  *ARGS]``, and the variables init must pass (`bouncerd.paths.entry_env`) are added to ``env`` where
  the entry does not set them. What was there goes into init's undo record (`bouncerctl.init_record`):
  the TOML text of the old ``command`` and ``args`` values and the names of the added ``env`` keys;
- unwrap: those values are parsed back from their text and put in place, the added keys removed
  (and an ``env`` table init created removed whole).

A remote server (``url``: Codex speaks streamable HTTP) is wrapped through the shim's bridge:
``url`` and its credentials (``bearer_token_env_var``, ``http_headers``, ``env_http_headers``) give
way to ``command``, ``args`` (``["--name", NAME, "--url", URL, "--transport", "streamable-http"]``)
and ``env`` entries ``BOUNCER_HEADER_<NAME>`` whose values name the variables (``${VAR}``) rather
than hold secrets; the record keeps each removed key's TOML text, and undo puts them back.

An entry is *wrapped* when it runs bouncer-shim and the record knows it; one that runs bouncer-shim
without a record was set up by hand and is left alone.
"""

from __future__ import annotations

import os.path
import re
from collections.abc import Mapping, Set
from typing import Any

import tomlkit
import tomlkit.exceptions
import tomlkit.items

from bouncerctl import mcpconfig as mc

TOP_KEY = "mcp_servers"
BLOCK: mc.Block = (TOP_KEY,)


def looks_like_toml(path: str, text: str) -> bool:
    """A config to read as TOML: named *.toml, or (no JSON object) opening with a TOML table or key."""
    if path.endswith(".toml"):
        return True
    head = text.lstrip("\ufeff \t\r\n")
    return (bool(head) and head[0] not in "{[/") or head.startswith("[mcp_servers")


def parse(text: str) -> tomlkit.TOMLDocument:
    """Parse TOML; ConfigSyntaxError with line and column if it is not."""
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        message = str(exc).split(" at line ")[0]
        raise mc.ConfigSyntaxError(message, exc.line, exc.col) from None
    except (tomlkit.exceptions.TOMLKitError, ValueError, RecursionError) as exc:
        raise mc.ConfigSyntaxError(str(exc) or type(exc).__name__, 1, 1) from None


def servers(doc: tomlkit.TOMLDocument) -> Any:
    block = doc.get(TOP_KEY)
    if block is not None and not isinstance(block, Mapping):
        raise mc.ConfigShapeError(f'"{TOP_KEY}" is not a table')
    return block


def entries(doc: tomlkit.TOMLDocument, recorded: Set[str]) -> list[mc.Entry]:
    """Each server of the document, classified as in mcpconfig (`recorded`: names with an undo record)."""
    block = servers(doc)
    found = []
    for name, item in (block or {}).items():
        value = item.unwrap() if hasattr(item, "unwrap") else item
        kind, detail = mc.classify(value)
        if kind == mc.SHIMMED and name in recorded:
            kind = mc.WRAPPED
        elif kind == mc.WRAPPED:  # an x-bouncer-upstream key: Codex would refuse the file anyway
            kind, detail = mc.UNUSABLE, f'"{mc.UPSTREAM_KEY}" has no place in a Codex config'
        found.append(mc.Entry(BLOCK, name, kind, detail))
    return found


def _item(text: str) -> Any:
    return tomlkit.parse("v = " + text)["v"]


# Keys of a Codex remote entry that say where it is and how to authenticate: the bridge takes them over.
REMOTE_KEYS = ("url", "bearer_token_env_var", "http_headers", "env_http_headers")


def remote_target(value: Any) -> mc.RemoteTarget | str:
    """How the bridge reaches a Codex remote entry, or why it cannot."""
    if not isinstance(value, Mapping):
        return "the entry is not a table"
    url = value.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return "url is not an http(s) URL"
    if "command" in value:
        return 'both "command" and "url"'
    headers: dict[str, str] = {}
    token = value.get("bearer_token_env_var")
    if token is not None:
        if not isinstance(token, str) or not token:
            return "bearer_token_env_var is not a variable name"
        headers["Authorization"] = "Bearer ${" + token + "}"
    for key, quote in (("http_headers", False), ("env_http_headers", True)):
        table = value.get(key, {})
        if not isinstance(table, Mapping) or not all(isinstance(v, str) for v in table.values()):
            return f"{key} is not a table of strings"
        headers.update({k: "${" + v + "}" if quote else v for k, v in table.items()})
    return mc.RemoteTarget(url, "streamable-http", tuple(headers.items()))


def _add_env(table: Any, extra: Mapping[str, str], record: dict[str, Any]) -> None:
    """Add `extra` to the server's ``env`` table (made inline if it has none); the undo record says
    whether the table was made, so unwrapping removes it again."""
    record["env_created"] = bool(extra) and "env" not in table
    if extra:
        if "env" not in table:
            table["env"] = tomlkit.inline_table()
        for key, item in extra.items():
            table["env"][key] = item


def _remove_env(table: Any, record: Mapping[str, Any]) -> None:
    """Undo `_add_env`: drop the ``env`` table it made, or the variables it added to one."""
    env = table.get("env")
    if record.get("env_created") and env is not None:
        del table["env"]
    elif env is not None:
        for key in record.get("env_added", []):
            if key in env:
                del env[key]


def _wrap_remote(table: Any, name: str, shim: str, env: Mapping[str, str]) -> dict[str, Any]:
    value = table.unwrap()
    target = remote_target(value)
    assert isinstance(target, mc.RemoteTarget)
    removed = {key: table[key].as_string() for key in REMOTE_KEYS if key in table}
    trails = {key: table.value.item(key).trivia.trail for key in removed}
    for key in removed:
        del table[key]
    args = tomlkit.array()
    args.extend(mc.remote_args(name, target))
    table["command"] = shim
    table["args"] = args
    extra = {**mc.header_env(target), **mc.added_env(value, env)}
    record: dict[str, Any] = {
        "format": "toml-remote",
        "removed": removed,
        "trails": trails,
        "env_added": list(extra),
    }
    _add_env(table, extra, record)
    return record


def wrap(doc: tomlkit.TOMLDocument, name: str, shim: str, env: Mapping[str, str]) -> dict[str, Any]:
    """Wrap one server in place; the undo record's entry for it."""
    table = doc[TOP_KEY][name]
    value = table.unwrap()
    if mc.classify(value)[0] == mc.REMOTE:
        return _wrap_remote(table, name, shim, env)
    record: dict[str, Any] = {
        "format": "toml",
        "command": table["command"].as_string(),
        "args": table["args"].as_string() if "args" in table else None,
    }
    args = tomlkit.array()
    args.extend(["--name", name, "--", value["command"], *value.get("args", [])])
    table["command"] = shim
    table["args"] = args
    extra = mc.added_env(value, env)
    record["env_added"] = list(extra)
    _add_env(table, extra, record)
    return record


def unwrap(doc: tomlkit.TOMLDocument, name: str, record: Mapping[str, Any]) -> None:
    """Put one server back as the record says it was. McpConfigError if the record does not fit."""
    table = doc[TOP_KEY][name]
    try:
        if record.get("format") == "toml-remote":
            _unwrap_remote(table, record)
            return
        table["command"] = _item(record["command"])
        if record.get("args") is None:
            if "args" in table:
                del table["args"]
        else:
            table["args"] = _item(record["args"])
        _remove_env(table, record)
    except (KeyError, TypeError, tomlkit.exceptions.TOMLKitError) as exc:
        raise mc.RewriteError(f"{name}: the undo record does not fit this entry ({exc})") from None


def _unwrap_remote(table: Any, record: Mapping[str, Any]) -> None:
    for key in ("command", "args"):
        if key in table:
            del table[key]
    _remove_env(table, record)
    trails = record.get("trails", {})
    for key, text in record["removed"].items():
        table[key] = _item(text)
        if key in trails:
            table.value.item(key).trivia.trail = trails[key]  # the line end it had (tomlkit adds none)


def dumps(doc: tomlkit.TOMLDocument, like: str) -> str:
    """The document as text, with the line ends of `like`: tomlkit writes "\n" for a line it adds."""
    text = tomlkit.dumps(doc)
    if "\r\n" in like:
        text = re.sub(r"(?<!\r)\n", "\r\n", text)
    if not like.endswith("\n"):  # a line added at the end of a file without a final newline ends with one
        text = text.removesuffix("\n").removesuffix("\r")
    return text


def entry_command(doc: tomlkit.TOMLDocument, name: str) -> Any:
    block = servers(doc) or {}
    entry = block.get(name)
    return entry.get("command") if isinstance(entry, Mapping) else None


def is_shim(command: Any) -> bool:
    return isinstance(command, str) and os.path.basename(command) == mc.SHIM_NAME
