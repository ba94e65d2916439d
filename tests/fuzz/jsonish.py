"""Hypothesis strategies for JSON-RPC-ish lines: valid messages and everything a hostile peer could send.

Lines are built as text, not with `json.dumps`, so they can hold what a JSON library will not write:
non-finite numbers (``NaN``, ``Infinity``, ``1e999``), integers of thousands of digits, lone surrogates
(``"\\ud800"``), repeated keys, nesting far past any recursion limit, raw non-UTF-8 bytes, truncations
and batch arrays. No generated line contains the text ``fz-``: the tests keep that prefix for the ids
of the calls whose answers they count, so generated noise can neither answer nor cancel them.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

SENTINEL = "fz-"

METHODS = ["tools/call", "tools/list", "initialize", "ping", "resources/read", "prompts/get",
           "completion/complete", "notifications/cancelled", "notifications/initialized",
           "sampling/createMessage", "elicitation/create", "roots/list", "tools/Call", ""]  # fmt: skip
TOOLS = ["safe", "forbidden", "emit", "Forbidden", "forbidden ", "forbidden\u0000", "\u0066orbidden"]


def _text(s: str) -> str:
    return json.dumps(s).replace(SENTINEL, "fz_")


leaves = st.one_of(
    st.sampled_from(["null", "true", "false", "0", "-0", "1.5", "1e999", "-1e999", "NaN", "Infinity",
                     "-Infinity", "1e-400", "18446744073709551616", "-9223372036854775809", '"\\ud800"',
                     '"\\udfff\\ud800"', '"a\\u0000b"', '""', '"\\/"', "{}", "[]"]),
    st.integers().map(str),
    st.integers(300, 6000).map(lambda n: "9" * n),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(max_size=20).map(_text),
    st.sampled_from(TOOLS).map(_text),
    st.sampled_from(['"\\u0066orbidden"', '"forbidde\\u006e"', '"forbidden\\ud800"']),  # escaped spellings
)  # fmt: skip
KEYS = ["name", "arguments", "id", "method", "params", "jsonrpc", "_meta", "uri", "requestId", "cursor", "to"]
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=6)).map(_text)


def values(max_leaves: int = 12) -> st.SearchStrategy[str]:
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
            st.lists(st.tuples(keys, inner), max_size=4).map(
                lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}"
            ),
        ),
        max_leaves=max_leaves,
    )


ids = st.one_of(leaves, st.integers(-(2**70), 2**70).map(str))


@st.composite
def messages(draw: st.DrawFn) -> str:
    """One JSON-RPC-ish object: each member present or not, each value right or wrong in type."""
    members: list[str] = []
    if draw(st.booleans()):
        members.append('"jsonrpc":' + draw(st.sampled_from(['"2.0"', '"1.0"', "2", "null"])))
    if draw(st.integers(0, 4)):
        members.append('"id":' + draw(ids))
    if draw(st.integers(0, 5)):
        members.append('"method":' + draw(st.one_of(st.sampled_from(METHODS).map(_text), leaves)))
    if draw(st.integers(0, 4)):
        name = draw(st.one_of(st.sampled_from(TOOLS).map(_text), leaves))
        args = draw(values())
        params = draw(
            st.sampled_from(
                [
                    f'{{"name":{name},"arguments":{args}}}',
                    f'{{"name":{name}}}',
                    f'{{"name":{name},"name":"safe","arguments":{args}}}',
                    f'{{"name":"safe","arguments":{args},"name":{name}}}',
                    f'{{"uri":{name},"requestId":{args}}}',
                    args,
                ]
            )
        )
        members.append('"params":' + params)
    if draw(st.integers(0, 6)) == 0:
        members.append(
            draw(st.sampled_from(['"result":{}', '"error":{"code":1,"message":"x"}', '"method":"ping"']))
        )
    order = draw(st.permutations(members))
    return "{" + ",".join(order) + "}"


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """A line a client or a server might send (without its newline)."""
    kind = draw(st.integers(0, 9))
    if kind <= 4:
        text = draw(messages())
    elif kind == 5:
        text = "[" + ",".join(draw(st.lists(st.one_of(messages(), leaves), max_size=4))) + "]"
    elif kind == 6:
        depth = draw(st.integers(50, 100_000))
        text = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":' + "[" * depth + "]" * depth + "}"
    elif kind == 7:
        text = draw(values())
    elif kind == 8:
        whole = draw(messages())
        text = whole[: draw(st.integers(0, len(whole)))]  # truncated
    else:
        raw = draw(st.binary(max_size=60)).replace(b"\n", b" ").replace(SENTINEL.encode(), b"fz_")
        return raw
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0:  # a stray non-UTF-8 byte inside an otherwise valid line
        at = draw(st.integers(0, len(data)))
        data = (
            data[:at]
            + draw(st.sampled_from([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\r", b"\x00"]))
            + data[at:]
        )
    return data.replace(b"\n", b" ")
