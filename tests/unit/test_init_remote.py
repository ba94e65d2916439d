"""`bouncerctl init` and remote servers: wrapped through the bridge, undone byte for byte, never silent.

The attacks and failures these stop:
- a hosted server (mail, issues, documents) left unwrapped, so a hijacked agent's send through it met
  no gate: every client format's remote entries the bridge speaks are wrapped (``--url``);
- a header secret copied onto the shim's command line, where every local user can read it with
  ``ps``: headers travel in the entry's ``env`` as ``BOUNCER_HEADER_<NAME>``, their ``${VAR}``
  references untouched;
- a remote entry the bridge cannot reach (a websocket, credentials a helper computes) passing
  silently: it stays as it is and gets a reason, which init, status and doctor print as NOT PROTECTED;
- an undo that loses the person's formatting: init then undo gives back the original bytes, over
  generated entries.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from bouncerctl import mcpconfig as mc
from hypothesis import given, settings
from hypothesis import strategies as st

SHIM = "/opt/bouncer/bin/bouncer-shim"


def wrap(text: str, *, bare_url: str = "streamable-http", upstream: bool = True) -> mc.Rewrite:
    doc = mc.parse(text)
    changes = [
        mc.Change(e.block, e.name, mc.WRAP)
        for e in mc.entries(doc.value, mc.find_blocks(doc.value, mc.guess_top_key(doc.value)))
        if e.kind == mc.STDIO
        or isinstance(mc.remote_target(mc.value_at(doc.value, e.block)[e.name]), mc.RemoteTarget)
    ]
    return mc.apply(doc, changes, SHIM, {"BOUNCER_HOME": "/h"}, upstream=upstream, bare_url=bare_url)


def unwrap(text: str) -> mc.Rewrite:
    doc = mc.parse(text)
    changes = [
        mc.Change(e.block, e.name, mc.UNWRAP)
        for e in mc.entries(doc.value, mc.find_blocks(doc.value, mc.guess_top_key(doc.value)))
        if e.kind == mc.WRAPPED
    ]
    return mc.apply(doc, changes)


CLAUDE_CODE = """{
  "mcpServers": {
    "linear": {
      "type": "http",
      "url": "https://mcp.linear.app/mcp",
      "headers": {
        "Authorization": "Bearer ${LINEAR_TOKEN}"
      }
    },
    "notion": {"type": "sse", "url": "https://mcp.notion.com/sse"}
  }
}
"""


def test_remote_entry_runs_the_bridge_and_its_secret_stays_off_the_command_line() -> None:
    done = wrap(CLAUDE_CODE)
    assert done.in_place
    linear = done.value["mcpServers"]["linear"]
    assert linear["type"] == "stdio" and linear["command"] == SHIM
    assert linear["args"] == [
        "--name",
        "linear",
        "--url",
        "https://mcp.linear.app/mcp",
        "--transport",
        "streamable-http",
    ]
    assert "LINEAR_TOKEN" not in json.dumps(linear["args"])
    assert linear["env"] == {"BOUNCER_HEADER_Authorization": "Bearer ${LINEAR_TOKEN}", "BOUNCER_HOME": "/h"}
    assert "url" not in linear and "headers" not in linear  # the client must not reach it directly
    assert done.value["mcpServers"]["notion"]["args"][-1] == "sse"
    assert unwrap(done.text).text == CLAUDE_CODE


def test_gemini_bare_url_is_sse_and_http_url_is_streamable() -> None:
    text = '{"mcpServers": {"a": {"url": "https://a.example/x"}, "b": {"httpUrl": "https://b.example/mcp"}}}'
    value = wrap(text, bare_url="sse", upstream=False).value["mcpServers"]
    assert value["a"]["args"][-1] == "sse" and value["b"]["args"][-1] == "streamable-http"
    assert mc.UPSTREAM_KEY not in value["a"]  # Gemini's schema rejects unknown keys: the record keeps it


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"type": "ws", "url": "wss://x.example/mcp"}, "does not speak type 'ws'"),
        ({"type": "http", "url": "https://x.example/mcp", "headersHelper": "get-token"}, "headersHelper"),
        ({"type": "http", "url": "ftp://x.example/mcp"}, "not an http(s) URL"),
        ({"type": "http", "url": "https://x.example", "headers": {"A": 1}}, "not an object of strings"),
    ],
)
def test_remote_entry_the_bridge_cannot_reach_is_left_and_named(entry: dict[str, Any], reason: str) -> None:
    text = json.dumps({"mcpServers": {"x": entry}})
    assert wrap(text).text == text  # left as it is
    found = mc.remote_target(entry)
    assert isinstance(found, str) and reason in found
    [listed] = mc.entries(mc.parse(text).value, [("mcpServers",)])
    assert mc.unprotected(listed, value=entry) == found


def test_undo_names_nothing_as_changed_after_init_for_a_remote_entry() -> None:
    wrapped = wrap(CLAUDE_CODE).value["mcpServers"]["linear"]
    assert mc.dropped_on_undo(wrapped, env={"BOUNCER_HOME": "/h"}) == []
    edited = {**wrapped, "disabled": True}
    assert mc.dropped_on_undo(edited, env={"BOUNCER_HOME": "/h"}) == ["disabled"]


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_", min_size=1, max_size=12)
header_values = st.one_of(
    st.text(max_size=20), names.map(lambda n: "Bearer ${" + n.upper().replace("-", "_") + "}")
)
remote_entries = st.fixed_dictionaries(
    {
        "url": st.sampled_from(
            ["https://mcp.example/mcp", "http://127.0.0.1:9/sse", "https://h.example/a?b=c"]
        )
    },
    optional={
        "type": st.sampled_from(["http", "sse", "streamable-http"]),
        "headers": st.dictionaries(names, header_values, max_size=3),
        "disabled": st.booleans(),
        "timeout": st.integers(0, 10_000),
        "env": st.dictionaries(names.map(str.upper), st.text(max_size=8), max_size=2),
    },
)


@settings(max_examples=150, deadline=None)
@given(
    servers=st.dictionaries(names, remote_entries, min_size=1, max_size=4),
    indent=st.sampled_from([None, 2, 4, "\t"]),
)
def test_any_remote_entry_wraps_onto_the_bridge_and_undoes_to_the_same_bytes(
    servers: dict[str, dict[str, Any]], indent: int | str | None
) -> None:
    text = json.dumps({"mcpServers": servers}, indent=indent, ensure_ascii=False)
    done = wrap(text)
    for name, entry in servers.items():
        wrapped = done.value["mcpServers"][name]
        # exactly these arguments: no header value is ever on the command line
        assert wrapped["command"] == SHIM and wrapped["args"][:5] == [
            "--name",
            name,
            "--url",
            entry["url"],
            "--transport",
        ]
        assert len(wrapped["args"]) == 6
        for key, value in entry.get("headers", {}).items():
            assert wrapped["env"]["BOUNCER_HEADER_" + key] == value
    assert unwrap(done.text).text == text
