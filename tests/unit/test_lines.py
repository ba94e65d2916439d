"""The bounded line splitter: whole, byte by byte, in random pieces, and past the limit."""

from __future__ import annotations

import itertools

from bouncer_shim.lines import COALESCE_BYTES, EXCERPT_BYTES, MAX_LINE_BYTES, LineSplitter, OversizedLine
from hypothesis import given, settings
from hypothesis import strategies as st

Item = bytes | tuple[int, bytes, bytes]


def _norm(items: list[bytes | OversizedLine]) -> list[Item]:
    return [(i.size, i.head, i.tail) if isinstance(i, OversizedLine) else i for i in items]


def _split(chunks: list[bytes], limit: int) -> list[Item]:
    splitter = LineSplitter(limit)
    out: list[bytes | OversizedLine] = []
    for chunk in chunks:
        out.extend(splitter.feed(chunk))
    last = splitter.close()
    if last is not None:
        out.append(last)
    return _norm(out)


def _expected(data: bytes, limit: int) -> list[Item]:
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    return [
        (len(p), p[:EXCERPT_BYTES], p[-EXCERPT_BYTES:] if p else b"") if len(p) > limit else p for p in pieces
    ]


def test_lines_come_out_whole_and_without_their_newline() -> None:
    assert _split([b'{"a":1}\n{"b":2}\r\n\n{"c"'], MAX_LINE_BYTES) == [b'{"a":1}', b'{"b":2}\r', b"", b'{"c"']


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=3000).map(lambda b: b.replace(b"\x00", b"\n")),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=20),
    limit=st.integers(min_value=1, max_value=200),
)
def test_any_chunking_gives_the_same_lines(data: bytes, cuts: list[int], limit: int) -> None:
    points = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    chunks = [data[a:b] for a, b in itertools.pairwise(points)]
    expected = _expected(data, limit)
    assert _split(chunks, limit) == expected
    assert _split([data[i : i + 1] for i in range(len(data))], limit) == expected


def test_fifty_megabyte_line_passes_intact() -> None:
    line = b"{" + b"x" * (50 * 1024 * 1024) + b"}"
    chunks = [line[i : i + 65536] for i in range(0, len(line), 65536)] + [b"\nnext\n"]
    splitter = LineSplitter()
    out: list[bytes | OversizedLine] = []
    for chunk in chunks:
        out.extend(splitter.feed(chunk))
    assert out == [line, b"next"]


def test_over_limit_line_is_discarded_without_being_held() -> None:
    """A peer streaming an endless line must not grow the splitter past the limit."""
    limit = 1 << 20
    splitter = LineSplitter(limit)
    head = b'{"jsonrpc":"2.0","id":42,"result":"'
    assert splitter.feed(head) == []
    peak = 0
    for _ in range(64):  # 64 MiB through a 1 MiB limit
        assert splitter.feed(b"y" * (1 << 20)) == []
        peak = max(peak, splitter.buffered)
    assert peak <= limit + EXCERPT_BYTES
    (over,) = splitter.feed(b'"}\n')
    assert isinstance(over, OversizedLine)
    assert over.size == len(head) + (64 << 20) + 2
    assert over.head.startswith(head) and len(over.head) == EXCERPT_BYTES
    assert over.tail.endswith(b'y"}') and len(over.tail) == EXCERPT_BYTES
    assert splitter.buffered == 0
    assert splitter.feed(b"ok\n") == [b"ok"]


def test_a_line_written_a_byte_at_a_time_is_gathered_in_big_pieces() -> None:
    splitter = LineSplitter()
    for _ in range(3 * COALESCE_BYTES):
        splitter.feed(b"z")
    assert len(splitter._parts) <= 3  # not one list entry per byte
    assert splitter.feed(b"\n") == [b"z" * (3 * COALESCE_BYTES)]


def test_unterminated_last_line_is_handed_out_at_close() -> None:
    splitter = LineSplitter(10)
    assert splitter.feed(b"abc") == []
    assert splitter.close() == b"abc"
    assert splitter.close() is None
    splitter.feed(b"x" * 20)
    last = splitter.close()
    assert isinstance(last, OversizedLine) and last.size == 20
