"""Following a link as written: a URL written without its scheme in output is the same URL with the
scheme a browser adds.

The cost it removes: a mail says `www.example-docs.com/shared/123`; the agent fetches
`https://www.example-docs.com/shared/123` and was denied (a new path on a planted host). The attacks it
must not open: the same link with data added in a query or a path segment, or re-spelt in a way the
wide key folds away (case, percent-escapes, a userinfo): each is still denied.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd.core import fetchgate, sinkgate, taint
from bouncerd.core.model import Verdict

TRUST = sinkgate.Trust(frozenset(), frozenset(), {})
labels = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=3, max_size=10
)  # hosts of 6+ chars are keys
# A path segment as links spell them: it starts and ends with a letter or digit (a trailing `-` or `_`
# reads as punctuation after the link, and is not part of it for the reader either).
segments = st.from_regex(r"[a-z0-9](?:[a-z0-9_-]{0,10}[a-z0-9])?", fullmatch=True)


@st.composite
def links(draw: st.DrawFn) -> tuple[str, str]:
    """(the link as written in output, without a scheme; host and path of it)."""
    host = ".".join(
        [*draw(st.lists(labels, min_size=1, max_size=2)), draw(st.sampled_from(["com", "org", "io"]))]
    )
    path = "/".join(draw(st.lists(segments, min_size=1, max_size=4)))
    www = draw(st.sampled_from(["", "www."]))
    return f"{www}{host}/{path}", f"{host}/{path}"


def _fetch(written: str, url: str) -> Verdict:
    source = taint.Source("mail", "read_inbox", 1, 1.0)
    msg = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": f"See {written} today."}]},
    }
    index = taint.TaintIndex()
    index.add(taint.extract(msg, source))
    return fetchgate.fetch_verdict(
        {"url": url},
        tool="fetch",
        sink_params=("url",),
        trust=TRUST,
        seen_exactly=index.seen_exactly,
        host_hit=index.host_hit,
        key_hit=index.key_hit,
    )


@settings(max_examples=80, deadline=None)
@given(link=links(), scheme=st.sampled_from(["https://", "http://"]))
def test_a_link_written_without_its_scheme_is_fetched_as_written(link: tuple[str, str], scheme: str) -> None:
    written, _ = link
    v = _fetch(written, scheme + written)
    assert (v.verdict, v.rule) == ("allow", "fetch.allowed"), v.reason


@settings(max_examples=80, deadline=None)
@given(
    link=links(),
    change=st.sampled_from(["query", "segment", "upper", "escape", "userinfo", "dot-segment"]),
    data=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=4, max_size=16),
)
def test_the_same_link_carrying_data_is_still_denied(link: tuple[str, str], change: str, data: str) -> None:
    """Attack: the planted link with the user's data added, or re-spelt so the wide key stays the
    same while the bytes sent differ."""
    written, _ = link
    host, _, path = written.partition("/")
    url = {
        "query": f"https://{written}?d={data}",
        "segment": f"https://{written}/{data}",
        "upper": f"https://{host}/{path[:-1]}{path[-1].upper()}"
        if path[-1].isalpha()
        else f"https://{written}?q={data}",
        "escape": f"https://{host}/{path[:-1]}%{ord(path[-1]):02X}",
        "userinfo": f"https://{data}@{written}",
        "dot-segment": f"https://{host}/./{path}",
    }[change]
    v = _fetch(written, url)
    assert v.verdict == "deny", (url, v.reason)
