"""The config rewriter (bouncerctl/mcpconfig.py) on sample configs of every client, without files.

Each sample in fixtures/mcpconfigs/ is wrapped and unwrapped; what must hold: undo gives back the
original bytes (and the original value always), nothing but the server entries changes, remote
servers and broken entries are left alone, a second init changes nothing, and bad input is one error
type with a line and column.
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from bouncerctl import mcpconfig as mc
from hypothesis import given, settings
from hypothesis import strategies as st

FIXTURES = Path(__file__).parent / "fixtures" / "mcpconfigs"
SHIM = "/opt/bouncer/bin/bouncer-shim"
SAMPLES = sorted(p.name for p in FIXTURES.glob("*.json") if p.name != "malformed.json")


def read(name: str) -> str:
    return (FIXTURES / name).read_bytes().decode("utf-8")


def blocks_of(doc: mc.Document) -> list[mc.Block]:
    return mc.find_blocks(doc.value, mc.guess_top_key(doc.value), projects=True)


def wrap_all(text: str, shim: str = SHIM, *, in_place: bool = True) -> mc.Rewrite:
    doc = mc.parse(text)
    changes = [
        mc.Change(e.block, e.name, mc.WRAP)
        for e in mc.entries(doc.value, blocks_of(doc))
        if e.kind == mc.STDIO
    ]
    return mc.apply(doc, changes, shim, in_place=in_place)


def unwrap_all(text: str, *, in_place: bool = True) -> mc.Rewrite:
    doc = mc.parse(text)
    changes = [
        mc.Change(e.block, e.name, mc.UNWRAP)
        for e in mc.entries(doc.value, blocks_of(doc))
        if e.kind == mc.WRAPPED
    ]
    return mc.apply(doc, changes, in_place=in_place)


def servers(value: Any) -> dict[str, Any]:
    """Every server entry of a config value, keyed by block and name."""
    found = {}
    for block in mc.find_blocks(value, mc.guess_top_key(value), projects=True):
        for name, entry in mc.value_at(value, block).items():
            found["/".join((*block, name))] = entry
    return found


# ---- round trips on every client's sample ------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_init_then_undo_gives_back_the_original_bytes(name: str) -> None:
    original = read(name)
    wrapped = wrap_all(original)
    assert wrapped.in_place and wrapped.text != original
    restored = unwrap_all(wrapped.text)
    assert restored.in_place
    assert restored.text == original


@pytest.mark.parametrize("name", SAMPLES)
def test_init_changes_only_the_stdio_entries_and_keeps_their_environment(name: str) -> None:
    original = mc.parse(read(name)).value
    after = mc.parse(wrap_all(read(name)).text).value
    before_servers, after_servers = servers(original), servers(after)
    for key, entry in before_servers.items():
        kind, _ = mc.classify(entry)
        if kind != mc.STDIO:
            assert after_servers[key] == entry  # remote and broken entries untouched
            continue
        wrapped = after_servers[key]
        assert wrapped["command"] == SHIM
        assert wrapped["args"] == [
            "--name",
            key.rsplit("/", 1)[1],
            "--",
            entry["command"],
            *entry.get("args", []),
        ]
        assert wrapped[mc.UPSTREAM_KEY] == entry
        for other in set(entry) - {"command", "args"}:
            assert wrapped[other] == entry[other]  # env, cwd, type, envFile, disabled, ...
    # everything outside the server entries is the same value
    strip = copy.deepcopy(after)
    for block in mc.find_blocks(strip, mc.guess_top_key(strip), projects=True):
        mc.value_at(strip, block).clear()
    base = copy.deepcopy(original)
    for block in mc.find_blocks(base, mc.guess_top_key(base), projects=True):
        mc.value_at(base, block).clear()
    assert strip == base


@pytest.mark.parametrize("name", SAMPLES)
def test_a_second_init_changes_nothing(name: str) -> None:
    doc = mc.parse(wrap_all(read(name)).text)
    kinds = {e.kind for e in mc.entries(doc.value, blocks_of(doc))}
    assert mc.STDIO not in kinds
    assert mc.WRAPPED in kinds


@pytest.mark.parametrize("name", SAMPLES)
def test_reserialising_fallback_is_semantically_identical(name: str) -> None:
    original = read(name)
    doc = mc.parse(original)
    if doc.has_comments:
        with pytest.raises(mc.RewriteError, match="comments"):
            wrap_all(original, in_place=False)
        return
    wrapped = wrap_all(original, in_place=False)
    assert not wrapped.in_place
    restored = unwrap_all(wrapped.text, in_place=False)
    assert json.loads(restored.text) == json.loads(original)
    assert restored.text.endswith("\n") == original.endswith("\n")


def test_windows_line_endings_and_a_bom_survive_the_round_trip() -> None:
    original = "\ufeff" + read("claude_desktop_config.json").replace("\n", "\r\n")
    wrapped = wrap_all(original)
    assert wrapped.text.startswith("\ufeff")
    assert "\n" not in wrapped.text.replace("\r\n", "")  # no bare newline was introduced
    assert unwrap_all(wrapped.text).text == original


def test_tab_indented_file_stays_tab_indented() -> None:
    wrapped = wrap_all(read("windsurf_mcp_config.json")).text
    indents = {line[: len(line) - len(line.lstrip(" \t"))] for line in wrapped.splitlines()}
    assert all(set(indent) <= {"\t"} for indent in indents)
    assert '\t\t\t"x-bouncer-upstream": {\n\t\t\t\t"command": "uvx",' in wrapped


def test_reserialising_keeps_the_detected_indent() -> None:
    text = wrap_all(read("cursor_mcp.json"), in_place=False).text
    assert text.startswith('{\n    "mcpServers": {\n        "github": {\n')
    assert mc.detect_indent(read("windsurf_mcp_config.json")) == "\t"
    assert mc.detect_indent(read("minified.json")) is None


def test_escapes_in_the_original_tokens_are_copied_not_reencoded() -> None:
    text = '{"mcpServers": {"caf\\u00e9": {"command": "n\\u006fde", "args": ["\\"x\\""]}}}'
    wrapped = wrap_all(text).text
    assert '"args": ["--name", "caf\\u00e9", "--", "n\\u006fde", "\\"x\\""]' in wrapped
    value = json.loads(wrapped)["mcpServers"]["café"]
    assert value["args"] == ["--name", "café", "--", "node", '"x"']


def test_comment_markers_inside_strings_are_text() -> None:
    text = '{"mcpServers": {"a": {"command": "x", "args": ["http://h//p", "/* no */"]}}} // end\n'
    doc = mc.parse(text)
    assert doc.value["mcpServers"]["a"]["args"] == ["http://h//p", "/* no */"]
    assert unwrap_all(wrap_all(text).text).text == text


def test_repeated_key_is_read_as_json_loads_reads_it() -> None:
    text = '{"mcpServers": {"a": {"command": "old"}, "a": {"command": "new", "args": []}}}'
    wrapped = json.loads(wrap_all(text).text)
    assert wrapped["mcpServers"]["a"]["args"] == ["--name", "a", "--", "new"]
    assert unwrap_all(wrap_all(text).text).text == text


def test_entry_without_args_gets_them_after_command() -> None:
    text = (
        '{\n  "mcpServers": {\n    "m": {\n      "command": "mem",\n      "env": {"A": "1"}\n    }\n  }\n}\n'
    )
    wrapped = wrap_all(text).text
    assert (
        '      "command": "/opt/bouncer/bin/bouncer-shim",\n      "args": ["--name", "m", "--", "mem"],\n'
        in wrapped
    )
    assert unwrap_all(wrapped).text == text


def test_undo_after_the_wrapped_entry_was_reindented_by_hand_is_still_exact_in_value() -> None:
    wrapped = wrap_all(read("claude_code.mcp.json")).text
    mangled = wrapped.replace('\n        "command": "npx",', '\n  "command": "npx",')
    restored = unwrap_all(mangled)
    assert json.loads(restored.text) == json.loads(read("claude_code.mcp.json"))


def test_changes_made_after_init_are_named_before_undo_drops_them() -> None:
    doc = mc.parse(wrap_all(read("claude_desktop_config.json")).text)
    entry = copy.deepcopy(doc.value["mcpServers"]["gmail"])
    assert mc.dropped_on_undo(entry) == []
    entry["env"]["NEW"] = "1"
    entry["timeout"] = 5
    assert mc.dropped_on_undo(entry) == ["env", "timeout"]


# ---- classification ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        ({"command": "npx", "args": ["-y", "x"]}, mc.STDIO),
        ({"type": "stdio", "command": "uvx"}, mc.STDIO),
        ({"url": "https://h/mcp"}, mc.REMOTE),
        ({"type": "http", "url": "https://h/mcp", "headers": {}}, mc.REMOTE),
        ({"type": "sse", "command": "odd"}, mc.REMOTE),
        ({"serverUrl": "https://h/sse"}, mc.REMOTE),
        ({"httpUrl": "https://h/mcp"}, mc.REMOTE),
        ({"command": "/usr/bin/bouncer-shim", "args": ["--", "x"]}, mc.SHIMMED),
        ({"command": SHIM, "args": [], mc.UPSTREAM_KEY: {"command": "x"}}, mc.WRAPPED),
        ({"command": SHIM, mc.UPSTREAM_KEY: "x"}, mc.UNUSABLE),
        ({"args": ["x"]}, mc.UNUSABLE),
        ({"command": ""}, mc.UNUSABLE),
        ({"command": "x", "args": "one string"}, mc.UNUSABLE),
        ({"command": "x", "args": [1]}, mc.UNUSABLE),
        (["command"], mc.UNUSABLE),
    ],
)
def test_classify(entry: Any, kind: str) -> None:
    assert mc.classify(entry)[0] == kind


def test_remote_entry_detail_is_its_url() -> None:
    doc = mc.parse(read("windsurf_mcp_config.json"))
    remote = [e for e in mc.entries(doc.value, blocks_of(doc)) if e.kind == mc.REMOTE]
    assert [(e.name, e.detail) for e in remote] == [("zapier", "https://actions.zapier.com/mcp/KEY/sse")]


def test_claude_code_project_blocks_are_found_and_labelled() -> None:
    doc = mc.parse(read("claude.json"))
    blocks = mc.find_blocks(doc.value, "mcpServers", projects=True)
    assert blocks == [
        ("mcpServers",),
        ("projects", "/home/ana/work/api", "mcpServers"),
        ("projects", "/home/ana/notes", "mcpServers"),
    ]
    assert mc.block_label(blocks[1]) == "project /home/ana/work/api"
    assert mc.block_label(blocks[0]) == ""


# ---- bad input: one error type, with a place --------------------------------------------------------


def test_malformed_json_names_line_and_column() -> None:
    with pytest.raises(mc.ConfigSyntaxError) as caught:
        mc.parse(read("malformed.json"))
    assert (caught.value.line, caught.value.column) == (4, 5)
    assert "line 4, column 5" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("", "line 1, column 1"),
        ('{"mcpServers": {} /* open', "line 1, column 19"),
        ('{"a": 1}\n{"b": 2}', "line 2, column 1"),
        ('{"a": "no end}', "line 1, column 7"),
        ("[" * 5000, "line 1"),
    ],
)
def test_syntax_errors(text: str, where: str) -> None:
    with pytest.raises(mc.ConfigSyntaxError, match=where):
        mc.parse(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "top level is not a JSON object"),
        ('{"mcpServers": []}', '"mcpServers" is not an object'),
        ('{"projects": {"/p": {"mcpServers": 3}}}', '"mcpServers" is not an object'),
    ],
)
def test_shape_errors(text: str, message: str) -> None:
    with pytest.raises(mc.ConfigShapeError, match=message):
        mc.find_blocks(mc.parse(text).value, "mcpServers", projects=True)


def test_a_file_without_a_server_block_is_named_as_such() -> None:
    with pytest.raises(mc.ConfigShapeError, match='no "mcpServers"'):
        mc.guess_top_key({"other": 1})
    assert mc.guess_top_key({"servers": {}}) == "servers"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[]",:/*\n \t\\abc01-', max_size=60))
def test_any_text_parses_or_raises_the_one_error_type(text: str) -> None:
    with contextlib.suppress(mc.McpConfigError):
        mc.parse(text)


# ---- round trip over generated configs -----------------------------------------------------------------

_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8)
_strings = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=10)
_stdio = st.fixed_dictionaries(
    {"command": _strings.filter(bool), "args": st.lists(_strings, max_size=4)},
    optional={
        "env": st.dictionaries(_names, _strings, max_size=2),
        "cwd": _strings,
        "type": st.just("stdio"),
    },
)
_remote = st.fixed_dictionaries({"url": _strings})


@settings(max_examples=150, deadline=None)
@given(
    servers_=st.dictionaries(_names, st.one_of(_stdio, _remote), max_size=4),
    indent=st.sampled_from([None, 2, 4, "\t"]),
    ascii_only=st.booleans(),
    final_newline=st.booleans(),
)
def test_generated_configs_round_trip_byte_for_byte(
    servers_: dict[str, Any], indent: int | str | None, ascii_only: bool, final_newline: bool
) -> None:
    original = json.dumps(
        {"mcpServers": servers_, "keep": [1, {"x": None}]}, indent=indent, ensure_ascii=ascii_only
    )
    original += "\n" if final_newline else ""
    wrapped = wrap_all(original)
    assert wrapped.in_place
    for name, entry in json.loads(wrapped.text)["mcpServers"].items():
        if "command" in servers_[name] and servers_[name]["command"]:
            assert entry[mc.UPSTREAM_KEY] == servers_[name]
    assert unwrap_all(wrapped.text).text == original
