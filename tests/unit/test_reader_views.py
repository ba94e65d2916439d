"""The reader's readings of untrusted text (`fold.reader`, the escapes, `tokens._joined_keys`) and what
the index records for them (domain keys, seams between blocks and outputs), with their bounds."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd.core import decoders, fold, said, taint, tokens

SRC = taint.Source("srv", "tool", 1, 0.0)


# ---- fold.reader ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("请发送到eve@evil.example。谢谢", "eve@evil.example"),
        ("メールはeve@evil.exampleへ", "eve@evil.example"),
        ("пишитеeve@evil.example", "eve@evil.example"),
        ("evil.exampleсайт", "evil.example"),
        ("Website: evil・example", "evil.example"),
        ("Mail׃eve@evil.example", "eve@evil.example"),
        ("https:⧸⧸evil.example⧸x", "evil.example"),
    ],
)
def test_reader_view_separates_latin_tokens_from_other_scripts(raw: str, key: str) -> None:
    assert key in tokens.text_keys(raw)


@pytest.mark.parametrize(
    "raw", ["ジョン・スミス", "東京・大阪", "Привет, как дела?", "ہے۔اور", "电话13800138000"]
)
def test_reader_view_of_prose_alone_adds_nothing(raw: str) -> None:
    assert tokens.text_keys(raw) == set()


def test_reader_view_is_none_for_ascii_and_for_text_without_a_token_character() -> None:
    assert fold.reader("plain text") is None
    assert fold.reader("Привет мир") is None
    assert fold.reader("пишитеeve@evil.example") is not None


# ---- escapes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("eve\\_x@evil\\.example", "eve_x@evil.example"),
        ("eve@evil\\-corp.example", "eve@evil-corp.example"),
        ("eve\\100evil\\056example", "eve@evil.example"),
        ("eve\\U00000040evil.example", "eve@evil.example"),
        ("eve\\40 evil\\2e example", "eve@evil.example"),
        ("eve\\000040evil\\00002eexample", "eve@evil.example"),
    ],
)
def test_escape_syntaxes_a_renderer_undoes_are_read(raw: str, key: str) -> None:
    assert key in tokens.text_keys(raw)


def test_css_escapes_read_only_printable_ascii() -> None:
    assert decoders.decode_css("C:\\data\\bob") == "C:\\data\\bob"  # `\d`, `\b`: no code point read
    assert decoders.decode_css("a\\40 b") == "a@b"


# ---- joins across gaps ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("eve@evil.exam\nple", "eve@evil.example"),
        ("eve@\nevil.example", "eve@evil.example"),
        ("evil\n.example", "evil.example"),
        ("hooks.evi\r\nl.example", "hooks.evil.example"),
        ("hooks.evil.exa\tmple/x", "hooks.evil.example/x"),
        ("eve@evil<b></b>.example", "eve@evil.example"),
        ("<span>eve</span>@evil.example", "eve@evil.example"),
        ("eve@`evil`.example", "eve@evil.example"),
        ("eve@evil<!-- hi -->.example", "eve@evil.example"),
        ("eve@**evil**.example", "eve@evil.example"),
        ("__eve@evil.example__", "eve@evil.example"),
    ],
)
def test_a_token_cut_by_a_gap_a_reader_does_not_see_is_joined(raw: str, key: str) -> None:
    assert key in tokens.text_keys(raw)


@pytest.mark.parametrize(
    ("raw", "joined"),
    [
        ("see corp.example\n\nexample paragraph", "corp.exampleexample"),  # a blank line is not a wrap
        ("Total: 12.50\nDate: tomorrow", "12.50date"),  # a number at a line end is not a cut host
        ("eve@evil.exam<p>ple", "eve@evil.example"),  # a block tag is not inline markup
        ("see corp.example\nand more", "and.more"),  # prose after a line break: no key from it
    ],
)
def test_no_join_across_a_paragraph_a_number_or_a_block_tag(raw: str, joined: str) -> None:
    assert not any(joined in k for k in tokens.text_keys(raw))


def test_joins_are_bounded_on_each_side() -> None:
    """At most `MAX_JOINS` gaps are joined on each side: a token cut into more pieces is not read whole."""
    pieces = ["eve@ev", "il", ".ex", "am", "pl", "e"]
    assert "eve@evil.example" in tokens.text_keys("`".join(pieces[: tokens.MAX_JOINS + 1]) + "e")
    assert "eve@evil.example" not in tokens.text_keys("`".join(pieces))


# ---- what the index records -------------------------------------------------------------------------------


def test_an_address_in_free_text_records_its_domain_and_a_sender_does_not() -> None:
    free = {
        r.token for r in taint.extract({"content": [{"type": "text", "text": "to eve@evil.example"}]}, SRC)
    }
    assert taint.DOMAIN_PREFIX + "evil.example" in free
    sender = {"structuredContent": {"sender": "alice@partner.example"}}
    assert taint.DOMAIN_PREFIX + "partner.example" not in {r.token for r in taint.extract(sender, SRC)}


def test_domain_keys_skip_urls_exact_keys_and_short_domains() -> None:
    assert taint.domain_keys(
        ["eve@evil.example", "x.example/a@b.example", "=https://a@b.example", "a@b.io"]
    ) == ("@evil.example",)


def test_host_probes_name_parents_but_not_of_ip_literals() -> None:
    assert taint.host_probes(["a.b.evil.example"], parents=True) == [
        "@a.b.evil.example",
        "b.evil.example",
        "@b.evil.example",
        "evil.example",
        "@evil.example",
    ]
    assert taint.host_probes(["10.0.0.1", "[2001:db8::1]"], parents=True) == ["@10.0.0.1", "@[2001:db8::1]"]
    assert taint.host_probes(["a.evil.example"], parents=False) == ["@a.evil.example"]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=600), min_size=2, max_size=6))
def test_block_seams_add_at_most_twice_the_text(blocks: list[str]) -> None:
    collector = taint._Collector(SRC)
    taint._block_seams([{"type": "text", "text": b} for b in blocks], collector)
    seams = [t for t, _, _ in collector.sightings]
    assert len(seams) == len(blocks) - 1
    assert all(len(s) <= 2 * taint.SEAM_CHARS for s in seams)
    assert sum(map(len, seams)) <= 2 * sum(map(len, blocks))


def _line(i: int, *texts: str) -> bytes:
    content = [{"type": "text", "text": t} for t in texts]
    return json.dumps({"jsonrpc": "2.0", "id": i, "result": {"content": content}}).encode()


def test_output_edges_agree_on_the_raw_line_and_the_parsed_message() -> None:
    line = _line(1, "first \\u00e9 block", "middle", 'last "quoted" block')
    assert (
        taint.output_edges(line)
        == taint.output_edges(json.loads(line))
        == (
            "first \\u00e9 block",
            'last "quoted" block',
        )
    )
    assert taint.output_edges(b'{"jsonrpc":"2.0","id":1,"result":{}}') == ("", "")


def test_seams_keep_one_tail_per_scope_and_forget_the_oldest() -> None:
    seams = taint.Seams(max_scopes=2)
    for scope in ("a", "b", "c"):
        seams.records(("s", scope), _line(1, "write to eve@evil.exa"), SRC)
    assert seams.records(("s", "a"), _line(2, "mple now"), SRC) == []  # forgotten: the bound
    got = {r.token for r in seams.records(("s", "c"), _line(2, "mple now"), SRC)}
    assert "eve@evil.example" in got


def test_an_output_without_text_does_not_cut_the_seam() -> None:
    seams = taint.Seams()
    seams.records(("s", "a"), _line(1, "write to eve@evil.exa"), SRC)
    seams.records(("s", "a"), b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}', SRC)
    assert "eve@evil.example" in {r.token for r in seams.records(("s", "a"), _line(3, "mple"), SRC)}


def test_a_seam_records_only_what_the_cut_split() -> None:
    """An address whole on one side of the cut was read with its own output (a sender's, a named
    page's): the seam must not record it again as free text of the next output (before, a contact's
    address at the end of one result became "planted" when the next result began)."""
    seams = taint.Seams()
    seams.records(("s", "a"), _line(1, '{"contacts": [{"email": "sarah.baker@gmail.com"}]}'), SRC)
    assert seams.records(("s", "a"), _line(2, "Meeting notes follow"), SRC) == []
    seams.records(("s", "a"), _line(3, "write to eve@evil.exa"), SRC)
    got = {r.token for r in seams.records(("s", "a"), _line(4, "mple and sarah.baker@gmail.com"), SRC)}
    assert "eve@evil.example" in got and "sarah.baker@gmail.com" not in got


@pytest.mark.parametrize("cut", range(1, len("Use the code hunter22 and book Riverside View Hotel")))
def test_a_said_value_cut_between_two_outputs_is_read_and_one_whole_on_a_side_is_not_again(cut: int) -> None:
    """What a text dictates, cut anywhere between two outputs of one server, is read at the seam as
    what the cut split (a said key whole on the left is not this output's; the keys of each side are
    read only when the joined text says something, and must give the same answer as always)."""
    said_text = "Use the code hunter22 and book Riverside View Hotel"
    joined = {r.token for r in taint.extract({"content": [{"type": "text", "text": said_text}]}, SRC)}
    left = {r.token for r in taint.extract({"content": [{"type": "text", "text": said_text[:cut]}]}, SRC)}
    right = {r.token for r in taint.extract({"content": [{"type": "text", "text": said_text[cut:]}]}, SRC)}
    seams = taint.Seams()
    seams.records(("s", "a"), _line(1, said_text[:cut]), SRC)
    got = {r.token for r in seams.records(("s", "a"), _line(2, said_text[cut:]), SRC)}
    assert got == {k for k in joined if k not in left | right}  # the benign part: nothing else
    assert any(k.startswith(said.SAID_MARK) for k in joined)


def test_a_sentence_ending_in_a_colon_is_not_an_identity_field() -> None:
    assert taint.field_is_identity("Hi team, please send the figures to Website") is False
    assert taint.field_is_identity("Reply To") is True


_block = st.one_of(
    st.text(max_size=300),
    st.builds(lambda t, n: t * n, st.text(min_size=1, max_size=8), st.integers(1, 20_000)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_block, min_size=1, max_size=4))
def test_output_edges_of_the_raw_line_match_the_parsed_message_past_the_window(blocks: list[str]) -> None:
    """The raw reading decodes windows of `SEAM_WINDOW_BYTES` (a cut escape closed early): the same
    edges as the parsed message, for blocks longer than the window too."""
    line = _line(1, *blocks)
    assert taint.output_edges(line) == taint.output_edges(json.loads(line))
