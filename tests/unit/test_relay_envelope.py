"""Reading a response's envelope from the ends of a line: right when it answers, silent otherwise."""

from __future__ import annotations

import json
from typing import Any

from bouncer_shim.envelope import peek, peek_ends
from hypothesis import given, settings
from hypothesis import strategies as st

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
ids = st.integers() | st.text(max_size=10)


def test_python_sdk_order() -> None:
    env = peek(b'{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"id"}]}}')
    assert env.is_response and env.members["id"] == 5 and env.first_structured == "result"


def test_typescript_sdk_order_with_quotes_and_escapes_in_the_body() -> None:
    env = peek(b'{"result":{"text":"x\\",\\"id\\":9,\\"y\\":\\""},"jsonrpc":"2.0","id":"a\\"b"}\n')
    assert env.is_response and env.members["id"] == 'a"b' and env.first_structured == "result"


def test_errors_and_whitespace() -> None:
    env = peek(b' { "error" : { "code" : 1 } ,\r\n "id" : -15 } ')
    assert env.is_response and env.members["id"] == -15 and env.first_structured == "error"


def test_nested_ids_are_never_taken_for_the_envelope() -> None:
    assert not peek(b'{"result":{"id":3}}').is_response
    assert not peek(b'{"params":{"id":3},"method":"x"}').is_response
    assert not peek(b'[{"jsonrpc":"2.0","id":1,"result":{}}]').is_response


def test_excerpts_of_an_over_long_line() -> None:
    head, tail = b'{"result":{"content":[{"text":"xxxx', b'xxxx"}]},"jsonrpc":"2.0","id":77}'
    env = peek_ends(head, tail)
    assert env.members["id"] == 77


@settings(max_examples=200, deadline=None)
@given(
    request_id=ids,
    body=values,
    extra=st.dictionaries(st.sampled_from(["_meta", "jsonrpc", "x", "note"]), values, max_size=3),
    kind=st.sampled_from(["result", "error"]),
    order=st.randoms(use_true_random=False),
    indent=st.sampled_from([None, 0, 2]),
)
def test_whatever_it_reads_agrees_with_a_full_parse(
    request_id: Any, body: Any, extra: dict[str, Any], kind: str, order: Any, indent: int | None
) -> None:
    members = [("id", request_id), (kind, body), *extra.items()]
    order.shuffle(members)
    line = json.dumps(dict(members), indent=indent).encode()
    env = peek(line)
    parsed = json.loads(line)
    for key, value in env.members.items():
        assert parsed[key] == value
    if env.is_response:
        assert env.first_structured in parsed
        assert isinstance(parsed[env.first_structured], dict | list)
    if members[0][0] == kind and isinstance(body, dict | list) and members[-1][0] == "id":
        assert env.is_response and env.members["id"] == request_id  # the TypeScript SDK's order


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=200))
def test_any_bytes_give_an_envelope_never_an_exception(head: bytes, tail: bytes) -> None:
    peek(head + tail)
    peek_ends(head, tail)
