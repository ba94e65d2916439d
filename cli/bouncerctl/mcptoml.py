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

An entry is *wrapped* when it runs bouncer-shim and the record knows it; one that runs bouncer-shim
without a record was set up by hand and is left alone. Streamable-HTTP servers (``url``) are remote.
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


def wrap(doc: tomlkit.TOMLDocument, name: str, shim: str, env: Mapping[str, str]) -> dict[str, Any]:
    """Wrap one server in place; the undo record's entry for it."""
    table = doc[TOP_KEY][name]
    value = table.unwrap()
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
    record["env_created"] = bool(extra) and "env" not in table
    if extra:
        if "env" not in table:
            table["env"] = tomlkit.inline_table()
        for key, item in extra.items():
            table["env"][key] = item
    return record


def unwrap(doc: tomlkit.TOMLDocument, name: str, record: Mapping[str, Any]) -> None:
    """Put one server back as the record says it was. McpConfigError if the record does not fit."""
    table = doc[TOP_KEY][name]
    try:
        table["command"] = _item(record["command"])
        if record.get("args") is None:
            if "args" in table:
                del table["args"]
        else:
            table["args"] = _item(record["args"])
        env = table.get("env")
        if record.get("env_created") and env is not None:
            del table["env"]
        elif env is not None:
            for key in record.get("env_added", []):
                if key in env:
                    del env[key]
    except (KeyError, TypeError, tomlkit.exceptions.TOMLKitError) as exc:
        raise mc.RewriteError(f"{name}: the undo record does not fit this entry ({exc})") from None


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
