"""Reading a response's envelope from the ends of a line: right when it answers, silent otherwise."""

from __future__ import annotations

import json
from typing import Any

import pytest
from bouncer_shim.envelope import peek, peek_ends
from bouncer_shim.serverside import ANSWERS_GATED, ENVELOPE_ONLY_BYTES, _may_hide_a_method
from hypothesis import given, settings
from hypothesis import strategies as st
from test_relay import Rig, call, line

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


# ---- the relay: what it may read from the envelope alone -----------------------------------------

PADDING = "x" * ENVELOPE_ONLY_BYTES  # past the size from which the relay reads only the envelope
KEY_SPELLINGS = ('"method"', '"\\u006dethod"', '"m\\u0065thod"', '"metho\\u0064"', '"method" ')


def hidden_request(rid: Any, method: str, key: str, *, indent: bool) -> bytes:
    """A response envelope at both ends, with a server request's members between two structured
    ones, where no walk from the ends reaches them."""
    gap = "\n  " if indent else ""
    return (
        f'{{{gap}"jsonrpc":"2.0",{gap}"id":{json.dumps(rid)},{gap}"result":{{"pad":"{PADDING}"}},'
        f'{gap}{key}:{json.dumps(method)},{gap}"params":{{"messages":[],"maxTokens":9}}{gap}}}'
    ).encode()


@pytest.mark.parametrize("method", sorted(ANSWERS_GATED))
@pytest.mark.parametrize("key", KEY_SPELLINGS)
@pytest.mark.parametrize("rid", ["s1", 7, "answered-call"])
@pytest.mark.parametrize("indent", [False, True])
def test_a_server_request_hidden_inside_a_large_response_still_has_its_answer_judged(
    method: str, key: str, rid: Any, indent: bool
) -> None:
    """The client reads a line with both `result` and `method` as a request and answers it; the
    answer carries its data upstream, so it waits for a verdict as any answer to that request does."""
    rig = Rig()
    if rid == "answered-call":  # the line also answers a call the client made
        rig.client(call(rid, "read_file", {}))
        rig.answer_all()
    rig.upstream(hidden_request(rid, method, key, indent=indent))
    (observed,) = rig.pending("observe")
    assert (observed["kind"], observed["method"]) == ("request", method)
    rig.answer_all()
    sent_before = list(rig.to_upstream)
    answer = line({"jsonrpc": "2.0", "id": rid, "result": {"action": "accept", "content": {"x": "secret"}}})
    rig.client(answer)
    (judged,) = [m for m in rig.unanswered if m["op"] == "verdict" and m.get("kind") == "answer"]
    assert judged["tool"] == method
    assert rig.to_upstream == sent_before  # held for its verdict
    rig.verdict(judged, "deny")
    assert answer not in rig.to_upstream


def large_result(rid: int, result: dict[str, Any], *, typescript_order: bool = False) -> bytes:
    members = [("result", result), ("jsonrpc", "2.0"), ("id", rid)]
    if not typescript_order:
        members.reverse()
    return json.dumps(dict(members), ensure_ascii=False, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    "text",
    [PADDING, PADDING + ' the "method" is simple', PADDING + '\n\t"quoted"', "é" * ENVELOPE_ONLY_BYTES],
)
@pytest.mark.parametrize("typescript_order", [False, True])
def test_a_large_result_is_still_read_from_its_envelope_and_relayed_unchanged(
    text: str, typescript_order: bool
) -> None:
    rig = Rig()
    rig.client(call(3, "read_file", {}))
    rig.answer_all()
    big = large_result(3, {"content": [{"type": "text", "text": text}]}, typescript_order=typescript_order)
    assert not _may_hide_a_method(big)  # read from the envelope
    rig.upstream(big)
    (observed,) = rig.pending("observe")
    assert (observed["kind"], observed["tool"], observed["request_id"]) == ("result", "read_file", 3)
    rig.answer_all()
    assert rig.to_client == [big]


@pytest.mark.parametrize(
    ("value", "spelled"),
    [({"kind": "method"}, None), ({"method": "GET"}, None), ({"kind": 1}, b'"k\\u0069nd"')],
)
def test_a_large_result_that_could_hide_a_method_is_parsed_whole_and_classified_alike(
    value: dict[str, Any], spelled: bytes | None
) -> None:
    rig = Rig()
    rig.client(call(4, "read_file", {}))
    rig.answer_all()
    big = large_result(4, {"content": [{"type": "text", "text": PADDING}], "structuredContent": value})
    if spelled is not None:  # the same key written with an escape
        big = big.replace(b'"kind"', spelled)
    assert _may_hide_a_method(big)
    rig.upstream(big)
    (observed,) = rig.pending("observe")
    assert (observed["kind"], observed["tool"], observed["request_id"]) == ("result", "read_file", 4)
    rig.answer_all()
    assert rig.to_client == [big]
