"""init → undo gives every client's file back byte for byte, init is idempotent, and no server is lost.

Hypothesis generates configs the way people and clients write them: random server names (quotes,
backslashes, non-ASCII), args and env, member order, indentation (none, spaces, tabs), CRLF or LF, a
final newline or not, JSONC comments; and Codex TOML with inline or sub-table env, multi-line arrays
and comments. The properties are checked on the entry-by-entry path (the one undo takes when the file
changed after init), which is the hard one; the whole-file path is covered in test_init_clients.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import tomlkit
from bouncerctl import mcpconfig as mc
from bouncerctl import mcptoml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SHIM = "/opt/bouncer/bin/bouncer-shim"
ENV = {"BOUNCER_HOME": "/home/ann/.bouncer"}

names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=12)
words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=10)
server = st.fixed_dictionaries(
    {"command": words.filter(bool)},
    optional={
        "args": st.lists(words, max_size=4),
        "env": st.dictionaries(st.sampled_from(["A", "TOKEN", "BOUNCER_HOME", "PATH"]), words, max_size=3),
        "cwd": words,
        "trust": st.booleans(),
        "timeout": st.integers(0, 60000),
    },
)
remote = st.fixed_dictionaries({"url": st.just("https://example.com/mcp")})
servers = st.dictionaries(names, st.one_of(server, server, remote), min_size=1, max_size=4)


@st.composite
def json_configs(draw: st.DrawFn) -> tuple[str, str]:
    """(text, top key): a config in one of the layouts clients and people write."""
    top = draw(st.sampled_from(["mcpServers", "servers"]))
    value: dict[str, Any] = {"theme": "dark", top: draw(servers)}
    if draw(st.booleans()):
        value = dict(reversed(list(value.items())))
    for name, entry in list(value[top].items()):  # member order inside entries varies too
        if draw(st.booleans()):
            value[top][name] = dict(reversed(list(entry.items())))
    indent = draw(st.sampled_from([None, 2, 4, "\t"]))
    text = json.dumps(value, indent=indent, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()) and indent is not None:  # JSONC: a comment and a trailing comma
        text = text.replace("{\n", "{ // note\n", 1)
        text = text[: text.rindex("}")].rstrip() + ",\n}"
    if draw(st.booleans()):
        text += "\n"
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return text, top


def _wrap_all(text: str, top: str, *, upstream: bool) -> tuple[str, dict[str, str]]:
    doc = mc.parse(text)
    found = mc.entries(doc.value, mc.find_blocks(doc.value, top))
    changes = [mc.Change(e.block, e.name, mc.WRAP) for e in found if e.kind == mc.STDIO]
    originals = {}
    block = mc.node_at(doc.root, (top,))
    assert block is not None
    for change in changes:
        member = block.member(change.name)
        assert member is not None
        originals[change.name] = text[member.value.start : member.value.end]
    if not changes:
        return text, originals
    return mc.apply(doc, changes, SHIM, ENV, upstream=upstream).text, originals


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(json_configs(), st.booleans())
def test_json_init_then_undo_is_byte_identical_and_init_is_idempotent(
    config: tuple[str, str], upstream: bool
) -> None:
    """Stops: an undo that reformats the person's file, a second init that wraps a wrapped server, and
    an init that drops a server (or a key of one) on the way."""
    text, top = config
    before = mc.parse(text).value
    wrapped, originals = _wrap_all(text, top, upstream=upstream)
    doc = mc.parse(wrapped)
    assert list(doc.value[top]) == list(before[top])  # no server lost, none added, order kept
    for name, entry in before[top].items():
        now = doc.value[top][name]
        if name not in originals:
            assert now == entry
            continue
        assert now["command"] == SHIM
        assert now["args"] == ["--name", name, "--", entry["command"], *entry.get("args", [])]
        assert now.get("env", {}) == {**ENV, **entry.get("env", {})}  # the entry's own values win
        assert (mc.UPSTREAM_KEY in now) is upstream
    again = mc.entries(doc.value, mc.find_blocks(doc.value, top))
    assert not [e for e in again if e.kind == mc.STDIO and e.name in originals]  # idempotent
    if upstream:
        changes = [mc.Change(e.block, e.name, mc.UNWRAP) for e in again if e.kind == mc.WRAPPED]
    else:  # Gemini: the originals come from the undo record
        changes = [mc.Change((top,), name, mc.UNWRAP, original) for name, original in originals.items()]
    restored = mc.apply(doc, changes).text if changes else wrapped
    assert restored == text


def _toml(value: str) -> str:
    return tomlkit.item(value).as_string()


@st.composite
def toml_configs(draw: st.DrawFn) -> str:
    parts = ['# Codex config\nmodel = "o3"\n']
    for i, entry in enumerate(draw(st.lists(server, min_size=1, max_size=3))):
        name = draw(st.sampled_from(["fs", "git-hub", "my_server", '"quoted name"']))
        name = f"{name}{i}" if not name.startswith('"') else f'"{name[1:-1]} {i}"'
        lines = [f"[mcp_servers.{name}]", f"command = {_toml(entry['command'])}"]
        if "args" in entry:
            items = [_toml(a) for a in entry["args"]]
            multi = draw(st.booleans()) and items
            lines.append(
                "args = [\n" + "".join(f"  {item},\n" for item in items) + "]"
                if multi
                else "args = [" + ", ".join(items) + "]" + draw(st.sampled_from(["", "  # why"]))
            )
        env = entry.get("env")
        sub = ""
        if env is not None:
            pairs = [f"{k} = {_toml(v)}" for k, v in env.items()]
            if draw(st.booleans()):
                lines.append("env = { " + ", ".join(pairs) + " }")
            else:
                sub = f"\n[mcp_servers.{name}.env]\n" + "".join(p + "\n" for p in pairs)
        parts.append("\n" + "\n".join(lines) + "\n" + sub)
    text = "".join(parts)
    if draw(st.booleans()):
        text = text.rstrip("\n")
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return text


@FAST
@given(toml_configs())
def test_codex_init_then_undo_is_byte_identical(text: str) -> None:
    """Stops: a Codex config.toml that comes back reformatted or with another server's settings lost."""
    doc = mcptoml.parse(text)
    before = doc.unwrap()["mcp_servers"]
    records = {}
    for entry in mcptoml.entries(doc, set()):
        if entry.kind == mc.STDIO:
            records[entry.name] = mcptoml.wrap(doc, entry.name, SHIM, ENV)
    wrapped = mcptoml.dumps(doc, text)
    after = mcptoml.parse(wrapped)
    assert list(after.unwrap()["mcp_servers"]) == list(before)
    kinds = {e.name: e.kind for e in mcptoml.entries(after, set(records))}
    assert all(kinds[name] == mc.WRAPPED for name in records)
    for name, entry in before.items():
        now = after.unwrap()["mcp_servers"][name]
        assert now["args"] == ["--name", name, "--", entry["command"], *entry.get("args", [])]
        assert now["env"] == {**ENV, **entry.get("env", {})}
    for name, record in records.items():
        mcptoml.unwrap(after, name, record)
    assert mcptoml.dumps(after, text) == text


@pytest.mark.parametrize(
    "text",
    [
        '{"mcpServers":{"a":{"command":"x"}}}',
        '{\r\n\t"mcpServers": {\r\n\t\t"a": {"command": "x", "env": {}}\r\n\t}\r\n}',
        '// c\n{\n  "servers": {\n    "a": {\n      "command": "x", /* keep */\n'
        '      "args": [],\n    },\n  },\n}\n',
    ],
)
def test_edge_layouts_round_trip(text: str) -> None:
    """Stops: the layouts hypothesis rarely draws (no space at all, CRLF with tabs, JSONC) drifting."""
    top = "servers" if '"servers"' in text else "mcpServers"
    for upstream in (True, False):
        wrapped, originals = _wrap_all(text, top, upstream=upstream)
        doc = mc.parse(wrapped)
        if upstream:
            changes = [mc.Change((top,), n, mc.UNWRAP) for n in originals]
        else:
            changes = [mc.Change((top,), n, mc.UNWRAP, o) for n, o in originals.items()]
        assert mc.apply(doc, changes).text == text
