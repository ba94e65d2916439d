"""The shim's pure parsing layers over arbitrary bytes: the line splitter and the envelope reader.

- `LineSplitter` (lines.py), fed any bytes in any chunking, with a small line limit so over-long lines
  are common: it never raises, hands out exactly the lines of the input (each one whole, or an
  `OversizedLine` with its true size and its real first and last bytes), and never holds more than the
  limit plus one chunk (the attack: a peer that never sends a newline grows the shim without bound).
- `envelope.peek` (envelope.py), over any line: it never raises, and what it reads is true of the
  line: every member it reports is a top-level member of the parsed object with that value, and the
  key it reports as the first structured member holds an object or array there (the attack: an ``id``
  or a ``result`` inside a string or a nested object, read as the envelope's, would let one response
  be taken for another's).
"""

from __future__ import annotations

import json
import math
from typing import Any

from _counts import ran
from bouncer_shim.envelope import peek
from bouncer_shim.lines import EXCERPT_BYTES, LineSplitter, OversizedLine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonish import lines

EXAMPLES = 300
SMALL_LIMIT = 64


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(
        st.one_of(lines(), st.binary(max_size=300), st.integers(0, 20_000).map(lambda n: b"x" * n)),
        max_size=6,
    ),
    st.lists(st.integers(1, 9000), min_size=1, max_size=8),
    st.integers(1, 10_000),
)
def test_line_splitter_hands_out_exactly_the_input_lines_in_bounded_memory(
    pieces: list[bytes], chunks: list[int], limit_choice: int
) -> None:
    ran("shim line splitter (lines.py)")
    limit = SMALL_LIMIT if limit_choice % 2 else limit_choice
    data = b"\n".join(pieces)
    splitter = LineSplitter(max_line=limit)
    got: list[bytes | OversizedLine] = []
    at, i = 0, 0
    while at < len(data):
        size = chunks[i % len(chunks)]
        i += 1
        got.extend(splitter.feed(data[at : at + size]))
        at += size
        assert splitter.buffered <= limit + size + 2 * EXCERPT_BYTES
    last = splitter.close()
    if last is not None:
        got.append(last)
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()  # a final newline ends the last line; it does not start another
    assert len(got) == len(expected)
    for line, want in zip(got, expected, strict=True):
        if len(want) <= limit:
            assert line == want
        else:
            assert isinstance(line, OversizedLine)
            assert line.size == len(want)
            assert line.head == want[:EXCERPT_BYTES] and line.tail == want[-EXCERPT_BYTES:]


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b) and type(a) is type(b)


def no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("repeated key")
    return obj


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(lines(), st.sampled_from([b"", b" ", b"\r", b'"x":1,', b'"id":"x",']))
def test_envelope_peek_never_raises_and_reports_only_what_the_line_holds(line: bytes, pad: bytes) -> None:
    ran("shim envelope reader (envelope.py)")
    if pad and line.startswith(b"{"):
        line = b"{" + pad + line[1:]
    envelope = peek(line)
    try:
        parsed = json.loads(line.decode("utf-8"), object_pairs_hook=no_repeats)
    except (ValueError, RecursionError):
        return  # not one JSON object: the relay parses (and refuses) it whole; peek's answer is unused
    if not isinstance(parsed, dict):
        return
    for key, value in envelope.members.items():
        assert key in parsed and same(parsed[key], value), (key, value, line[:300])
    if envelope.first_structured is not None:
        assert isinstance(parsed.get(envelope.first_structured), dict | list), line[:300]
