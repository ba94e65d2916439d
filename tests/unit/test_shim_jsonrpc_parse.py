"""The shim's line parsers (bouncer_shim/jsonrpc.py) read every line as json's own decoder does, and
ids are written back as json writes them.

A line that is one JSON value with nothing around it goes to json's C scanner directly; everything
else goes through the decoder. The attack a difference would open: the shim judging one message
while the server parses another, or a line the server rejects passing as a message (or the reverse).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from bouncer_shim.jsonrpc import INVALID, REPEATED, id_json, parse, parse_client
from hypothesis import given, settings
from hypothesis import strategies as st

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
around = st.sampled_from(["", " ", "\r", "\t\n ", "x", " 1", "{}", "\ufeff"])


def expected(text: str) -> Any:
    try:
        return json.JSONDecoder().decode(text)
    except ValueError:
        return INVALID


@settings(max_examples=300, deadline=None)
@given(value=values, before=around, after=around)
def test_a_line_parses_to_what_json_decodes(value: Any, before: str, after: str) -> None:
    text = before + json.dumps(value, ensure_ascii=False) + after
    line = text.encode("utf-8")
    assert parse(line) == expected(text)
    assert parse_client(line) == expected(text)  # no key repeats in a dict-made text


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b" ",
        b"\r",
        b"{",
        b'{"a":1} {"b":2}',
        b'{"a":1}\r',
        b' {"a":1}',
        b"nul",
        b"1 2",
        b"[1,]",
        b'"\\ud800"',
    ],
)
def test_edge_lines_parse_as_json_decodes_them(line: bytes) -> None:
    assert parse(line) == expected(line.decode("utf-8"))


@pytest.mark.parametrize("line", [b'{"a":1,"a":2}', b' {"a":{"b":1,"b":1}}', b'[{"x":0,"x":0}]\r'])
def test_a_repeated_key_is_refused_wherever_the_value_starts_or_ends(line: bytes) -> None:
    assert parse_client(line) is REPEATED


def test_bytes_that_are_not_utf8_are_invalid() -> None:
    assert parse(b'{"a":"\xff"}') is INVALID
    assert parse_client(b'{"a":"\xff"}') is INVALID


@given(value=st.integers() | st.booleans() | st.none() | st.text(max_size=8))
def test_an_id_is_written_back_as_json_writes_it(value: Any) -> None:
    # id_json spells an int itself (the audit log's text of the id); it must be json's spelling.
    line = json.dumps({"jsonrpc": "2.0", "id": value}).encode()
    assert id_json(value, line) == json.dumps(value, ensure_ascii=True)
